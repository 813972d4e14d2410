// The Seatbelt backend's lock-down (lockdown.h): the filter's profile was
// applied by sandbox-exec before its exec, and holds for the process's
// whole life; here only what Seatbelt does not cover: the resource limits,
// and (on a Mac) a refusal to serve outside a sandbox. POSIX.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include <fmt/format.h>

#include "filterproc/lockdown.h"

#ifdef __APPLE__
// libsystem_sandbox: with no operation, whether `pid` runs under a sandbox
// (1) or not (0). Not in a public header; Chromium's Seatbelt::IsSandboxed
// asks it the same way.
extern "C" int sandbox_check(pid_t pid, const char* operation, int type, ...);
#endif

namespace pj::filterproc {

namespace {

util::Status stage_failed(const char* stage, int err) {
  return util::Error::from_errno(fmt::format("lock down ({})", stage), err);
}

util::Status set_limit(int resource, rlim_t value, const char* stage) {
  rlimit r{value, value};
  if (::setrlimit(resource, &r) != 0) return stage_failed(stage, errno);
  return {};
}

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

util::Status lock_down(const LockdownLimits& limits) {
#ifdef __APPLE__
  // sandbox-exec applied the profile before this exec; a stand-in, or a
  // mix-up of paths, would have it serve bare: then it stops.
  if (::sandbox_check(::getpid(), nullptr, 0) != 1)
    return util::Error::invalid("lock down (Seatbelt): the filter is not running under its sandbox profile");
#endif
  if (auto st = set_open_files(limits.open_files); !st) return st;
  if (auto st = set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE"); !st) return st;
  if (auto st = set_limit(RLIMIT_FSIZE, 0, "RLIMIT_FSIZE"); !st) return st;
#ifndef PJ_SANITIZED
  // As on Linux: a relay that outgrows its connections' buffers ends
  // before the host's memory does.
  if (auto st = set_limit(RLIMIT_DATA, limits.data_bytes, "RLIMIT_DATA"); !st) return st;
#endif
  return {};
}

void release_startup() {}

#ifdef PJ_TEST_SWITCHES
// What a Mac's Seatbelt would refuse the filter; under a stand-in for
// sandbox-exec (the Linux wiring tests) every attempt succeeds.
filterlink::ProbeResult probe_lockdown(const std::string& home) {
  filterlink::ProbeResult r;
  auto attempt = [&r](std::string what, bool ok) { r.attempts.push_back({std::move(what), ok ? 0 : errno}); };
  auto open_closes = [](const char* path, int flags) {
    int fd = ::open(path, flags | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  attempt("open /etc/passwd", open_closes("/etc/passwd", O_RDONLY));
  attempt("open the home directory " + home, open_closes(home.c_str(), O_RDONLY | O_DIRECTORY));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  attempt("fork a process", child > 0);
  attempt("kill the supervisor (signal 0)", ::kill(::getppid(), 0) == 0);
  errno = ENOENT;
  attempt("inherit an environment variable", environ && environ[0]);
  return r;
}
#endif

}  // namespace pj::filterproc
