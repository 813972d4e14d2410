// Thin wrappers over the kernel interfaces glibc 2.36 does not wrap (or
// wraps behind headers that clash), plus constants newer than the
// installed kernel headers. Every function here is async-signal-safe: it
// is a single system call.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "util/openat2.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace pj::linuxjail::sys {

// clone(2) used like fork(2): the child returns 0 on the same (copied)
// stack. With CLONE_PIDFD the kernel stores the child's pidfd in *pidfd.
inline long clone_process(unsigned long flags, int* pidfd) {
  return ::syscall(SYS_clone, flags, nullptr, pidfd, nullptr, 0UL);
}

using util::openat2;

inline int pivot_root(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

inline int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0U));
}

// Close fds first..last.
inline int close_range(unsigned first, unsigned last) {
  return static_cast<int>(::syscall(SYS_close_range, first, last, 0U));
}

inline int close_range_cloexec(unsigned first) {
  return static_cast<int>(::syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC));
}

// Landlock ABI version, or -1 with errno (ENOSYS: not built; EOPNOTSUPP:
// disabled at boot).
inline int landlock_abi() {
  constexpr unsigned kCreateRulesetVersion = 1U << 0;
  return static_cast<int>(::syscall(SYS_landlock_create_ruleset, nullptr, 0UL, kCreateRulesetVersion));
}

}  // namespace pj::linuxjail::sys
