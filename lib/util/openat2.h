// openat2(2) (Linux >= 5.6), which glibc 2.36 does not wrap, and its
// constants when the installed kernel headers predate them. Linux only.
// The wrapper is one system call, so it is async-signal-safe (the jail's
// child uses it between clone and exec).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
// The kernel's ABI (include/uapi/linux/openat2.h, Linux 5.6).
struct open_how {
  std::uint64_t flags;
  std::uint64_t mode;
  std::uint64_t resolve;
};
#define RESOLVE_NO_XDEV 0x01
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
#endif

#ifndef SYS_openat2
#define SYS_openat2 437  // the same number on every architecture
#endif

namespace pj::util {

// openat2(dirfd, path, {flags, 0, resolve}): an fd, or -1 with errno
// (ENOSYS before Linux 5.6 or under a seccomp filter that refuses it).
inline int openat2(int dirfd, const char* path, std::uint64_t flags, std::uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

}  // namespace pj::util
