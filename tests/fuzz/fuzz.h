// Helpers shared by the fuzz targets: libFuzzer's entry point gets raw
// bytes; these cut them into the pieces a parser is fed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace pj::fuzz {

inline std::string_view bytes(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

// `in` cut at each `sep`, at most `max` pieces (the last keeps the rest).
inline std::vector<std::string_view> split(std::string_view in, char sep, size_t max) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max) {
    size_t at = in.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(in.substr(0, at));
    in.remove_prefix(at + 1);
  }
  out.push_back(in);
  return out;
}

// The first byte of `in`, taken off (0 when empty): a choice for the target.
inline uint8_t take_byte(std::string_view& in) {
  if (in.empty()) return 0;
  uint8_t b = static_cast<uint8_t>(in.front());
  in.remove_prefix(1);
  return b;
}

// A property the parser promises was broken: a finding, like a crash.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz: broken property: %s\n", what);
  std::abort();
}

}  // namespace pj::fuzz
