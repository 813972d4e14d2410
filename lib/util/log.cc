#include "log.h"

#include <cerrno>
#include <cstdio>

#include "escape.h"

namespace pj::util {

namespace {
Verbosity g_verbosity = Verbosity::normal;
int g_stdout_errno = 0;  // the first failed write to stdout
}  // namespace

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
  std::string line =
      level.empty() ? fmt::format("pi-jail: {}\n", shown) : fmt::format("pi-jail: {}: {}\n", level, shown);
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
