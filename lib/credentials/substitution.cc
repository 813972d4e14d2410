#include "credentials/substitution.h"

#include "net/address.h"
#include "util/json_value.h"
#include "util/numbers.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace pj::credentials {

using netproxy::http1::base64_decode;
using netproxy::http1::base64_encode;
using netproxy::http1::Field;

namespace {

// The parser's own: field names and Basic's scheme are case-insensitive,
// and a field value's ends may hold spaces and TABs.
using netproxy::http1::iequal;
using netproxy::http1::trim_ows;

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

namespace {

// Whether two loopback names or literals are the same endpoint: the same
// address however written ("127.1" is 127.0.0.1), or "localhost" beside
// 127.0.0.1 or ::1, which it names. 127.0.0.2 is not 127.0.0.1: another
// service may listen there.
bool same_loopback(std::string_view a, std::string_view b) {
  auto localhost = [](std::string_view s) { return s == "localhost" || s == "localhost."; };
  auto ip_a = net::parse_ip(a), ip_b = net::parse_ip(b);
  if (ip_a && ip_b) return *ip_a == *ip_b;
  auto localhost_literal = [](const std::optional<net::IpAddress>& ip) {
    return ip && (ip->str() == "127.0.0.1" || ip->str() == "::1");
  };
  return (localhost(a) && (localhost(b) || localhost_literal(ip_b))) || (localhost(b) && localhost_literal(ip_a));
}

}  // namespace

bool bound_to(const Binding& b, std::string_view host, uint16_t port, Wire wire) {
  return std::any_of(b.hosts.begin(), b.hosts.end(), [&](const BoundHost& h) {
    if (h.port != port || h.wire != wire) return false;
    return iequal(h.name, host) || (wire == Wire::plain_http && net::is_loopback_host(h.name) &&
                                    net::is_loopback_host(host) && same_loopback(h.name, host));
  });
}

std::vector<const Binding*> placeholders_in(std::string_view text, const std::vector<Binding>& bindings) {
  std::vector<const Binding*> out;
  std::string decoded = text.find('%') != std::string_view::npos ? percent_decode(text) : std::string();
  for (const auto& b : bindings) {
    if (b.placeholder.empty()) continue;
    if (text.find(b.placeholder) != std::string_view::npos || decoded.find(b.placeholder) != std::string::npos)
      out.push_back(&b);
  }
  return out;
}

namespace {
// The segments of a path as path_under reads it.
std::vector<std::string> lenient_segments(std::string_view target) {
  std::string p(target);
  if (auto scheme = p.find("://"); scheme != std::string::npos && scheme < p.find('/')) {
    size_t slash = p.find('/', scheme + 3);
    p = slash == std::string::npos ? "/" : p.substr(slash);
  }
  for (int i = 0; i < 4 && p.find('%') != std::string::npos; ++i) p = percent_decode(p);
  p = p.substr(0, p.find_first_of("?#"));
  std::vector<std::string> segs;
  size_t at = 0;
  while (at <= p.size()) {
    size_t end = p.find_first_of("/\\", at);
    if (end == std::string::npos) end = p.size();
    std::string seg = p.substr(at, end - at);
    seg = seg.substr(0, seg.find(';'));
    for (auto& c : seg) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!seg.empty() && (seg.back() == ' ' || seg.back() == '\t')) seg.pop_back();
    if (seg == "..") {
      if (!segs.empty()) segs.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segs.push_back(std::move(seg));
    }
    at = end + 1;
  }
  return segs;
}
}  // namespace

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit((unsigned char)s[i + 1]) &&
        std::isxdigit((unsigned char)s[i + 2])) {
      out.push_back(static_cast<char>(*util::parse_number<unsigned>(s.substr(i + 1, 2), 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool names_path(std::string_view target, std::string_view path) {
  auto t = lenient_segments(target), p = lenient_segments(path);
  if (p.empty() || t.size() != p.size()) return t == p;
  return std::equal(p.begin(), p.end() - 1, t.begin()) && t.back().starts_with(p.back());
}

bool path_under(std::string_view target, std::string_view prefix) {
  auto t = lenient_segments(target), p = lenient_segments(prefix);
  if (p.empty()) return true;
  if (t.size() < p.size()) return false;
  return std::equal(p.begin(), p.end(), t.begin(),
                    [](const auto& want, const auto& got) { return want == "*" || want == got; });
}

Substitution substitute(Head& request, const std::vector<Binding>& bindings, std::string_view host, uint16_t port,
                        RequestKind kind, Wire wire) {
  Substitution s;
  // `field`: the header `text` is in (null: the request line, a Basic
  // credential's decoded text). A refresh token goes only where its
  // provider's renewal carries it: anywhere else it would reach the token
  // host's other endpoints, which may echo it in a form masking misses.
  auto refuse_unbound = [&](std::string_view text, const Field* field) {
    for (const Binding* b : placeholders_in(text, bindings)) {
      if (!bound_to(*b, host, port, wire)) {
        s.refused_why = fmt::format("a placeholder of {} was sent to {}{}:{}, which it is not bound to", b->name,
                                    wire == Wire::plain_http ? "http://" : "", host, port);
      } else if (b->carriage == Carriage::token_exchange && !(kind == RequestKind::token_exchange && field &&
                                                              !b->header.empty() && iequal(field->name, b->header))) {
        s.refused_why = fmt::format("a placeholder of {} (a refresh token) may go only in its token exchange's body{}",
                                    b->name, b->header.empty() ? "" : " or " + b->header + " field");
      } else {
        continue;
      }
      s.refused = true;
      s.refused_binding = b->name;
      return true;
    }
    return false;
  };
  // Look everywhere first: a refusal changes nothing.
  if (refuse_unbound(request.start, nullptr)) return s;
  std::vector<std::optional<std::string>> basic(request.fields.size());
  for (size_t i = 0; i < request.fields.size(); ++i) {
    const Field& f = request.fields[i];
    if (refuse_unbound(f.name, nullptr) || refuse_unbound(f.value, &f)) return s;
    if (iequal(f.name, "Authorization") || iequal(f.name, "Proxy-Authorization")) {
      std::string_view v = f.value;
      if (v.size() > 6 && iequal(v.substr(0, 6), "Basic ")) {
        auto decoded = base64_decode(trim_ows(v.substr(6)));
        if (decoded) {
          if (refuse_unbound(*decoded, nullptr)) return s;
          basic[i] = std::move(decoded);
        }
      }
    }
  }
  auto use = [&](const Binding& b) {
    if (std::find(s.used.begin(), s.used.end(), b.name) == s.used.end()) s.used.push_back(b.name);
    if (std::find(s.used_placeholders.begin(), s.used_placeholders.end(), b.placeholder) == s.used_placeholders.end())
      s.used_placeholders.push_back(b.placeholder);
  };
  for (size_t i = 0; i < request.fields.size(); ++i) {
    Field& f = request.fields[i];
    if (basic[i]) {
      bool changed = false;
      for (const auto& b : bindings)
        if (!b.placeholder.empty() && basic[i]->find(b.placeholder) != std::string::npos) {
          replace_all(*basic[i], b.placeholder, b.real);
          use(b);
          changed = true;
        }
      if (changed) {
        std::string sent = base64_encode(*basic[i]);
        s.renderings.emplace_back(sent, std::string(trim_ows(std::string_view(f.value).substr(6))));
        f.value = "Basic " + sent;
      }
      continue;
    }
    for (const auto& b : bindings)
      if (!b.placeholder.empty() && f.value.find(b.placeholder) != std::string::npos) {
        replace_all(f.value, b.placeholder, b.real);
        use(b);
      }
  }
  return s;
}

namespace {

// The base64 characters (RFC 4648 section 4, no padding) that depend on
// `value` alone when it starts `align` bytes (0, 1 or 2) into a 3-byte
// group: what any base64 text holding `value` at that alignment contains.
std::string base64_at(std::string_view value, size_t align, bool url) {
  std::string bytes(align, '\0');
  bytes.append(value);
  while (bytes.size() % 3) bytes.push_back('\0');
  std::string all = base64_encode(bytes);
  // Character j carries bits [6j, 6j+6) of the bytes: keep those inside the value.
  size_t first = (8 * align + 5) / 6, last = 8 * (align + value.size()) / 6;  // [first, last)
  std::string out = last > first ? all.substr(first, last - first) : std::string();
  if (url)
    for (auto& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

// ASCII only, whatever the locale: the masker runs on every byte of a
// substituted response.
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

enum class Match { none, partial, full };

// One byte of a real value, `want`, at the start of `s`: itself in either
// case, %XX (RFC 3986 section 2.1), \u00XX or, for '/', \/ (RFC 8259
// section 7). `len`: the bytes it took.
Match match_byte(std::string_view s, char want, size_t& len) {
  if (s.empty()) return Match::partial;
  if (lower(s[0]) == lower(want)) return len = 1, Match::full;
  std::string_view shape;
  size_t hex_at = 0;
  if (s[0] == '%')
    shape = "%hh", hex_at = 1;
  else if (s[0] == '\\' && s.size() > 1 && s[1] == want && want == '/')
    return len = 2, Match::full;
  else if (s[0] == '\\')
    shape = "\\u00hh", hex_at = 4;
  else
    return Match::none;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (i >= s.size()) return Match::partial;
    if (shape[i] == 'h' ? hex_value(s[i]) < 0 : s[i] != shape[i]) return Match::none;
  }
  char c = static_cast<char>(hex_value(s[hex_at]) * 16 + hex_value(s[hex_at + 1]));
  if (lower(c) != lower(want)) return Match::none;
  return len = shape.size(), Match::full;
}

// `pattern` spelled at the start of `s`, byte by byte as match_byte reads it.
Match match_spelled(std::string_view s, std::string_view pattern, size_t& len) {
  size_t at = 0;
  for (char want : pattern) {
    size_t n = 0;
    Match m = match_byte(s.substr(at), want, n);
    if (m != Match::full) return m;
    at += n;
  }
  return len = at, Match::full;
}

// The longest run of consecutive bytes of `secret` spelled at the start
// of `s` (as match_byte reads them), at least `min` long: full with its
// length; partial when `s` ended inside a run that could still reach
// `min` or grow (`len`: the run at least `min` long so far, else 0);
// none otherwise.
Match match_run(std::string_view s, std::string_view secret, size_t min, size_t& len) {
  Match best = Match::none;
  len = 0;
  if (s.empty()) return Match::none;
  const bool escaped = s[0] == '%' || s[0] == '\\';
  for (size_t j = 0; j < secret.size(); ++j) {
    if (!escaped && lower(s[0]) != lower(secret[j])) continue;  // cannot start here
    size_t at = 0, k = 0;
    bool ran_out = false;
    while (j + k < secret.size()) {
      size_t n = 0;
      Match b = match_byte(s.substr(at), secret[j + k], n);
      if (b == Match::partial) ran_out = true;
      if (b != Match::full) break;
      at += n;
      ++k;
    }
    if (ran_out && k > 0 && (k >= min || j + min <= secret.size())) {
      len = k >= min ? at : 0;
      return Match::partial;
    }
    if (k >= min && (best == Match::none || at > len)) best = Match::full, len = at;
  }
  return best;
}

// What of a real value is secret: what follows the prefix it shares with
// its placeholder (placeholders keep the provider's prefix, "sk-ant-api03-").
std::string_view secret_part(std::string_view real, std::string_view placeholder) {
  size_t n = 0;
  while (n < real.size() && n < placeholder.size() && real[n] == placeholder[n]) ++n;
  return real.substr(n);
}

}  // namespace

Masker::Masker(const std::vector<Binding>& bindings,
               const std::vector<std::pair<std::string, std::string>>& renderings) {
  constexpr size_t kMinEncoded = 8;  // shorter encodings would match ordinary text
  for (const auto& b : bindings) {
    if (b.real.empty()) continue;
    pairs_.emplace_back(b.real, b.placeholder);
    if (std::string_view part = secret_part(b.real, b.placeholder); part.size() >= kMinRun)
      runs_.emplace_back(std::string(part), b.placeholder);
    for (bool url : {false, true})
      for (size_t align = 0; align < 3; ++align) {
        std::string enc = base64_at(b.real, align, url);
        if (enc.size() >= kMinEncoded) pairs_.emplace_back(enc, base64_at(b.placeholder, align, url));
      }
  }
  for (const auto& r : renderings)
    if (!r.first.empty()) pairs_.push_back(r);
  run_starts_['%'] = run_starts_['\\'] = !runs_.empty();
  for (const auto& r : runs_)
    for (char c : r.first) run_starts_[static_cast<unsigned char>(lower(c))] = true;
  // The longest first: a real value that contains another is masked whole.
  std::sort(pairs_.begin(), pairs_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  pairs_.erase(std::unique(pairs_.begin(), pairs_.end()), pairs_.end());
  auto folded = [](char c) { return static_cast<unsigned char>(lower(c)); };
  auto pair_of = [&](char a, char b) { return static_cast<size_t>(folded(a)) << 8 | folded(b); };
  if (!pairs_.empty() || !runs_.empty()) starts_alone_['%'] = starts_alone_['\\'] = true;
  for (const auto& p : pairs_) {
    starts_[folded(p.first[0])] = true;
    if (p.first.size() == 1)
      starts_alone_[folded(p.first[0])] = true;
    else
      starts_pair_[pair_of(p.first[0], p.first[1])] = true;
  }
  for (const auto& r : runs_)
    for (size_t i = 0; i < r.first.size(); ++i) {
      starts_[folded(r.first[i])] = true;
      if (i + 1 < r.first.size()) starts_pair_[pair_of(r.first[i], r.first[i + 1])] = true;
    }
}

// Whether a spelling of a real value, or a run of a secret, may start at
// `at`: false only where every match would be Match::none (match_byte
// takes a byte in either case, or an escape starting with '%' or '\').
bool Masker::may_start(std::string_view data, size_t at) const {
  auto c = static_cast<unsigned char>(lower(data[at]));
  if (starts_alone_[c]) return true;
  if (!starts_[c]) return false;
  if (at + 1 == data.size()) return true;  // the next byte decides
  char next = data[at + 1];
  if (next == '%' || next == '\\') return true;
  return starts_pair_[static_cast<size_t>(c) << 8 | static_cast<unsigned char>(lower(next))];
}

size_t Masker::scan(std::string_view data, End end, std::string& out, std::uint64_t& masked) const {
  size_t at = 0;
  while (at < data.size()) {
    // Most bytes start nothing: they go out as one span.
    size_t plain = at;
    while (plain < data.size() && !may_start(data, plain)) ++plain;
    out.append(data.substr(at, plain - at));
    if ((at = plain) == data.size()) break;
    std::string_view rest = data.substr(at);
    bool waiting = false;
    const std::pair<std::string, std::string>* found = nullptr;
    size_t found_len = 0;
    for (const auto& p : pairs_) {
      size_t len = 0;
      Match m = match_spelled(rest, p.first, len);
      if (m == Match::partial) waiting = true;
      if (m == Match::full && !found) found = &p, found_len = len;
    }
    // A run of a secret (a substring, a truncated echo) when no whole value
    // is here; most bytes start none (run_starts_: a byte of a secret
    // part in either case, or an escape's first byte).
    for (const auto& r : runs_) {
      if (found || !run_starts_[static_cast<unsigned char>(lower(rest[0]))]) break;
      size_t len = 0;
      Match m = match_run(rest, r.first, kMinRun, len);
      if (m == Match::partial && end == End::final && len > 0) m = Match::full;  // it ends with the data
      if (m == Match::partial) waiting = true;
      if (m == Match::full) found = &r, found_len = len;
    }
    if (waiting && end == End::more_may_come) return at;  // a longer value may still complete here
    if (found) {
      out += found->second;
      at += found_len;
      ++masked;
      continue;
    }
    out += data[at++];
  }
  return at;
}

std::string Masker::mask(std::string_view s) const {
  std::string out;
  std::uint64_t unused = 0;
  scan(s, End::final, out, unused);
  return out;
}

std::string Masker::feed(std::string_view in) {
  held_.append(in);
  std::string out;
  size_t used = scan(held_, End::more_may_come, out, masked_);
  held_.erase(0, used);
  return out;
}

std::string Masker::finish() {
  // A prefix of a real value at the very end is dropped; a shorter run of
  // a secret's bytes than kMinRun is ordinary text and goes on.
  bool prefix = std::any_of(pairs_.begin(), pairs_.end(), [&](const auto& p) {
    size_t len = 0;
    return match_spelled(held_, p.first, len) != Match::none;
  });
  std::string out;
  if (!prefix) scan(held_, End::final, out, masked_);
  held_.clear();
  return out;
}

namespace {

bool is_token_member(std::string_view key) { return key == "access_token" || key == "refresh_token"; }

// Depth-first over `v` (its depth bounded by the parser's kMaxDepth).
std::optional<std::string> token_outside(const util::json::Value& v, const std::vector<std::string>& placeholders) {
  if (const auto* a = v.as_array())
    for (const auto& e : *a)
      if (auto t = token_outside(e, placeholders)) return t;
  if (const auto* o = v.as_object())
    for (const auto& m : *o) {
      if (is_token_member(m.key)) {
        const std::string* s = m.value.as_string();
        if (!s || std::find(placeholders.begin(), placeholders.end(), *s) == placeholders.end()) return m.key;
      }
      if (auto t = token_outside(m.value, placeholders)) return t;
    }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unrewritten_token(std::string_view body, const std::vector<std::string>& placeholders) {
  auto doc = util::json::parse(body);
  if (!doc) {
    for (std::string_view key : {"access_token", "refresh_token"})
      if (body.find(key) != std::string_view::npos) return std::string(key);
    return std::nullopt;
  }
  return token_outside(*doc, placeholders);
}

bool looks_compressed(std::string_view b) {
  auto at = [&](size_t i) { return static_cast<unsigned char>(b[i]); };
  if (b.size() >= 2 && at(0) == 0x1f && at(1) == 0x8b) return true;  // gzip (RFC 1952)
  if (b.size() >= 2 && at(0) == 0x78 && (at(1) == 0x01 || at(1) == 0x5e || at(1) == 0x9c || at(1) == 0xda))
    return true;                                                                             // zlib (RFC 1950)
  return b.size() >= 4 && at(0) == 0x28 && at(1) == 0xb5 && at(2) == 0x2f && at(3) == 0xfd;  // zstd (RFC 8878)
}

}  // namespace pj::credentials
