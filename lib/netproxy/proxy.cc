// The network filter loop: its listeners, accepting within each one's
// budget, the timeouts, and the public calls of proxy.h. One connection's
// states are in connection.cc; the poller and the relay's byte mover are
// the backend files meson links (poller.h, relay.h).
#include "netproxy/proxy.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <map>

#include <fmt/format.h>

#include "netproxy/proxy_impl.h"

namespace pj::netproxy {

using util::Error;
using util::UniqueFd;

namespace {

// How often timeouts are looked at: a quarter of the shortest, between
// 10 ms and 250 ms (also how soon a paused listener is tried again).
std::chrono::milliseconds tick_for(const ProxyLimits& l) {
  auto t = std::min(l.handshake, l.idle) / 4;
  return std::clamp(t, std::chrono::milliseconds(10), std::chrono::milliseconds(250));
}

// Raise the soft fd limit to the hard one (macOS refuses more than
// OPEN_MAX for an unlimited hard limit: then try that).
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max) return;
  rlimit want{rl.rlim_max, rl.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return;
#ifdef OPEN_MAX
  want.rlim_cur = std::min<rlim_t>(rl.rlim_max, OPEN_MAX);
  if (want.rlim_cur > rl.rlim_cur) (void)::setrlimit(RLIMIT_NOFILE, &want);
#endif
}

}  // namespace

bool set_flags(int fd) {
  if (!util::set_nonblocking_cloexec(fd)) return false;
#ifdef SO_NOSIGPIPE
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  return true;
}

// TCP_NODELAY: the relay forwards what it got as it got it; Nagle's delay
// on top of the endpoints' own would hold back small requests.
void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on non-TCP
}

Proxy::Impl::Impl(Rules r, int fd, ProxyLimits l)
    : rules(std::move(r)),
      limits(l),
      recorder(fd, l.log),
      tick(tick_for(l)),
      poller(tick, kTagTimer),
      resolver(l.resolver_names) {}

// The credential filter's decisions, into the one record.
void Proxy::Impl::take_intercepted() {
  if (!credentials || !credentials->decided()) return;
  for (auto& d : credentials->take_decisions()) recorder.add(std::move(d));
}

// The listener's budget is full: the connection idle the longest gives
// way, one still in its request (or its refusal) before a relayed one.
void Proxy::Impl::make_room(size_t listener) {
  Conn* victim = nullptr;
  auto rank = [](const Conn& c) { return c.state == State::relaying ? 1 : 0; };
  for (auto& [id, c] : conns) {
    if (c->listener != listener) continue;
    if (!victim || rank(*c) < rank(*victim) || (rank(*c) == rank(*victim) && c->last_active < victim->last_active))
      victim = c.get();
  }
  if (!victim) return;
  std::string why = fmt::format("closed to make room: this listener's {} connections were all in use",
                                limits.connections_per_listener);
  if (victim->state == State::relaying)
    record(*victim, true, victim->verdict.reason + "; " + why);
  else
    record(*victim, false, why);
  close_conn(victim->id);
}

// A removed listener keeps its place (its connections name it by index)
// with no socket: never watched, never accepted on.
void Proxy::Impl::pause_accepting() {
  for (auto& l : listeners)
    if (l.fd.valid()) poller.forget(l.fd.get());
  accept_paused_until = Clock::now() + tick;
}

void Proxy::Impl::resume_accepting() {
  accept_paused_until.reset();
  for (size_t i = 0; i < listeners.size(); ++i)
    if (listeners[i].fd.valid()) watch(listeners[i].fd.get(), kTagListener | i, kIn);
}

void Proxy::Impl::accept_on(size_t index) {
  Listener& l = listeners[index];
  while (!accept_paused_until && l.fd.valid()) {
    int fd = ::accept(l.fd.get(), nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of fds or memory: stop watching the listeners for a tick
      // (the kernel keeps the backlog) rather than wake up for nothing.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) pause_accepting();
      return;
    }
    if (!set_flags(fd)) {
      ::close(fd);
      continue;
    }
    no_delay(fd);
    if (l.open >= limits.connections_per_listener) make_room(index);
    auto c = std::make_unique<Conn>();
    c->id = next_id++;
    c->listener = index;
    c->kind = l.kind;
    c->client.reset(fd);
    c->deadline = Clock::now() + limits.handshake;
    c->protocol = l.kind == ListenerKind::http      ? Protocol::http
                  : l.kind == ListenerKind::socks   ? Protocol::socks5
                  : l.kind == ListenerKind::publish ? Protocol::publish
                                                    : Protocol::forward;
    Conn& ref = *c;
    conns.emplace(ref.id, std::move(c));
    ++l.open;
    watch(fd, ref.id << 1, kIn);
    if (l.kind == ListenerKind::forward) {
      ref.target = {l.target->host, l.target->port};  // checked as the rule that made it
      decide(ref);
    } else if (l.kind == ListenerKind::publish) {
      ref.target = {l.target->host, l.target->port};
      ref.verdict.allowed = true;
      ref.verdict.reason = "the operator's " + l.target->source;
      // A dev server may listen on either loopback ("localhost"
      // resolves to ::1 first for some): 127.0.0.1, then ::1.
      ref.addrs = {l.target->addr};
      if (auto v6 = net::parse_ip("::1"); v6 && !l.target->addr.v6) ref.addrs.push_back(*v6);
      watch(fd, ref.id << 1, 0);  // nothing from the host's client until connected
      try_connect(ref);
    }
  }
}

