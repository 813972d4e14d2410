#include "login_callbacks.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "linuxjail/jail_socket.h"
#include "net/address.h"
#include "util/log.h"

namespace pj::supervisor {

namespace {

namespace listening = linuxjail::listening;

// Datagrams read a wake-up: a jail with many listeners on these ports
// (SO_REUSEPORT) only slows its own looks down.
constexpr int kDatagramsPerWake = 8;

}  // namespace

std::unique_ptr<LoginCallbacks> LoginCallbacks::start(int jail_pidfd, const RunOptions& opts, FilterProcess& filter) {
  std::vector<runtime::Request::LoginCallback> callbacks;
  for (const auto& c : opts.login_callbacks) {
    const bool published = std::any_of(opts.publish.begin(), opts.publish.end(),
                                       [&](const auto& p) { return p.spec.host_port == c.port; });
    const bool again = std::any_of(callbacks.begin(), callbacks.end(), [&](const auto& d) { return d.port == c.port; });
    if (c.port != 0 && !published && !again && callbacks.size() < listening::kMaxPorts) callbacks.push_back(c);
  }
  if (callbacks.empty()) return nullptr;
  const int fd =
      linuxjail::jail_socket(jail_pidfd, AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) {
    util::warn(
        "login callbacks: cannot watch the jail's listening sockets: make a NETLINK_SOCK_DIAG socket in the "
        "jail: {} ({}); a browser's redirect to a login callback will not reach the jail: paste the redirect URL "
        "into Pi instead",
        std::strerror(-fd), util::errno_name(-fd));
    return nullptr;
  }
  return std::unique_ptr<LoginCallbacks>(new LoginCallbacks(util::UniqueFd(fd), std::move(callbacks), filter));
}

LoginCallbacks::LoginCallbacks(util::UniqueFd sock, std::vector<runtime::Request::LoginCallback> callbacks,
                               FilterProcess& filter)
    : sock_(std::move(sock)), callbacks_(std::move(callbacks)), filter_(filter) {
  for (const auto& c : callbacks_) ports_.push_back(c.port);
}

int LoginCallbacks::fd() const { return asking_ ? sock_.get() : -1; }

int LoginCallbacks::timeout_ms(Clock::time_point now) const {
  if (!sock_.valid() || asking_) return -1;  // stopped, or the socket's POLLIN wakes it
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_look_ - now).count() + 1;
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, kLookEvery.count() + 1));
}

void LoginCallbacks::on_poll(Clock::time_point now) {
  if (!sock_.valid()) return;
  if (!asking_ && now >= next_look_) {
    next_look_ = now + kLookEvery;
    found_.clear();
    ask(AF_INET);
  }
  if (asking_) read();
}

void LoginCallbacks::ask(int family) {
  auto req = listening::dump_request(family, ports_, ++seq_);
  if (!req) return stop(req.error().message());
  ssize_t n;
  do n = ::send(sock_.get(), req->data(), req->size(), MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(req->size()))
    return stop(fmt::format("ask the kernel for the jail's listening sockets: {}",
                            n < 0 ? util::errno_name(errno) : std::string("a short send")));
  asking_ = family;
}

// The kernel makes a dump's next datagram as the last one is read
// (netlink_recvmsg()): reading never waits for it.
void LoginCallbacks::read() {
  std::string buf(listening::kMaxDatagram, '\0');
  for (int i = 0; i < kDatagramsPerWake && asking_; ++i) {
    // MSG_TRUNC: the datagram's whole length, to tell a cut one.
    ssize_t n = ::recv(sock_.get(), buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) return stop(fmt::format("read the jail's listening sockets: {}", util::errno_name(errno)));
    if (static_cast<size_t>(n) > buf.size())
      return stop(fmt::format("the kernel's list of the jail's listening sockets: a datagram of {} bytes, cut at {}", n,
                              buf.size()));
    auto reply = listening::parse_reply(std::string_view(buf.data(), static_cast<size_t>(n)), asking_, seq_);
    // A kernel without IPv6 has no such sockets to list.
    if (!reply && asking_ == AF_INET6 && (reply.error().err() == EAFNOSUPPORT || reply.error().err() == ENOENT))
      reply = listening::Reply{{}, true};
    if (!reply) return stop(reply.error().message());
    // Only the ports asked about, whatever the reply holds.
    for (const auto& s : reply->sockets)
      if (std::find(ports_.begin(), ports_.end(), s.port) != ports_.end())
        if (const auto f = listening::families_of(s); f.any()) {
          auto& found = found_[s.port];
          found.v4 = found.v4 || f.v4;
          found.v6 = found.v6 || f.v6;
        }
    if (!reply->done) continue;
    if (asking_ == AF_INET) {
      ask(AF_INET6);
    } else {
      asking_ = 0;
      apply();
    }
  }
}

