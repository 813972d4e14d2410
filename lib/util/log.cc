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

}  // namespace pj::util
