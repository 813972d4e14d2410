// The portable poller: poll(2), the tick the wait's own timeout (poller.h).
// POSIX calls only: what macOS runs.
#include "netproxy/poller.h"

#include <poll.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace pj::netproxy {

using Clock = std::chrono::steady_clock;

struct Poller::State {
  std::chrono::milliseconds tick{};
  std::uint64_t tick_tag = 0;
  Clock::time_point last_tick = Clock::now();
  std::map<int, std::pair<std::uint64_t, std::uint32_t>> fds_;
  size_t start_ = 0;
};

Poller::Poller(std::chrono::milliseconds tick, std::uint64_t tick_tag) : s_(std::make_unique<State>()) {
  s_->tick = tick;
  s_->tick_tag = tick_tag;
}
Poller::~Poller() = default;

bool Poller::ok() const { return true; }

util::Status Poller::start_tick() { return {}; }  // wait() keeps time itself

int Poller::fd() const { return -1; }  // no single fd: the owner calls run_for()

void Poller::watch(int fd, std::uint64_t tag, std::uint32_t events) { s_->fds_[fd] = {tag, events}; }

void Poller::forget(int fd) { s_->fds_.erase(fd); }

namespace {

size_t wait_fds(std::map<int, std::pair<std::uint64_t, std::uint32_t>>& fds_, size_t& start_, Event* out, size_t max,
                int timeout_ms) {
  std::vector<pollfd> p;
  for (const auto& [fd, w] : fds_)
    p.push_back({fd, static_cast<short>(((w.second & kIn) ? POLLIN : 0) | ((w.second & kOut) ? POLLOUT : 0)), 0});
  if (::poll(p.data(), p.size(), timeout_ms) <= 0) return 0;
  size_t n = 0;
  // Past `max` ready fds, the next wait starts where this one stopped:
  // low-numbered fds cannot starve the others.
  start_ = p.empty() ? 0 : start_ % p.size();
  for (size_t i = 0; i < p.size() && n < max; ++i) {
    const pollfd& x = p[(start_ + i) % p.size()];
    if (!x.revents) continue;
    std::uint32_t e = ((x.revents & POLLIN) ? kIn : 0U) | ((x.revents & POLLOUT) ? kOut : 0U) |
                      ((x.revents & (POLLHUP | POLLERR | POLLNVAL)) ? kHangup : 0U);
    out[n++] = {fds_[x.fd].first, e};
    if (n == max) start_ = (start_ + i + 1) % p.size();
  }
  return n;
}

}  // namespace

size_t Poller::wait(Event* out, size_t max, std::chrono::milliseconds max_wait) {
  // Without a timer fd, the wait's timeout drives the tick.
  auto wait = std::min(max_wait, s_->tick);
  size_t n = wait_fds(s_->fds_, s_->start_, out, max, static_cast<int>(wait.count()));
  auto now = Clock::now();
  if (now - s_->last_tick >= s_->tick) {
    s_->last_tick = now;
    out[n++] = {s_->tick_tag, kIn};
  }
  return n;
}

}  // namespace pj::netproxy
