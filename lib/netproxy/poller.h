// The network filter loop's poller and its tick: which watched fds are
// ready, and a periodic event for the timeouts. One interface, two
// implementations, and meson links one (lib/netproxy/meson.build):
// poller_epoll.cc (Linux: epoll, the tick a timerfd) and poller_poll.cc
// (elsewhere, and the portable loop Linux CI tests: poll(2), the tick the
// wait's own timeout). Both are level-triggered. Loop thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/result.h"

namespace pj::netproxy {

// What a watched fd is waited for, and what happened. kHangup (EPOLLHUP,
// EPOLLERR; POLLHUP, POLLERR, POLLNVAL) is reported whatever is asked for.
inline constexpr std::uint32_t kIn = 1, kOut = 2, kHangup = 4;

struct Event {
  std::uint64_t tag;
  std::uint32_t events;
};

class Poller {
public:
  // wait() reports an event tagged `tick_tag` every `tick` once
  // start_tick() succeeded.
  Poller(std::chrono::milliseconds tick, std::uint64_t tick_tag);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // False (errno set) when the poller could not be made.
  bool ok() const;
  // Start the tick; the error names the step.
  util::Status start_tick();
  // The fd that is readable when wait() has work, or -1 (poll(2): none).
  int fd() const;
  // Watch `fd` for `events` (kIn, kOut; 0: only hang-ups), reported
  // under `tag`; again for the same fd replaces what it waits for.
  void watch(int fd, std::uint64_t tag, std::uint32_t events);
  void forget(int fd);
  // Wait up to `max_wait` (0: not at all) and fill `out`, which has room
  // for max + 1 events: at most `max` ready fds, and the tick when due.
  // A tick is reported after the fds ready with it.
  size_t wait(Event* out, size_t max, std::chrono::milliseconds max_wait);

private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace pj::netproxy
