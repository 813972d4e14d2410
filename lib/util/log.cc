#include "log.h"

#include <cerrno>
#include <cstdio>

#include "escape.h"

namespace pj::util {

namespace {
Verbosity g_verbosity = Verbosity::normal;
int g_stdout_errno = 0;     // the first failed write to stdout
bool g_stderr_raw = false;  // set_stderr_raw()
}  // namespace

void set_verbosity(Verbosity v) { g_verbosity = v; }
void set_stderr_raw(bool raw) { g_stderr_raw = raw; }
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
  std::string line =
      level.empty() ? fmt::format("pi-jail: {}\n", shown) : fmt::format("pi-jail: {}: {}\n", level, shown);
  if (g_stderr_raw)
    for (size_t at = 0; (at = line.find('\n', at)) != std::string::npos; at += 2) line.insert(at, 1, '\r');
  // Nothing is left to tell a failure on stderr to: it is not checked.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void out_text(std::string_view text) {
  if (g_stdout_errno != 0 || text.empty()) return;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) g_stdout_errno = errno ? errno : EIO;
}

Status flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 && g_stdout_errno == 0) g_stdout_errno = errno ? errno : EIO;
  if (g_stdout_errno == 0 && std::ferror(stdout)) g_stdout_errno = EIO;
  if (g_stdout_errno != 0) return Error::from_errno("write to standard output", g_stdout_errno);
  return {};
}

}  // namespace pj::util