// The look ended: what the jail no longer listens on, or now listens on
// with other families, is closed; what it newly listens on is served
// (anew once the filter said the old listeners closed).
void LoginCallbacks::apply() {
  for (auto it = served_.begin(); it != served_.end();) {
    const auto found = found_.find(it->first);
    if (found != found_.end() && found->second == it->second.jail) {
      ++it;
      continue;
    }
    const std::uint16_t port = it->first;
    std::vector<std::uint64_t> ids = std::move(it->second.ids);
    it = served_.erase(it);
    for (std::uint64_t id : ids)
      if (auto st = filter_.unlisten(id); !st) return stop("");
    util::debug(
        "login callback {}: no longer served as it was ({})", port,
        found == found_.end() ? "the jail stopped listening there" : "the jail listens there on other families");
    closing_[port] = std::move(ids);
  }
  for (auto it = closing_.begin(); it != closing_.end();) {
    std::erase_if(it->second, [&](std::uint64_t id) { return !filter_.held(id); });
    it = it->second.empty() ? closing_.erase(it) : std::next(it);
  }
  std::erase_if(said_taken_, [&](std::uint16_t port) { return !found_.count(port); });
  for (const auto& [port, jail] : found_)
    if (!served_.count(port) && !closing_.count(port)) serve(port, jail);
}

namespace {

// The host's loopback address that `s` is served on.
std::string host_loopback(const listening::Served& s) {
  return runtime::loopback_address(s.v6 ? runtime::Loopback::v6 : runtime::Loopback::v4);
}

}  // namespace

// Both of the host's families or neither: one that is taken (a login on
// the host) leaves the other unserved too, or a browser that tries the
// served one first would bring that login's redirect into the jail.
void LoginCallbacks::serve(std::uint16_t port, listening::Families jail) {
  const auto& c = callback(port);
  std::vector<std::pair<util::UniqueFd, listening::Served>> made;
  for (const auto& s : listening::served_on_host(port, jail)) {
    auto fd = listen_on_host_loopback(s.v6, port);
    if (fd) {
      made.emplace_back(std::move(*fd), s);
      continue;
    }
    const int err = fd.error().err();
    if (s.v6 && (err == EADDRNOTAVAIL || err == EAFNOSUPPORT)) continue;  // the host has no ::1 for a browser to try
    if (!said_taken_.insert(port).second) return;                         // tried again at each look, said once
    const std::string why =
        err == EADDRINUSE ? "is in use (the host's own Pi mid-login, or the Codex CLI?)"
                          : fmt::format("cannot be listened on: {} ({})", std::strerror(err), util::errno_name(err));
    util::warn(
        "login callback {} ({}): the host's port {}, so a browser's redirect cannot reach the jail; paste the "
        "redirect URL into Pi instead: that still works",
        net::authority(host_loopback(s), port), c.what, why);
    return;  // what was made closes here
  }
  Served& served = served_[port];
  served.jail = jail;
  for (auto& [fd, s] : made) {
    const std::string why = fmt::format("{}: login callback {} ({})", c.source, port, c.what);
    netproxy::Rules::Forward target{s.jail_addr, port, s.jail_addr.str(), why};
    auto id = filter_.listen(std::move(fd), target);
    if (!id) return stop("");
    served.ids.push_back(*id);
    const std::string host = host_loopback(s);
    if (std::none_of(served_log_.begin(), served_log_.end(),
                     [&](const ServedLoginCallback& l) { return l.port == port && l.host_address == host; }))
      served_log_.push_back({host, port, why});
    util::debug("login callback {} ({}): served on the host, to the jail's {}, while the jail listens there",
                net::authority(host, port), c.what, s.jail_addr.str());
  }
}

// Watching ends for the rest of the run: said once (unless the filter is
// gone, which ends the run and is said there), and what was served is
// closed, since nothing would say when the jail stops listening.
void LoginCallbacks::stop(const std::string& why) {
  if (!why.empty())
    util::warn("login callbacks: {}; no longer watched for the rest of the run: paste the redirect URL into Pi instead",
               why);
  for (const auto& [port, served] : served_)
    for (std::uint64_t id : served.ids) (void)filter_.unlisten(id);
  served_.clear();
  asking_ = 0;
  sock_.reset();
}

const runtime::Request::LoginCallback& LoginCallbacks::callback(std::uint16_t port) const {
  for (const auto& c : callbacks_)
    if (c.port == port) return c;
  return callbacks_.front();  // found_ holds asked ports only (read())
}

}  // namespace pj::supervisor
