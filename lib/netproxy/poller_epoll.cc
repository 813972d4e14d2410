// The poller on Linux: epoll, and a timerfd for the tick (poller.h).
#include "netproxy/poller.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/unique_fd.h"

namespace pj::netproxy {

using util::Error;
using util::UniqueFd;

struct Poller::State {
  std::chrono::milliseconds tick{};
  std::uint64_t tick_tag = 0;
  UniqueFd ep_{::epoll_create1(EPOLL_CLOEXEC)};
  UniqueFd timer{::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)};
};

Poller::Poller(std::chrono::milliseconds tick, std::uint64_t tick_tag) : s_(std::make_unique<State>()) {
  s_->tick = tick;
  s_->tick_tag = tick_tag;
}
Poller::~Poller() = default;

bool Poller::ok() const { return s_->ep_.valid(); }

util::Status Poller::start_tick() {
  if (!s_->timer.valid()) return Error::from_errno("network filter timer", errno);
  itimerspec its{};
  auto tick_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s_->tick).count();
  its.it_interval.tv_sec = its.it_value.tv_sec = tick_ns / 1000000000;
  its.it_interval.tv_nsec = its.it_value.tv_nsec = tick_ns % 1000000000;
  if (::timerfd_settime(s_->timer.get(), 0, &its, nullptr) != 0)
    return Error::from_errno("start the network filter timer", errno);
  watch(s_->timer.get(), s_->tick_tag, kIn);
  return {};
}

int Poller::fd() const { return s_->ep_.get(); }

void Poller::watch(int fd, std::uint64_t tag, std::uint32_t events) {
  epoll_event ev{};
  ev.events = ((events & kIn) ? EPOLLIN : 0U) | ((events & kOut) ? EPOLLOUT : 0U);
  ev.data.u64 = tag;
  if (::epoll_ctl(s_->ep_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) ::epoll_ctl(s_->ep_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void Poller::forget(int fd) { ::epoll_ctl(s_->ep_.get(), EPOLL_CTL_DEL, fd, nullptr); }

size_t Poller::wait(Event* out, size_t max, std::chrono::milliseconds max_wait) {
  epoll_event evs[64];
  int n =
      ::epoll_wait(s_->ep_.get(), evs, static_cast<int>(std::min<size_t>(max, 64)), static_cast<int>(max_wait.count()));
  for (int i = 0; i < n; ++i) {
    std::uint32_t e = evs[i].events;
    out[i] = {evs[i].data.u64,
              ((e & EPOLLIN) ? kIn : 0U) | ((e & EPOLLOUT) ? kOut : 0U) | ((e & (EPOLLHUP | EPOLLERR)) ? kHangup : 0U)};
    if (out[i].tag == s_->tick_tag) {  // taken: the timer fires again a tick later
      std::uint64_t expirations;
      ssize_t r = ::read(s_->timer.get(), &expirations, sizeof expirations);
      (void)r;
    }
  }
  return n < 0 ? 0 : static_cast<size_t>(n);
}

}  // namespace pj::netproxy
