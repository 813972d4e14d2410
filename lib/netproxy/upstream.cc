#include "netproxy/upstream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "netproxy/decisions.h"
#include "netproxy/http1.h"
#include "util/bounded_io.h"
#include "util/escape.h"

namespace pj::netproxy {

bool UpstreamProxy::applies(std::string_view host, int port) const {
  return !net::is_loopback_host(host) && !no_proxy.matches(host, port);
}

bool UpstreamProxy::is_itself(std::string_view host, int port) const {
  if (port != url.port) return false;
  if (host == url.host) return true;
  auto literal = net::parse_ip(host);
  return literal && is_itself(*literal, port);
}

bool UpstreamProxy::is_itself(const net::IpAddress& addr, int port) const {
  return port == url.port && std::find(addrs.begin(), addrs.end(), addr) != addrs.end();
}

TunnelOpener::TunnelOpener(const UpstreamProxy& proxy, std::string_view host, int port) : proxy_name_(proxy.name()) {
  target_ = net::authority(host, port);
  // RFC 9112 section 3.2.3: the authority form, and Host the same.
  out_ = fmt::format("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n", target_);
  // RFC 9110 section 11.7.1; Basic (RFC 7617): user-id ":" password.
  if (proxy.url.user)
    out_ += "Proxy-Authorization: Basic " + http1::base64_encode(*proxy.url.user + ":" + proxy.url.password) + "\r\n";
  out_ += "\r\n";
}

TunnelOpener::Step TunnelOpener::fail(std::string why) {
  error_ = std::move(why);
  out_.clear();
  return Step::failed;
}

TunnelOpener::Step TunnelOpener::step(int fd) {
  if (!error_.empty()) return Step::failed;
  while (!out_.empty()) {
    ssize_t n = ::send(fd, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::want_write;
    if (n <= 0)
      return fail(fmt::format("cannot send the CONNECT to the upstream proxy {}: {}", proxy_name_,
                              n < 0 ? std::strerror(errno) : "closed"));
    out_.erase(0, static_cast<size_t>(n));
  }
  // Peek, then take only the bytes up to the head's end: whatever comes
  // after it is the destination's and stays in the socket for the relay.
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::want_read;
    if (n < 0) return fail(fmt::format("the upstream proxy {}: {}", proxy_name_, std::strerror(errno)));
    if (n == 0)
      return fail(fmt::format("the upstream proxy {} closed the connection before it answered the CONNECT to {}",
                              proxy_name_, target_));
    std::string seen = head_;
    seen.append(buf, static_cast<size_t>(n));
    auto parsed = http1::parse_head(seen, kMaxProxyReply);
    size_t take = static_cast<size_t>(n);
    if (parsed.progress == Progress::done) take = parsed.consumed - head_.size();
    if (parsed.progress == Progress::bad)
      return fail(fmt::format("the upstream proxy {} answered the CONNECT to {} with a malformed reply: {}",
                              proxy_name_, target_, parsed.error));
    while (::recv(fd, buf, take, MSG_DONTWAIT) < 0 && errno == EINTR) {
    }
    if (parsed.progress == Progress::need_more) {
      head_ = std::move(seen);
      continue;
    }
    const int status = http1::status_of(parsed.head);
    if (status == 0)
      return fail(fmt::format("the upstream proxy {} answered the CONNECT to {} with a malformed status line: {}",
                              proxy_name_, target_, util::printable(bounded(parsed.head.start))));
    if (status / 100 != 2)
      return fail(fmt::format("the upstream proxy {} refused the tunnel to {}: {}", proxy_name_, target_,
                              util::printable(bounded(parsed.head.start))));
    // A 2xx to CONNECT has no body, whatever its fields say (RFC 9110
    // section 9.3.6): the tunnel starts after the head.
    head_.clear();
    return Step::open;
  }
}

bool open_tunnel(int fd, const UpstreamProxy& proxy, std::string_view host, int port, int stop_fd,
                 std::chrono::milliseconds timeout, std::string& why) {
  using Clock = std::chrono::steady_clock;
  TunnelOpener t(proxy, host, port);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto s = t.step(fd);
    if (s == TunnelOpener::Step::open) return true;
    if (s == TunnelOpener::Step::failed) return why = t.error(), false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return why = fmt::format("the upstream proxy {} did not open the tunnel within {} ms", proxy.name(),
                               timeout.count()),
             false;
    // Ready or timed out, the next turn finds out (the deadline above).
    const short events = s == TunnelOpener::Step::want_write ? POLLOUT : POLLIN;
    if (util::wait_ready(fd, events, stop_fd, left) == util::WaitEnd::stopped) return why = "stopped", false;
  }
}

}  // namespace pj::netproxy
