#include "escape.h"

#include <fmt/format.h>

namespace pj::util {

std::optional<Utf8Char> decode_utf8(std::string_view s, size_t at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char lead = byte(at);
  if (lead < 0x80) return Utf8Char{lead, 1};
  size_t length;
  char32_t code, smallest;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, code = lead & 0x1f, smallest = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, code = lead & 0x0f, smallest = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, code = lead & 0x07, smallest = 0x10000;
  } else {
    return std::nullopt;  // a continuation byte, 0xC0/0xC1 (always overlong), or above 0xF4
  }
  if (s.size() - at < length) return std::nullopt;
  for (size_t i = 1; i < length; ++i) {
    unsigned char next = byte(at + i);
    if ((next & 0xc0) != 0x80) return std::nullopt;
    code = (code << 6) | (next & 0x3f);
  }
  if (code < smallest || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return std::nullopt;
  return Utf8Char{code, length};
}

namespace {

// The escape for a control character; empty for any other.
std::string control_escape(char32_t code) {
  switch (code) {
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\r': return "\\r";
  }
  if (code < 0x20 || code == 0x7f) return fmt::format("\\x{:02x}", static_cast<unsigned>(code));
  if (code >= 0x80 && code <= 0x9f) return fmt::format("\\u{:04x}", static_cast<unsigned>(code));
  return {};
}

}  // namespace

std::string printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    auto c = decode_utf8(bytes, at);
    if (!c) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(bytes[at]));
      ++at;
      continue;
    }
    std::string escaped = control_escape(c->code);
    if (escaped.empty())
      out.append(bytes.substr(at, c->length));
    else
      out += escaped;
    at += c->length;
  }
  return out;
}

}  // namespace pj::util
