#include "netproxy/http1.h"

#include <algorithm>
#include <cctype>

namespace pj::netproxy::http1 {

namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower((unsigned char)x) == std::tolower((unsigned char)y); });
}

bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
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
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
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
  return static_cast<size_t>(std::count_if(fields.begin(), fields.end(), [&](const Field& f) { return iequal(f.name, name); }));
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
    if (line.find('\0') != std::string_view::npos || line.find('\r') != std::string_view::npos ||
        line.find('\n') != std::string_view::npos) {
      r.error = "a NUL, CR or LF inside a line";
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
std::optional<std::uint64_t> parse_length(std::string_view v) {
  v = trim(v);
  if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoull(std::string(v));
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
        if (s_ == S::trailer && (trailer_bytes_ += take) > kMaxHead) return error_ = "trailers too large", Progress::bad;
        if (nl == std::string_view::npos) return Progress::need_more;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') return error_ = "a bare LF in chunk framing", Progress::bad;
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
          if (hex.empty() || hex.size() > 15 || !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit((unsigned char)c); }))
            return error_ = "malformed chunk size", Progress::bad;
          left_ = std::stoull(std::string(hex), nullptr, 16);
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

bool bound_to(const Binding& b, std::string_view host, uint16_t port) {
  return std::any_of(b.hosts.begin(), b.hosts.end(), [&](const BoundHost& h) { return h.port == port && iequal(h.name, host); });
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
  return std::equal(p.begin(), p.end(), t.begin());
}

std::string base64_encode(std::string_view in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad || (v[k] = val(c)) < 0) {
        return std::nullopt;
      }
    }
    unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
    out.push_back(static_cast<char>(x >> 16));
    if (pad < 2) out.push_back(static_cast<char>((x >> 8) & 255));
    if (pad < 1) out.push_back(static_cast<char>(x & 255));
  }
  return out;
}

Substitution substitute(Head& request, const std::vector<Binding>& bindings, std::string_view host, uint16_t port) {
  Substitution s;
  auto refuse_unbound = [&](std::string_view text) {
    for (const Binding* b : placeholders_in(text, bindings))
      if (!bound_to(*b, host, port)) {
        s.refused = true;
        s.refused_binding = b->name;
        return true;
      }
    return false;
  };
  // Look everywhere first: a refusal changes nothing.
  if (refuse_unbound(request.start)) return s;
  std::vector<std::optional<std::string>> basic(request.fields.size());
  for (size_t i = 0; i < request.fields.size(); ++i) {
    const Field& f = request.fields[i];
    if (refuse_unbound(f.name) || refuse_unbound(f.value)) return s;
    if (iequal(f.name, "Authorization") || iequal(f.name, "Proxy-Authorization")) {
      std::string_view v = f.value;
      if (v.size() > 6 && iequal(v.substr(0, 6), "Basic ")) {
        auto decoded = base64_decode(trim(v.substr(6)));
        if (decoded) {
          if (refuse_unbound(*decoded)) return s;
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

Masker::Masker(const std::vector<Binding>& bindings, const std::vector<std::pair<std::string, std::string>>& renderings) {
  for (const auto& b : bindings)
    if (!b.real.empty()) pairs_.emplace_back(b.real, b.placeholder);
  for (const auto& r : renderings)
    if (!r.first.empty()) pairs_.push_back(r);
  // The longest first: a real value that contains another is masked whole.
  std::sort(pairs_.begin(), pairs_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::string Masker::mask(std::string_view s) const {
  std::string out(s);
  for (const auto& [real, ph] : pairs_) replace_all(out, real, ph);
  return out;
}

std::string Masker::feed(std::string_view in) {
  held_.append(in);
  std::string out;
  for (const auto& [real, ph] : pairs_)
    for (size_t at = held_.find(real); at != std::string::npos; at = held_.find(real, at + ph.size())) {
      held_.replace(at, real.size(), ph);
      ++masked_;
    }
  // Keep back the longest tail that is the start of a real value.
  size_t keep = 0;
  for (const auto& [real, ph] : pairs_) {
    size_t most = std::min(real.size() - 1, held_.size());
    for (size_t k = most; k > keep; --k)
      if (held_.compare(held_.size() - k, k, real, 0, k) == 0) {
        keep = k;
        break;
      }
  }
  out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string Masker::finish() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace pj::netproxy::http1
