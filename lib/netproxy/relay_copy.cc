// The portable relay: recv(2) into a buffer, sent as pending bytes
// (relay.h). POSIX calls only: what macOS runs.
#include "netproxy/relay.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace pj::netproxy {

Flow::~Flow() = default;

bool Flow::prepare() { return true; }  // nothing to make

Flow::Step Flow::move(size_t slice, size_t& read_now) {
  if (!src_eof) {
    if (read_now >= slice && !src_dead) {
      want_in = true;
      return Step::wait;
    }
    char buf[kPipeSize];
    ssize_t n = ::recv(src, buf, src_dead ? sizeof buf : std::min(sizeof buf, slice - read_now), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        want_in = true;
      else
        error = true;
      return Step::wait;
    }
    moved = true;
    if (n == 0)
      src_eof = true;
    else
      pending.assign(buf, static_cast<size_t>(n)), read_now += static_cast<size_t>(n);
    return Step::more;
  }
  return Step::drained;
}

}  // namespace pj::netproxy
