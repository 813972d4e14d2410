#include "bounded_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace pj::util {

WaitEnd wait_ready(int fd, short events, int stop_fd, std::chrono::milliseconds timeout) {
  // poll(2) skips an entry whose fd is negative: no stop fd, no stop.
  pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  while (true) {
    int n = ::poll(p, 2, static_cast<int>(timeout.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (p[1].revents & POLLIN)) return WaitEnd::stopped;
    return n == 0 ? WaitEnd::timed_out : WaitEnd::ready;
  }
}

SendEnd send_all(int fd, std::string_view data, std::chrono::milliseconds wait, int stop_fd) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // send(2) returns 0 only for an empty buffer: never progress here.
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return {SendEnd::How::failed, n == 0 ? 0 : errno};
    switch (wait_ready(fd, POLLOUT, stop_fd, wait)) {
      case WaitEnd::ready: break;
      case WaitEnd::timed_out: return {SendEnd::How::timed_out};
      case WaitEnd::stopped: return {SendEnd::How::stopped};
    }
  }
  return {};
}

}  // namespace pj::util
