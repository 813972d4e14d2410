#include "log.h"

#include <cstdio>

#include "escape.h"

namespace pj::util {

namespace {
Verbosity g_verbosity = Verbosity::normal;
}

void set_verbosity(Verbosity v) { g_verbosity = v; }
Verbosity verbosity() { return g_verbosity; }

namespace {

// `text` with each line passed through printable(), its line breaks kept.
std::string printable_lines(std::string_view text) {
  std::string out;
  for (size_t start = 0;;) {
    size_t end = text.find('\n', start);
    out += printable(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    out += '\n';
    start = end + 1;
  }
}

}  // namespace

void emit(std::string_view level, std::string_view text) {
  std::string shown = printable_lines(text);
  if (level.empty())
    fmt::print(stderr, "pi-jail: {}\n", shown);
  else
    fmt::print(stderr, "pi-jail: {}: {}\n", level, shown);
  std::fflush(stderr);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) hex(c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates, <= U+10FFFF).
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    if (cp >= 0x80 && cp <= 0x9f) {  // C1 controls (CSI among them)
      for (size_t k = 0; k < len; ++k) hex(static_cast<unsigned char>(text[i + k]));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace pj::util
