// Diagnostics on stderr, prefixed "pi-jail: ". Not for use between clone
// and exec (it allocates).
#pragma once

#include <fmt/format.h>

#include "escape.h"
#include "result.h"

namespace pj::util {

enum class Verbosity { quiet, normal, verbose };

void set_verbosity(Verbosity v);
Verbosity verbosity();

// Writes "pi-jail: LEVEL: TEXT" and a newline. Each line of `text` goes
// through printable(), a last guard against control bytes the caller did
// not escape; a caller must still escape jail-controlled pieces itself,
// or a newline in them would start a line of its own.
void emit(std::string_view level, std::string_view text);

// Whether stderr is a terminal that passes output as it is (-opost: the
// jailed program's PTY relayed to it, supervisor/terminal.h): every line
// emit() writes then ends in CR LF, as the terminal would otherwise make
// it, so that a line said while a full-screen program runs (Pi's TUI)
// starts the next one at the left margin. Set by the terminal's owner.
void set_stderr_raw(bool raw);

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

// pi-jail's own output on stdout (explain, doctor, help, --version,
// shell-init). Never throws (fmt::print would, and an uncaught exception
// aborts): the first failed write is kept for flush_stdout().
void out_text(std::string_view text);
template <typename... Args>
void out(fmt::format_string<Args...> f, Args&&... args) {
  out_text(fmt::format(f, std::forward<Args>(args)...));
}
// Flush stdout; the first write error since the start, if any
// ("write to standard output: No space left on device (ENOSPC)").
[[nodiscard]] Status flush_stdout();

}  // namespace pj::util