// Timeouts: a handshake (request, resolution, connect) or an unread
// refusal past its deadline; a relayed connection idle too long.
void Proxy::Impl::sweep() {
  auto now = Clock::now();
  if (accept_paused_until && now >= *accept_paused_until) resume_accepting();
  std::vector<std::uint64_t> late, idle;
  for (auto& [id, c] : conns) {
    if (c->state == State::relaying) {
      if (now - c->last_active > limits.idle) idle.push_back(id);
    } else if (now > c->deadline) {
      late.push_back(id);
    }
  }
  for (auto id : late) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    Conn& c = *it->second;
    if (c.state == State::closing)
      close_conn(id);
    else if (c.state == State::proxy_handshake)
      refuse(c, 504, SocksReply::general_failure,
             fmt::format("the upstream proxy {} did not open the tunnel to {}:{} in time (the handshake's {} ms)",
                         upstream_proxy->name(), bounded(c.target.host), c.target.port, limits.handshake.count()));
    else
      refuse(c, 504, SocksReply::general_failure, "handshake timed out");
  }
  for (auto id : idle) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    Conn& c = *it->second;
    record(c, true,
           fmt::format("{}; closed after {} ms without a byte either way", c.verdict.reason, limits.idle.count()));
    close_conn(id);
  }
}

Proxy::Proxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Proxy::~Proxy() = default;

util::Result<std::unique_ptr<Proxy>> Proxy::start(Rules rules, int log_fd, ProxyLimits limits,
                                                  std::shared_ptr<CredentialFilter> credentials) {
  // splice(2) into a socket whose peer is gone raises SIGPIPE (splice has
  // no MSG_NOSIGNAL): a jailed client that closes mid-download must not
  // kill the supervisor. Process-wide, and inherited by later children:
  // the Linux jail is cloned before the filter starts, and the Seatbelt
  // launch resets every signal before exec.
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  auto impl = std::make_unique<Impl>(std::move(rules), log_fd, limits);
  if (credentials) {
    credentials->set_limits({limits.handshake, limits.idle});
    impl->credentials = std::move(credentials);
  }
  if (!impl->poller.ok()) return Error::from_errno("create the network filter's event loop", errno);
  if (impl->resolver.fd() < 0) return Error::from_errno("network filter wake-up", errno);
  if (auto ticking = impl->poller.start_tick(); !ticking) return ticking.error();
  impl->watch(impl->resolver.fd(), kTagResolver, kIn);
  return std::unique_ptr<Proxy>(new Proxy(std::move(impl)));
}

util::Status Proxy::add_listener(UniqueFd fd, ListenerKind kind, std::optional<Rules::Forward> target) {
  if (!set_flags(fd.get())) return Error::from_errno("make a network filter listener non-blocking", errno);
  std::uint64_t index = impl_->listeners.size();
  if (!impl_->accept_paused_until) impl_->watch(fd.get(), kTagListener | index, kIn);
  impl_->listeners.push_back({std::move(fd), kind, std::move(target), 0});
  return {};
}

util::Status Proxy::remove_listener(int fd) {
  for (auto& l : impl_->listeners) {
    if (fd < 0 || l.fd.get() != fd) continue;
    if (!impl_->accept_paused_until) impl_->poller.forget(fd);
    l.fd.reset();
    return {};
  }
  return Error::invalid(fmt::format("no listener of the network filter has descriptor {}", fd));
}

void Proxy::set_jail_sockets(JailSockets make) { impl_->jail_sockets = std::move(make); }

void Proxy::use_upstream_proxy(std::shared_ptr<const UpstreamProxy> proxy) { impl_->upstream_proxy = std::move(proxy); }

void Proxy::resolve_through(Resolver::Ask ask) { impl_->resolver.ask_by(std::move(ask)); }

void Proxy::name_answer(std::uint64_t id, std::vector<net::IpAddress> addrs, std::string error) {
  impl_->resolver.answer(id, std::move(addrs), std::move(error));
}

void Proxy::on_decision(std::function<void(const Decision&)> sink) { impl_->recorder.set_sink(std::move(sink)); }

void Proxy::watch_placeholders(std::vector<Watched> watched) {
  std::erase_if(watched, [](const Watched& w) { return w.placeholder.empty(); });
  impl_->watched = std::move(watched);
}

int Proxy::fd() const { return impl_->poller.fd(); }

void Proxy::run_once() { (void)run_for(std::chrono::milliseconds(0)); }

void Proxy::wake_on(int fd) { impl_->watch(fd, kTagWake, kIn); }

bool Proxy::run_for(std::chrono::milliseconds max_wait) {
  Event evs[64 + 1];  // and the tick
  size_t n = impl_->poller.wait(evs, 64, max_wait);
  bool woken = false;
  for (size_t i = 0; i < n; ++i) {
    std::uint64_t tag = evs[i].tag;
    if (tag == kTagWake) {
      woken = true;  // the owner's: it reads it once this returns
    } else if (tag & kTagListener) {
      if (!impl_->accept_paused_until) impl_->accept_on(tag & ~kTagListener);
    } else if (tag == kTagResolver) {
      for (auto& r : impl_->resolver.take()) impl_->on_resolved(r);
    } else if (tag == kTagTimer) {
      impl_->sweep();
    } else {
      impl_->on_conn_event(tag, evs[i].events);
    }
  }
  impl_->take_intercepted();
  return woken;
}

void Proxy::shutdown() {
  std::vector<std::uint64_t> ids;
  for (auto& [id, c] : impl_->conns) ids.push_back(id);
  for (auto id : ids) impl_->close_conn(id);
  if (impl_->credentials) {
    impl_->credentials->shutdown();
    impl_->take_intercepted();
  }
  impl_->recorder.flush();
}

const DecisionTable& Proxy::decisions() const { return impl_->recorder.table(); }

size_t Proxy::open_connections() const { return impl_->conns.size(); }

}  // namespace pj::netproxy
