// What both relays share: the pending bytes, the half-close (relay.h).
#include "netproxy/relay.h"

#include <sys/socket.h>

#include <cerrno>

namespace pj::netproxy {

void Flow::pump(size_t slice) {
  want_in = want_out = moved = false;
  size_t read_now = 0;
  while (!done && !error) {
    if (!pending.empty()) {
      ssize_t n = ::send(dst, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
          want_out = true;
        else
          error = true;
        return;
      }
      pending.erase(0, static_cast<size_t>(n));
      bytes += static_cast<std::uint64_t>(n);
      moved = true;
      continue;
    }
    Step step = move(slice, read_now);
    if (step == Step::more) continue;
    if (step == Step::wait) return;
    ::shutdown(dst, SHUT_WR);  // half-close: the other direction goes on
    done = true;
  }
}

}  // namespace pj::netproxy
