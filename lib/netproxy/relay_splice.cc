// The Linux relay: splice(2) through a pipe, no copy in user space (relay.h).
#include "netproxy/relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>


namespace pj::netproxy {

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
      if (errno == EAGAIN) want_out = true;
      else error = true;
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
    ssize_t n = ::splice(src, nullptr, pipe_w.get(), nullptr, kPipeSize, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN) want_in = true;
      else error = true;
      return Step::wait;
    }
    moved = true;
    if (n == 0) src_eof = true;
    else in_pipe += static_cast<size_t>(n), read_now += static_cast<size_t>(n);
    return Step::more;
  }
  return Step::drained;
}

}  // namespace pj::netproxy
