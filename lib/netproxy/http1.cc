#include "netproxy/http1.h"

#include "net/address.h"
#include "util/numbers.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

namespace pj::netproxy::http1 {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower((unsigned char)x) == std::tolower((unsigned char)y);
         });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

namespace {

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
      if (iequal(trim_ows(v.substr(0, comma)), token)) return true;
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
    r.head.fields.push_back({std::string(line.substr(0, colon)), std::string(trim_ows(line.substr(colon + 1)))});
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
  v = trim_ows(v);
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
    if (h.count("Transfer-Encoding") != 1 || !iequal(trim_ows(*v), "chunked"))
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
    if (h.count("Transfer-Encoding") != 1 || !iequal(trim_ows(*h.get("Transfer-Encoding")), "chunked"))
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
          hex = trim_ows(hex);
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

}  // namespace pj::netproxy::http1
