// The network filter process's lock-down (DESIGN "Process model"): once
// it has what it needs (its configuration, its relay's loop, any file it
// reads), it takes away everything else it could do as the user before
// it parses a byte of the jail's or a server's. One implementation per
// backend, linked with filter.cc into the executable that runs it.
//
// Linux (lockdown.cc), the stages in order: no_new_privs; not dumpable;
// resource limits of its own (no core, no file it could grow, fds for
// its connections); every capability dropped (bounding, ambient,
// inheritable, permitted, effective); a Landlock domain that handles
// every filesystem right and grants none, may not bind TCP ports and may
// not signal or reach abstract sockets outside it (where the kernel has
// Landlock); and a seccomp allowlist of the system calls the relay makes,
// every other call failing with EPERM.
//
// macOS (lockdown_seatbelt.cc): the filter's Seatbelt profile
// (seatbelt/filter_profile.h) was applied by sandbox-exec before the
// filter's exec and holds for its whole life: no file but what the
// loader maps, no process, no signal to another, TCP only to and from
// what the run needs. lock_down() adds the resource limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "util/result.h"

namespace pj::filterproc {

struct LockdownLimits {
  std::uint64_t open_files = 4096;          // RLIMIT_NOFILE, soft and hard
  std::uint64_t data_bytes = 576ULL << 20;  // RLIMIT_DATA: its heap and private mappings
};

// Lock the calling process down. It must have one thread: Landlock and
// the capability sets are per thread (checked: an error otherwise). An
// error names the stage and carries its errno; the caller must then end.
util::Status lock_down(const LockdownLimits& limits);

// Once the filter is ready, before it serves: give back what only its
// start needed (Linux: the read-only pages of the code that configured
// it), and (Linux) keep every thread's allocations in one malloc arena.
void release_startup();

// Before the filter makes its TLS, at the first connection it terminates:
// (Linux) its code is mapped a page at a time from then on
// (util::map_code_by_page()). A handshake each way and a certificate check
// run code spread over all of OpenSSL, which the kernel would otherwise
// map 64 KiB around each page: most of the filter's resident set.
void before_tls();

#ifdef PJ_TEST_SWITCHES
// Test builds: what the locked-down filter can still do. Each attempt's
// errno, 0 when it succeeded (a containment failure). `home` was found
// before the lock-down.
filterlink::ProbeResult probe_lockdown(const std::string& home);
#endif

// Linux: the system calls the locked-down filter may make (by name), and
// those it may make only with the arguments lock_down() checks. For tests.
const std::vector<std::string>& filter_allowed_syscalls();

}  // namespace pj::filterproc
