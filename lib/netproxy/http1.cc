#include "netproxy/http1.h"

#include "net/address.h"
#include "util/json_value.h"
#include "util/numbers.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace pj::netproxy::http1 {

namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower((unsigned char)x) == std::tolower((unsigned char)y);
         });
}

bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// RFC 9110 section 5.5: a field value holds no control byte but HTAB
// (obs-text, bytes from 0x80, is allowed); CR, LF and NUL never.
bool is_forbidden_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && u != '\t') || u == 0x7f;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

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

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

std::optional<std::string_view> Head::get(std::string_view name) const {
  for (const auto& f : fields)
    if (iequal(f.name, name)) return std::string_view(f.value);
  return std::nullopt;
}

size_t Head::count(std::string_view name) const {
  return static_cast<size_t>(
      std::count_if(fields.begin(), fields.end(), [&](const Field& f) { return iequal(f.name, name); }));
}

void Head::erase(std::string_view name) {
  fields.erase(std::remove_if(fields.begin(), fields.end(), [&](const Field& f) { return iequal(f.name, name); }),
               fields.end());
}

void Head::set(std::string_view name, std::string value) {
  bool done = false;
  for (auto it = fields.begin(); it != fields.end();) {
    if (!iequal(it->name, name)) {
      ++it;
    } else if (!done) {
      it->value = value;
      done = true;
      ++it;
    } else {
      it = fields.erase(it);
    }
  }
  if (!done) fields.push_back({std::string(name), std::move(value)});
}

bool Head::lists(std::string_view name, std::string_view token) const {
  for (const auto& f : fields) {
    if (!iequal(f.name, name)) continue;
    std::string_view v = f.value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      if (iequal(trim(v.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

std::string Head::serialise() const {
  std::string out = start + "\r\n";
  for (const auto& f : fields) out += f.name + ": " + f.value + "\r\n";
  return out + "\r\n";
}

HeadParse parse_head(std::string_view buf, size_t max) {
  HeadParse r;
  size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > max) {
    if (buf.size() >= max) {
      r.progress = Progress::bad;
      r.error = "head larger than " + std::to_string(max) + " bytes";
    }
    return r;
  }
  r.consumed = end + 4;
  r.progress = Progress::bad;
  std::string_view rest = buf.substr(0, end + 2);
  bool first = true;
  while (!rest.empty()) {
    size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (std::any_of(line.begin(), line.end(), is_forbidden_control)) {
      r.error = "control character inside a line";
      return r;
    }
    if (first) {
      if (line.empty()) {
        r.error = "empty start line";
        return r;
      }
      r.head.start = line;
      first = false;
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      r.error = "obsolete line folding";
      return r;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        !std::all_of(line.begin(), line.begin() + static_cast<long>(colon), is_tchar)) {
      r.error = "malformed field line";
      return r;
    }
    r.head.fields.push_back({std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1)))});
  }
  r.progress = Progress::done;
  return r;
}

namespace {

RequestParse bad_request(int status, std::string error) {
  RequestParse r;
  r.progress = Progress::bad;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// A request-target byte: visible ASCII or obs-text; never SP, TAB or a
// control byte, which a lenient server might read as a separator.
bool is_target_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u != 0x7f;
}

}  // namespace

RequestParse parse_request(std::string_view buf, size_t max) {
  HeadParse hp = parse_head(buf, max);
  if (hp.progress == Progress::need_more) return {};
  if (hp.progress == Progress::bad) {
    bool too_large = hp.consumed == 0;  // no end of the head within `max`
    return bad_request(too_large ? 431 : 400, hp.error);
  }
  std::string_view line = hp.head.start;
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return bad_request(400, "malformed request line");
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return bad_request(400, "malformed request line (method, target and version, one space apart)");
  std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                   version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_tchar))
    return bad_request(400, "malformed method");
  if (target.empty() || !std::all_of(target.begin(), target.end(), is_target_byte))
    return bad_request(400, "control character or space in the request target");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    bool looks_like_version = version.starts_with("HTTP/");
    return bad_request(looks_like_version ? 505 : 400,
                       looks_like_version ? "only HTTP/1.0 and HTTP/1.1" : "malformed HTTP version");
  }
  RequestParse r;
  r.progress = Progress::done;
  r.line = {std::string(method), std::string(target), std::string(version)};
  r.head = std::move(hp.head);
  r.consumed = hp.consumed;
  return r;
}

