// The Linux relay: splice(2) through a pipe, no copy in user space (relay.h).
#include "netproxy/relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace pj::netproxy {

namespace {

std::atomic<int> bulk_pipes{0};  // flows of this process holding a grown pipe

// A second read in one turn: the source holds more than a pipe. The pipe
// grows if the process's count allows and the kernel grants it.
void grow(Flow& f) {
  if (f.pipe_size != kPipeSize || f.pipe_grow_refused) return;
  if (bulk_pipes.fetch_add(1) >= kMaxBulkPipes) {
    bulk_pipes.fetch_sub(1);
    return;
  }
  if (size_t grown = grow_pipe(f.pipe_w.get(), kBulkPipeSize, kPipeSize); grown > kPipeSize) {
    f.pipe_size = grown;
    return;
  }
  bulk_pipes.fetch_sub(1);
  f.pipe_grow_refused = true;
}

}  // namespace

size_t grow_pipe(int fd, size_t want, size_t floor) {
  // Without CAP_SYS_RESOURCE (the locked-down filter has none, whatever
  // its uid) a pipe gets at most /proc/sys/fs/pipe-max-size, EPERM past
  // it (fcntl(2)): half is asked for then, and so on.
  for (; want > floor; want /= 2) {
    int grown = ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want));
    if (grown > static_cast<int>(floor)) return static_cast<size_t>(grown);
    if (grown >= 0 || errno != EPERM) break;
  }
  return floor;
}

Flow::~Flow() {
  if (pipe_size != kPipeSize) bulk_pipes.fetch_sub(1);
}

bool Flow::prepare() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  pipe_r.reset(p[0]);
  pipe_w.reset(p[1]);
  return true;
}

Flow::Step Flow::move(size_t slice, size_t& read_now) {
  if (in_pipe > 0) {
    ssize_t n = ::splice(pipe_r.get(), nullptr, dst, nullptr, in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN)
        want_out = true;
      else
        error = true;
      return Step::wait;
    }
    in_pipe -= static_cast<size_t>(n);
    bytes += static_cast<std::uint64_t>(n);
    moved = true;
    return Step::more;
  }
  if (!src_eof) {
    if (read_now >= slice && !src_dead) {
      want_in = true;  // still readable: the next turn goes on
      return Step::wait;
    }
    // No more than the slice has left: one read ends the turn.
    size_t want = src_dead ? pipe_size : std::min(pipe_size, slice - read_now);
    ssize_t n = ::splice(src, nullptr, pipe_w.get(), nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN)
        want_in = true;
      else
        error = true;
      return Step::wait;
    }
    moved = true;
    if (n == 0) {
      src_eof = true;
      return Step::more;
    }
    if (read_now > 0) grow(*this);  // not the turn's first read: bulk
    in_pipe += static_cast<size_t>(n);
    read_now += static_cast<size_t>(n);
    return Step::more;
  }
  return Step::drained;
}

}  // namespace pj::netproxy
