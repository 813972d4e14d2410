// The jail's network namespace: loopback up, and the network filter's
// listening sockets. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::linuxjail::in_child {

namespace {

// The network filter's listening sockets, made here inside the jail's
// network namespace (nothing inside can bind these ports afterwards) and
// handed to the supervisor, which accepts and connects out from the host.
// One listening socket. Where the jail has no IPv6 (the kernel has none:
// EAFNOSUPPORT; lo has no ::1: EADDRNOTAVAIL), nothing inside can bind
// ::1 either: an unbound unix socket stands in for that listener, and the
// supervisor leaves it out (Supervisor::start_proxy).
int open_listener(const ChildListener& l, size_t i) {
  const bool v6 = l.addr.ss_family == AF_INET6;
  int s = ::socket(l.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 && v6 && errno == EAFNOSUPPORT)
    s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  else if (s >= 0) {
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(s, reinterpret_cast<const sockaddr*>(&l.addr), l.len) != 0) {
      if (!v6 || errno != EADDRNOTAVAIL) fail(Stage::listeners, errno, static_cast<int>(i));
      ::close(s);
      s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    } else if (::listen(s, 128) != 0) {
      fail(Stage::listeners, errno, static_cast<int>(i));
    }
  }
  if (s < 0) fail(Stage::listeners, errno, static_cast<int>(i));
  return s;
}

}  // namespace

void bring_up_loopback() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail(Stage::loopback, errno);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) fail(Stage::loopback, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) fail(Stage::loopback, errno);
  ::close(s);
}

void open_listeners(const ChildPlan& p) {
  if (p.listener_count == 0) return;
  // SCM_RIGHTS carries at most SCM_MAX_FD (253) fds a message: batches.
  for (size_t first = 0; first < p.listener_count; first += kFdBatch) {
    int fds[kFdBatch];
    size_t n = p.listener_count - first < kFdBatch ? p.listener_count - first : kFdBatch;
    for (size_t i = 0; i < n; ++i) fds[i] = open_listener(p.listeners[first + i], first + i);
    send_fds(p.control_fd, kControlListeners, fds, n, Stage::listeners);
    for (size_t i = 0; i < n; ++i) ::close(fds[i]);
  }
}

void await_filter(const ChildPlan& p) {
  if (p.listener_count == 0) return;
  // Nothing runs before the filter serves them: if it cannot start, the
  // supervisor kills the jail while init waits here (or before).
  char ready = 0;
  ssize_t n;
  do n = ::read(p.control_fd, &ready, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || ready != kControlFilterReady) fail(Stage::filter_ready, n < 0 ? errno : EPROTO);
}

}  // namespace pj::linuxjail::in_child
