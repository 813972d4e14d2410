// Advisory whole-file locks (flock(2)): the one place pi-jail takes them,
// for its state registry, the compile cache, run claims and held paths.
// They belong to the open file description, so a jail's init (a clone of
// pi-jail) holds those it inherited until it ends.
#pragma once

namespace pj::util {

enum class LockKind { shared, exclusive };

// Takes the lock on `fd`, waiting for it (EINTR retried): 0, or -errno.
int lock_file(int fd, LockKind kind);

// Takes the lock on `fd` if no one else holds it: true when taken; false
// when it is held elsewhere or cannot be taken.
bool try_lock_file(int fd, LockKind kind = LockKind::exclusive);

}  // namespace pj::util