TargetForm target_form(const RequestLine& line) {
  std::string_view t = line.target;
  if (line.method == "CONNECT") return TargetForm::authority;
  if (t == "*") return TargetForm::asterisk;
  if (t.starts_with("/")) return TargetForm::origin;
  size_t colon = t.find(':');
  if (colon != std::string_view::npos && colon > 0 && t.substr(colon).starts_with("://") &&
      std::isalpha(static_cast<unsigned char>(t[0])) &&
      std::all_of(t.begin(), t.begin() + static_cast<long>(colon), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
      }))
    return TargetForm::absolute;
  return TargetForm::invalid;
}

OriginTarget intercepted_target(const RequestLine& line, std::string_view host, uint16_t port) {
  auto refuse = [](int status, std::string why) { return OriginTarget{{}, status, std::move(why)}; };
  switch (target_form(line)) {
    case TargetForm::origin: return {line.target, 0, {}};
    case TargetForm::authority:
      return refuse(403, "CONNECT inside a connection to a host bound to a credential is refused");
    case TargetForm::asterisk:
      return refuse(403, "the asterisk form (OPTIONS *) is refused on a connection to a host bound to a credential");
    case TargetForm::invalid: return refuse(400, "malformed request target (neither origin form nor absolute form)");
    case TargetForm::absolute: break;
  }
  std::string_view t = line.target;
  size_t scheme_end = t.find("://");
  std::string scheme(t.substr(0, scheme_end));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int default_port = scheme == "https" ? 443 : scheme == "http" ? 80 : 0;
  if (default_port == 0) return refuse(400, "an absolute-form target needs http:// or https://");
  std::string_view rest = t.substr(scheme_end + 3);
  size_t path_at = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_at);
  auto a = parse_authority(authority, default_port);
  std::string named;
  if (a) {
    std::string_view name = a->host;
    if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
    named = net::normalise_host(name).value_or("");
  }
  if (!a || named.empty() || named != host || a->port != port)
    return refuse(403, "an absolute-form target may only name the host this connection is to (" + std::string(host) +
                           ":" + std::to_string(port) + ")");
  std::string_view path = path_at == std::string_view::npos ? std::string_view() : rest.substr(path_at);
  path = path.substr(0, path.find('#'));  // a fragment is never sent (RFC 9110 section 4.2.5)
  return {(path.starts_with("/") ? "" : "/") + std::string(path), 0, {}};
}

namespace {
std::optional<std::uint64_t> parse_length(std::string_view v) {
  v = trim(v);
  if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return util::parse_number<std::uint64_t>(v);
}
}  // namespace

BodyFraming request_framing(const Head& h) {
  BodyFraming f;
  bool te = h.count("Transfer-Encoding") > 0;
  size_t cls = h.count("Content-Length");
  if (te && cls) return f.error = "both Transfer-Encoding and Content-Length", f;
  if (te) {
    auto v = h.get("Transfer-Encoding");
    if (h.count("Transfer-Encoding") != 1 || !iequal(trim(*v), "chunked"))
      return f.error = "a transfer coding other than chunked", f;
    f.framing = Framing::chunked;
    return f;
  }
  if (cls) {
    std::optional<std::uint64_t> len;
    for (const auto& fl : h.fields) {
      if (!iequal(fl.name, "Content-Length")) continue;
      auto l = parse_length(fl.value);
      if (!l || (len && *len != *l)) return f.error = "an invalid or conflicting Content-Length", f;
      len = l;
    }
    f.framing = *len ? Framing::length : Framing::none;
    f.length = *len;
  }
  return f;
}

