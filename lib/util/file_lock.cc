#include "file_lock.h"

#include <sys/file.h>

#include <cerrno>

namespace pj::util {

namespace {
int operation(LockKind kind) { return kind == LockKind::shared ? LOCK_SH : LOCK_EX; }
}  // namespace

int lock_file(int fd, LockKind kind) {
  while (::flock(fd, operation(kind)) != 0)
    if (errno != EINTR) return -errno;
  return 0;
}

bool try_lock_file(int fd, LockKind kind) { return ::flock(fd, operation(kind) | LOCK_NB) == 0; }

}  // namespace pj::util
