// Blocking-style writes to a non-blocking socket, every wait bounded:
// the one place a thread sends a whole buffer and waits for room with
// poll(2) (the credential filter's workers, the SSH agent proxy). A peer
// that stops reading costs at most `wait` each time it stops; a stop fd
// (the read end of a pipe written at shutdown) ends any wait at once.
#pragma once

#include <chrono>
#include <string_view>

namespace pj::util {

// How a bounded wait ended.
enum class WaitEnd {
  ready,      // `fd` has an event (or an error or hang-up to find out about)
  timed_out,  // nothing within the timeout
  stopped,    // the stop fd is readable, or poll(2) failed
};

// Waits until `fd` is ready for `events` (poll(2)'s), `stop_fd` is
// readable (-1: none), or `timeout` passes. A signal restarts the wait,
// whole.
[[nodiscard]] WaitEnd wait_ready(int fd, short events, int stop_fd, std::chrono::milliseconds timeout);

// How send_all() ended: everything sent, or why not.
struct SendEnd {
  enum class How { sent, failed, timed_out, stopped };
  How how = How::sent;
  int error = 0;  // How::failed: send(2)'s errno
  bool sent() const { return how == How::sent; }
};

// Sends all of `data` on the connected socket `fd` (MSG_DONTWAIT, no
// SIGPIPE), waiting up to `wait` for room each time the socket is full
// (wait_ready). A send(2) error other than EAGAIN and EINTR fails.
[[nodiscard]] SendEnd send_all(int fd, std::string_view data, std::chrono::milliseconds wait, int stop_fd = -1);

}  // namespace pj::util