int status_of(const Head& response) {
  std::string_view s = response.start;
  if (s.size() < 12 || s.substr(0, 7) != "HTTP/1." || s[8] != ' ') return 0;
  for (size_t i = 9; i < 12; ++i)
    if (s[i] < '0' || s[i] > '9') return 0;
  if (s.size() > 12 && s[12] != ' ') return 0;
  return (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
}

BodyFraming response_framing(const Head& h, std::string_view method) {
  BodyFraming f;
  int status = status_of(h);
  if (status == 0) return f.error = "malformed status line", f;
  if (method == "HEAD" || status / 100 == 1 || status == 204 || status == 304) return f;
  if (h.count("Transfer-Encoding")) {
    // A response's coding list must end in chunked, else it runs to the close.
    if (h.count("Transfer-Encoding") != 1 || !iequal(trim(*h.get("Transfer-Encoding")), "chunked"))
      return f.error = "a transfer coding other than chunked", f;
    f.framing = Framing::chunked;
    return f;
  }
  if (h.count("Content-Length")) {
    BodyFraming r = request_framing(h);
    if (!r.error.empty()) return r;
    r.framing = r.length ? Framing::length : Framing::none;
    return r;
  }
  f.framing = Framing::until_close;
  return f;
}

Progress ChunkDecoder::feed(std::string_view in, std::string& out, size_t& used) {
  used = 0;
  while (used < in.size()) {
    switch (s_) {
      case S::size:
      case S::data_crlf:
      case S::trailer: {
        size_t nl = in.find('\n', used);
        size_t take = (nl == std::string_view::npos ? in.size() : nl + 1) - used;
        line_.append(in.substr(used, take));
        used += take;
        if (line_.size() > 1024 && s_ != S::trailer) return error_ = "chunk size line too long", Progress::bad;
        if (s_ == S::trailer && (trailer_bytes_ += take) > kMaxHead)
          return error_ = "trailers too large", Progress::bad;
        if (nl == std::string_view::npos) return Progress::need_more;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r')
          return error_ = "a bare LF in chunk framing", Progress::bad;
        std::string line = line_.substr(0, line_.size() - 2);
        line_.clear();
        if (s_ == S::data_crlf) {
          if (!line.empty()) return error_ = "chunk data longer than its size", Progress::bad;
          s_ = S::size;
        } else if (s_ == S::trailer) {
          if (line.empty()) return Progress::done;
        } else {
          std::string_view hex = std::string_view(line).substr(0, line.find(';'));
          hex = trim(hex);
          if (hex.empty() || hex.size() > 15 ||
              !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit((unsigned char)c); }))
            return error_ = "malformed chunk size", Progress::bad;
          left_ = *util::parse_number<std::uint64_t>(hex, 16);
          s_ = left_ ? S::data : S::trailer;
        }
        break;
      }
      case S::data: {
        size_t take = static_cast<size_t>(std::min<std::uint64_t>(left_, in.size() - used));
        out.append(in.substr(used, take));
        used += take;
        left_ -= take;
        if (!left_) s_ = S::data_crlf;
        break;
      }
    }
  }
  return Progress::need_more;
}

std::string chunk(std::string_view payload) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  return payload.empty() ? std::string("0\r\n\r\n") : std::string(size) + std::string(payload) + "\r\n";
}

bool bound_to(const Binding& b, std::string_view host, uint16_t port, Wire wire) {
  return std::any_of(b.hosts.begin(), b.hosts.end(), [&](const BoundHost& h) {
    if (h.port != port || h.wire != wire) return false;
    return iequal(h.name, host) ||
           (wire == Wire::plain_http && net::is_loopback_host(h.name) && net::is_loopback_host(host));
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

bool path_under(std::string_view target, std::string_view prefix) {
  auto t = lenient_segments(target), p = lenient_segments(prefix);
  if (p.empty()) return true;
  if (t.size() < p.size()) return false;
  return std::equal(p.begin(), p.end(), t.begin(),
                    [](const auto& want, const auto& got) { return want == "*" || want == got; });
}

std::string base64_encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Strict (RFC 4648 section 4): whole groups of the alphabet, '=' only as
// the last one or two characters. EVP_DecodeBlock alone is lenient (it
// skips surrounding whitespace, takes '=' anywhere) and counts padding
// as zero bytes.
std::optional<std::string> base64_decode(std::string_view in) {
  auto letter = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/'; };
  if (in.size() % 4 != 0) return std::nullopt;
  size_t pad = 0;
  while (pad < 2 && pad < in.size() && in[in.size() - 1 - pad] == '=') ++pad;
  if (!std::all_of(in.begin(), in.end() - static_cast<std::ptrdiff_t>(pad), letter)) return std::nullopt;
  std::string out(in.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0 || static_cast<size_t>(n) < pad) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
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
        auto decoded = base64_decode(trim(v.substr(6)));
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
        s.renderings.emplace_back(sent, std::string(trim(std::string_view(f.value).substr(6))));
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

}  // namespace pj::netproxy::http1
