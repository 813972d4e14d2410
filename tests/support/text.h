// The text a test checks (output, logs, reports): how often a string
// occurs in it, and bytes spelled in hex.
#pragma once

#include <cstddef>
#include <string>

namespace pj::test {

// How many times `needle` occurs in `text`, overlaps included.
inline size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; ++at) ++n;
  return n;
}

// `bytes` as lowercase hex, two digits a byte.
inline std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

}  // namespace pj::test
