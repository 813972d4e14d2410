// Diagnostics on stderr, prefixed "pi-jail: ". Not for use between clone
// and exec (it allocates).
#pragma once

#include <fmt/format.h>

#include "escape.h"

namespace pj::util {

enum class Verbosity { quiet, normal, verbose };

void set_verbosity(Verbosity v);
Verbosity verbosity();

// Writes "pi-jail: LEVEL: TEXT" and a newline. Each line of `text` goes
// through printable(), a last guard against control bytes the caller did
// not escape; a caller must still escape jail-controlled pieces itself,
// or a newline in them would start a line of its own.
void emit(std::string_view level, std::string_view text);

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  emit("error", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (verbosity() != Verbosity::quiet) emit("warning", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void note(fmt::format_string<Args...> f, Args&&... args) {
  if (verbosity() != Verbosity::quiet) emit("", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (verbosity() == Verbosity::verbose) emit("debug", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace pj::util
