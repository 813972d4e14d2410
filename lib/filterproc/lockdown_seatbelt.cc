// The Seatbelt backend's lock-down (lockdown.h): the filter's profile was
// applied by sandbox-exec before its exec, and holds for the process's
// whole life; here only what Seatbelt does not cover: the resource limits,
// and (on a Mac) a refusal to serve outside a sandbox. POSIX.
#include <unistd.h>

#include "filterproc/lockdown_common.h"

#ifdef __APPLE__
// libsystem_sandbox: with no operation, whether `pid` runs under a sandbox
// (1) or not (0). Not in a public header; Chromium's Seatbelt::IsSandboxed
// asks it the same way.
extern "C" int sandbox_check(pid_t pid, const char* operation, int type, ...);
#endif

namespace pj::filterproc {

util::Status lock_down(const LockdownLimits& limits) {
#ifdef __APPLE__
  // sandbox-exec applied the profile before this exec; a stand-in, or a
  // mix-up of paths, would have it serve bare: then it stops.
  if (::sandbox_check(::getpid(), nullptr, 0) != 1)
    return util::Error::invalid("lock down (Seatbelt): the filter is not running under its sandbox profile");
#endif
  return set_posix_limits(limits);
}

void release_startup() {}

void before_tls() {}

#ifdef PJ_TEST_SWITCHES
// What a Mac's Seatbelt would refuse the filter; under a stand-in for
// sandbox-exec (the Linux wiring tests) every attempt succeeds.
filterlink::ProbeResult probe_lockdown(const std::string& home) {
  Probe p;
  probe_posix(p, home);
  return std::move(p.result);
}
#endif

}  // namespace pj::filterproc
