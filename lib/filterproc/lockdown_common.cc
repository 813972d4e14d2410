#include "filterproc/lockdown_common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include <fmt/format.h>

namespace pj::filterproc {

util::Status stage_failed(const char* stage, int err) {
  return util::Error::from_errno(fmt::format("lock down ({})", stage), err);
}

util::Status set_limit(int resource, rlim_t value, const char* stage) {
  rlimit r{value, value};
  if (::setrlimit(resource, &r) != 0) return stage_failed(stage, errno);
  return {};
}

namespace {

// Its descriptors for its connections. macOS refuses more than OPEN_MAX
// (10240) whatever the hard limit says (setrlimit(2), EINVAL).
util::Status set_open_files(std::uint64_t wanted) {
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return stage_failed("RLIMIT_NOFILE", errno);
  const rlim_t files = std::min<rlim_t>(now.rlim_max, wanted);
  rlimit r{files, files};
  if (::setrlimit(RLIMIT_NOFILE, &r) == 0) return {};
  if (errno != EINVAL) return stage_failed("RLIMIT_NOFILE", errno);
  return set_limit(RLIMIT_NOFILE, std::min<rlim_t>(files, 10240), "RLIMIT_NOFILE");
}

}  // namespace

util::Status set_posix_limits(const LockdownLimits& limits) {
  if (auto st = set_open_files(limits.open_files); !st) return st;
  if (auto st = set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE"); !st) return st;
  if (auto st = set_limit(RLIMIT_FSIZE, 0, "RLIMIT_FSIZE"); !st) return st;
#ifndef PJ_SANITIZED
  // A relay that outgrows its connections' buffers is broken or taken
  // over: its allocations fail (and it ends) before the host's memory
  // does.
  if (auto st = set_limit(RLIMIT_DATA, limits.data_bytes, "RLIMIT_DATA"); !st) return st;
#endif
  return {};
}

#ifdef PJ_TEST_SWITCHES
}  // namespace pj::filterproc

// Not declared by macOS's <unistd.h>.
extern char** environ;

namespace pj::filterproc {

void Probe::attempt(std::string what, bool ok) { result.attempts.push_back({std::move(what), ok ? 0 : errno}); }

bool opens(const char* path, int flags) {
  int fd = ::open(path, flags | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

void probe_posix(Probe& p, const std::string& home) {
  p.attempt("open /etc/passwd", opens("/etc/passwd", O_RDONLY));
  p.attempt("open the home directory " + home, opens(home.c_str(), O_RDONLY | O_DIRECTORY));
  // A process (on Linux: clone without CLONE_THREAD; a thread is allowed).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  p.attempt("fork a process", child > 0);
  p.attempt("kill the supervisor (signal 0)", ::kill(::getppid(), 0) == 0);
  errno = ENOENT;
  p.attempt("inherit an environment variable", environ && environ[0]);
}
#endif

}  // namespace pj::filterproc
