// What both backends' lock-downs (lockdown.cc, lockdown_seatbelt.cc) do
// alike, POSIX only: the resource limits, and in test builds the probe's
// attempts that a locked-down filter must fail on any platform.
#pragma once

#include <sys/resource.h>

#include "filterproc/lockdown.h"
#include "util/result.h"

#ifdef PJ_TEST_SWITCHES
#include <string>

#include "filterlink/messages.h"
#endif

namespace pj::filterproc {

// "lock down (STAGE)" with `err`.
util::Status stage_failed(const char* stage, int err);
// Soft and hard limit of `resource` to `value`.
util::Status set_limit(int resource, rlim_t value, const char* stage);
// RLIMIT_NOFILE (at most the hard limit, and at most OPEN_MAX where the
// kernel refuses more: macOS), no core, no file it could grow, and
// RLIMIT_DATA (not in sanitizer builds, which map terabytes of shadow).
util::Status set_posix_limits(const LockdownLimits& limits);

#ifdef PJ_TEST_SWITCHES
// A probe's attempts, each with its errno (0 when it succeeded).
struct Probe {
  filterlink::ProbeResult result;
  void attempt(std::string what, bool ok);
};
// Whether `path` opens with `flags` (closed at once).
bool opens(const char* path, int flags);
// The attempts every backend's filter must fail: /etc/passwd and the
// user's home directory, a process of its own, a signal to the
// supervisor, an environment variable inherited.
void probe_posix(Probe& p, const std::string& home);
#endif

}  // namespace pj::filterproc
