#include "log.h"

#include <cstdio>

namespace pj::util {

namespace {
Verbosity g_verbosity = Verbosity::normal;
}

void set_verbosity(Verbosity v) { g_verbosity = v; }
Verbosity verbosity() { return g_verbosity; }

void emit(std::string_view level, std::string_view text) {
  if (level.empty())
    fmt::print(stderr, "pi-jail: {}\n", text);
  else
    fmt::print(stderr, "pi-jail: {}: {}\n", level, text);
  std::fflush(stderr);
}

}  // namespace pj::util
