#include "netproxy/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

// Linux: epoll, an eventfd, a timerfd and splice(2). Elsewhere (macOS), or
// built with PJ_PROXY_PORTABLE (so Linux CI tests that path too): poll(2),
// a pipe, the wait's timeout and a buffer copy; POSIX calls only.
#if defined(__linux__) && !defined(PJ_PROXY_PORTABLE)
#define PJ_PROXY_EPOLL 1
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#else
#define PJ_PROXY_EPOLL 0
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0  // macOS: sockets get SO_NOSIGPIPE instead (set_flags())
#endif

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <map>

#include <fmt/format.h>

#include "netproxy/protocol.h"
#include "netproxy/resolver.h"
#include "util/json.h"

namespace pj::netproxy {

using util::Error;
using util::UniqueFd;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kPipeSize = 64 * 1024;

// What a watched fd is waited for, and what happened.
constexpr std::uint32_t kIn = 1, kOut = 2, kHangup = 4;

struct Event {
  std::uint64_t tag;
  std::uint32_t events;
};

// Non-blocking and close-on-exec; no SIGPIPE from a socket where that is
// a flag (macOS).
bool set_flags(int fd) {
  if (!util::set_nonblocking_cloexec(fd)) return false;
#ifdef SO_NOSIGPIPE
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  return true;
}

#if PJ_PROXY_EPOLL
class Poller {
public:
  bool ok() const { return ep_.valid(); }
  int fd() const { return ep_.get(); }
  void watch(int fd, std::uint64_t tag, std::uint32_t events) {
    epoll_event ev{};
    ev.events = ((events & kIn) ? EPOLLIN : 0U) | ((events & kOut) ? EPOLLOUT : 0U);
    ev.data.u64 = tag;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void forget(int fd) { ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr); }
  size_t wait(Event* out, size_t max, int timeout_ms) {
    epoll_event evs[64];
    int n = ::epoll_wait(ep_.get(), evs, static_cast<int>(std::min<size_t>(max, 64)), timeout_ms);
    for (int i = 0; i < n; ++i) {
      std::uint32_t e = evs[i].events;
      out[i] = {evs[i].data.u64, ((e & EPOLLIN) ? kIn : 0U) | ((e & EPOLLOUT) ? kOut : 0U) |
                                     ((e & (EPOLLHUP | EPOLLERR)) ? kHangup : 0U)};
    }
    return n < 0 ? 0 : static_cast<size_t>(n);
  }

private:
  UniqueFd ep_{::epoll_create1(EPOLL_CLOEXEC)};
};
#else
class Poller {
public:
  bool ok() const { return true; }
  int fd() const { return -1; }  // no single fd: the owner calls run_for()
  void watch(int fd, std::uint64_t tag, std::uint32_t events) { fds_[fd] = {tag, events}; }
  void forget(int fd) { fds_.erase(fd); }
  size_t wait(Event* out, size_t max, int timeout_ms) {
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

private:
  std::map<int, std::pair<std::uint64_t, std::uint32_t>> fds_;
  size_t start_ = 0;
};

#endif


// TCP_NODELAY: the relay forwards what it got as it got it; Nagle's delay
// on top of the endpoints' own would hold back small requests.
void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on non-TCP
}

enum class State { handshake, socks_request, resolving, connecting, relaying, closing };

// One direction of a relay: pending bytes first, then splice(2) through a
// pipe (Linux) or a buffer copy (portable). At most `slice` bytes are read
// per pump; the fds stay watched (level-triggered), so the rest follows on
// the next turn of the loop, after the other connections' turns.
struct Flow {
  int src = -1, dst = -1;
  std::string pending;
  UniqueFd pipe_r, pipe_w;
  size_t in_pipe = 0;
  bool src_eof = false;
  bool done = false;
  bool want_in = false, want_out = false;
  std::uint64_t bytes = 0;
  bool error = false;
  bool moved = false;  // bytes moved in the last pump
  // The source hung up and is no longer watched: it is read to its end
  // without the slice (a hung-up socket never says EAGAIN, and holds at
  // most its receive buffer), else the rest would never be read.
  bool src_dead = false;

  void pump(size_t slice) {
    want_in = want_out = moved = false;
    size_t read_now = 0;
    while (!done && !error) {
      if (!pending.empty()) {
        ssize_t n = ::send(dst, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) want_out = true;
          else error = true;
          return;
        }
        pending.erase(0, static_cast<size_t>(n));
        bytes += static_cast<std::uint64_t>(n);
        moved = true;
        continue;
      }
#if PJ_PROXY_EPOLL
      if (in_pipe > 0) {
        ssize_t n = ::splice(pipe_r.get(), nullptr, dst, nullptr, in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0) {
          if (errno == EAGAIN) want_out = true;
          else error = true;
          return;
        }
        in_pipe -= static_cast<size_t>(n);
        bytes += static_cast<std::uint64_t>(n);
        moved = true;
        continue;
      }
      if (!src_eof) {
        if (read_now >= slice && !src_dead) {
          want_in = true;  // still readable: the next turn goes on
          return;
        }
        ssize_t n = ::splice(src, nullptr, pipe_w.get(), nullptr, kPipeSize, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0) {
          if (errno == EAGAIN) want_in = true;
          else error = true;
          return;
        }
        moved = true;
        if (n == 0) src_eof = true;
        else in_pipe += static_cast<size_t>(n), read_now += static_cast<size_t>(n);
        continue;
      }
#else
      if (!src_eof) {
        if (read_now >= slice && !src_dead) {
          want_in = true;
          return;
        }
        char buf[kPipeSize];
        ssize_t n = ::recv(src, buf, sizeof buf, 0);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) want_in = true;
          else error = true;
          return;
        }
        moved = true;
        if (n == 0) src_eof = true;
        else pending.assign(buf, static_cast<size_t>(n)), read_now += static_cast<size_t>(n);
        continue;
      }
#endif
      ::shutdown(dst, SHUT_WR);  // half-close: the other direction goes on
      done = true;
    }
  }
};

struct Conn {
  std::uint64_t id;
  size_t listener;
  ListenerKind kind;
  Protocol protocol = Protocol::http;
  UniqueFd client, upstream;
  State state = State::handshake;
  std::string inbuf;
  bool greeted = false;  // SOCKS greeting answered
  Target target;
  Verdict verdict;
  bool rule_refusal = false;  // refused by the rule check itself
  std::string resolving;      // the name given to the resolver, while it is looked up
  std::string upstream_head;  // absolute-form HTTP
  std::vector<IpAddress> addrs;
  size_t next_addr = 0;
  int test_port = 0;  // --test-resolve: the stand-in's port (its address is in addrs)
  std::string address;
  std::string jail_socket_error;  // publish: why the last socket could not be made
  std::string to_client;  // a reply to flush before closing or relaying
  Flow up, down;
  bool client_dead = false, upstream_dead = false;  // hung up: never watched again
  Clock::time_point started = Clock::now();
  Clock::time_point last_active = started;
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
  Clock::time_point deadline;
  bool logged = false;
};

constexpr std::uint64_t kTagListener = 1ULL << 62;
constexpr std::uint64_t kTagResolver = 1ULL << 61;
constexpr std::uint64_t kTagTimer = 1ULL << 60;

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

struct Proxy::Impl {
  Rules rules;
  ProxyLimits limits;
  DecisionRecorder recorder;
  Poller poller;
  std::chrono::milliseconds tick;
#if PJ_PROXY_EPOLL
  UniqueFd timer{::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)};
#endif
  Clock::time_point last_sweep = Clock::now();
  Resolver resolver;
  struct Listener {
    UniqueFd fd;
    ListenerKind kind;
    std::optional<Rules::Forward> target;
    size_t open = 0;  // its connections now
  };
  std::vector<Listener> listeners;
  JailSockets jail_sockets;
  std::optional<Clock::time_point> accept_paused_until;  // the fd table was full
  std::map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::uint64_t next_id = 1;

  std::shared_ptr<Interceptor> interceptor;  // may be null

  Impl(Rules r, int fd, ProxyLimits l)
      : rules(std::move(r)), limits(l), recorder(fd, l.log), tick(tick_for(l)), resolver(l.resolver_names) {}

  // The credential filter's decisions, into the one record.
  void take_intercepted() {
    if (!interceptor) return;
    for (auto& d : interceptor->take_decisions()) recorder.add(std::move(d));
  }

  // The target as the rules see it (lower case, no brackets or trailing dot).
  std::string checked_host(const Conn& c) const {
    std::string host = c.target.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return normalise_host(host).value_or(host);
  }

  // Connected to a host bound to a credential: the credential filter
  // serves it from here (TLS both ways), on its own thread.
  void hand_off(Conn& c) {
    if (interceptor->active() >= kMaxIntercepted) {
      c.rule_refusal = false;
      return refuse(c, 503, SocksReply::general_failure,
                    fmt::format("too many connections to hosts bound to a credential at once ({}); try again",
                                kMaxIntercepted));
    }
    if (!c.inbuf.empty()) {
      c.rule_refusal = false;
      return refuse(c, 400, SocksReply::general_failure,
                    "bytes sent before the tunnel was open, to a host bound to a credential");
    }
    Interceptor::Handoff h;
    if (c.kind == ListenerKind::http) h.reply = "HTTP/1.1 200 Connection established\r\n\r\n";
    else if (c.kind == ListenerKind::socks) h.reply = socks_reply(SocksReply::succeeded);
    h.protocol = c.protocol;
    h.host = checked_host(c);
    h.port = c.target.port;
    h.address = c.address;
    h.reason = c.verdict.reason;
    h.wall = c.wall;
    poller.forget(c.client.get());
    poller.forget(c.upstream.get());
    h.client = std::move(c.client);
    h.upstream = std::move(c.upstream);
    c.logged = true;  // the credential filter records this connection
    std::uint64_t id = c.id;
    if (!interceptor->start(std::move(h))) {
      c.logged = false;
      record(c, false, fmt::format("too many connections to credential hosts at once ({})", kMaxIntercepted));
    }
    close_conn(id);
  }

  void watch(int fd, std::uint64_t tag, std::uint32_t events) { poller.watch(fd, tag, events); }

  void record(Conn& c, bool allowed, std::string reason) {
    if (c.logged) return;
    c.logged = true;
    Decision d;
    d.time = c.wall;
    d.protocol = c.protocol;
    d.host = c.target.host;
    d.port = c.target.port;
    d.address = c.address;
    d.allowed = allowed;
    d.reason = std::move(reason);
    d.rule_refusal = !allowed && c.rule_refusal && c.target.port > 0 && normalise_host(c.target.host).has_value();
    d.bytes_up = c.up.bytes;
    d.bytes_down = c.down.bytes;
    d.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
    recorder.add(std::move(d));
  }

  void close_conn(std::uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (!c.logged) record(c, c.verdict.allowed, c.verdict.reason.empty() ? "closed" : c.verdict.reason);
    if (!c.resolving.empty()) resolver.cancel(c.id, c.resolving);  // nobody waits for it now
    if (c.client.valid() && !c.client_dead) poller.forget(c.client.get());
    if (c.upstream.valid() && !c.upstream_dead) poller.forget(c.upstream.get());
    --listeners[c.listener].open;
    conns.erase(it);  // fds close with their owners
  }

  // Refuse: answer in the protocol's words, then close once flushed.
  // `told`: what the jail is told (default: `reason`), never a host file path or DNS answer.
  void refuse(Conn& c, int http_status, SocksReply socks, const std::string& reason, std::string_view told = {}) {
    record(c, false, reason);
    if (c.kind == ListenerKind::http)
      c.to_client = http_response(http_status, reason_phrase(http_status),
                                  "pi-jail: " + bounded(told.empty() ? reason : told) + "\n");
    else if (c.kind == ListenerKind::socks)
      c.to_client = socks_reply(socks);
    c.state = State::closing;
    c.deadline = Clock::now() + limits.handshake;  // a client that never reads the answer
    if (c.upstream.valid()) {
      poller.forget(c.upstream.get());
      c.upstream.reset();
    }
    flush_and_close(c);
  }

  void flush_and_close(Conn& c) {
    while (!c.to_client.empty()) {
      ssize_t n = ::send(c.client.get(), c.to_client.data(), c.to_client.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) {
        if (n < 0 && errno == EAGAIN) {
          watch(c.client.get(), c.id << 1, kOut);
          return;
        }
        break;
      }
      c.to_client.erase(0, static_cast<size_t>(n));
    }
    close_conn(c.id);
  }

  // The listener's budget is full: the connection idle the longest gives
  // way, one still in its request (or its refusal) before a relayed one.
  void make_room(size_t listener) {
    Conn* victim = nullptr;
    auto rank = [](const Conn& c) { return c.state == State::relaying ? 1 : 0; };
    for (auto& [id, c] : conns) {
      if (c->listener != listener) continue;
      if (!victim || rank(*c) < rank(*victim) ||
          (rank(*c) == rank(*victim) && c->last_active < victim->last_active))
        victim = c.get();
    }
    if (!victim) return;
    std::string why = fmt::format("closed to make room: this listener's {} connections were all in use",
                                  limits.connections_per_listener);
    if (victim->state == State::relaying) record(*victim, true, victim->verdict.reason + "; " + why);
    else record(*victim, false, why);
    close_conn(victim->id);
  }

  void pause_accepting() {
    for (auto& l : listeners) poller.forget(l.fd.get());
    accept_paused_until = Clock::now() + tick;
  }

  void resume_accepting() {
    accept_paused_until.reset();
    for (size_t i = 0; i < listeners.size(); ++i) watch(listeners[i].fd.get(), kTagListener | i, kIn);
  }

  void accept_on(size_t index) {
    Listener& l = listeners[index];
    while (!accept_paused_until) {
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
        if (auto v6 = parse_ip("::1"); v6 && !l.target->addr.v6) ref.addrs.push_back(*v6);
        watch(fd, ref.id << 1, 0);  // nothing from the host's client until connected
        try_connect(ref);
      }
    }
  }

  void on_client_handshake(Conn& c) {
    char buf[4096];
    while (c.inbuf.size() <= kMaxHttpHead + 1) {
      ssize_t n = ::recv(c.client.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return close_conn(c.id);
      if (n < 0) {
        if (errno == EAGAIN) break;
        return close_conn(c.id);
      }
      c.inbuf.append(buf, static_cast<size_t>(n));
    }
    if (c.kind == ListenerKind::http) {
      HttpRequest r = parse_http_request(c.inbuf);
      if (r.progress == Progress::need_more) return;
      if (r.progress == Progress::bad) {
        c.target = {"", 0};
        return refuse(c, r.status, SocksReply::general_failure, "malformed request: " + bounded(r.error));
      }
      c.protocol = r.tunnel ? Protocol::http_connect : Protocol::http;
      c.target = r.target;
      c.upstream_head = r.upstream;
      if (interceptor) {
        // A placeholder is never sent in clear, nor through a tunnel to a
        // host it is not bound to.
        std::string host = checked_host(c);
        if (auto name = interceptor->unbound_placeholder(std::string_view(c.inbuf).substr(0, r.consumed), host,
                                                          r.tunnel ? c.target.port : -1))
          return refuse(c, 403, SocksReply::not_allowed,
                        fmt::format("a placeholder of {} in a {} request to {}:{}: refused", *name,
                                    r.tunnel ? "CONNECT" : "plain-http", bounded(host), c.target.port));
      }
      c.inbuf.erase(0, r.consumed);
      return decide(c);
    }
    // SOCKS5: greeting, then the request.
    if (!c.greeted) {
      SocksGreeting g = parse_socks_greeting(c.inbuf);
      if (g.progress == Progress::need_more) return;
      if (g.progress == Progress::bad || !g.no_auth_offered) {
        c.to_client = std::string{'\x05', '\xff'};
        record(c, false, "SOCKS5 greeting without the no-authentication method");
        c.state = State::closing;
        return flush_and_close(c);
      }
      c.inbuf.erase(0, g.consumed);
      c.greeted = true;
      std::string ok{'\x05', '\x00'};
      if (::send(c.client.get(), ok.data(), ok.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != 2) return close_conn(c.id);
    }
    SocksRequest r = parse_socks_request(c.inbuf);
    if (r.progress == Progress::need_more) return;
    c.target = r.target;
    if (r.progress == Progress::bad) {
      std::string why = r.reply == SocksReply::command_not_supported
                            ? fmt::format("SOCKS5 command {} is not supported (only CONNECT)", r.command)
                            : "malformed SOCKS5 request";
      return refuse(c, 400, r.reply, why);
    }
    c.inbuf.erase(0, r.consumed);
    decide(c);
  }

  // The rule check; then resolve (names) or connect (literals).
  void decide(Conn& c) {
    std::string host = c.target.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    c.verdict = rules.check(host, c.target.port);
    if (!c.verdict.allowed) {
      c.rule_refusal = true;
      return refuse(c, 403, SocksReply::not_allowed, c.verdict.reason, c.verdict.told);
    }
    watch(c.client.get(), c.id << 1, 0);  // nothing more from the client until connected
    for (const auto& [name, to] : limits.test_resolve)  // test builds only
      if (name == fmt::format("{}:{}", host, c.target.port)) {
        c.addrs = {to.first};
        c.test_port = to.second;
        return try_connect(c);
      }
    if (auto fixed = Rules::fixed_addresses(host); !fixed.empty()) {  // literals, localhost
      c.addrs = std::move(fixed);
      return try_connect(c);
    }
    if (!resolver.submit(c.id, host))
      return refuse(c, 503, SocksReply::general_failure,
                    fmt::format("too many names being looked up ({}); try again", limits.resolver_names));
    c.state = State::resolving;
    c.resolving = host;
  }

  void on_resolved(Resolver::Answer& r) {
    auto it = conns.find(r.conn);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    c.resolving.clear();
    if (!r.error.empty() || r.addrs.empty())
      return refuse(c, 502, SocksReply::host_unreachable,
                    fmt::format("cannot resolve {}: {}", bounded(c.target.host), r.error.empty() ? "no address" : r.error),
                    "cannot resolve the host");
    // Every address is checked; only checked ones are connected to.
    Verdict refusal;
    for (const auto& a : r.addrs) {
      Verdict v = rules.check_address(c.verdict, c.target.host, a);
      if (v.allowed) c.addrs.push_back(a);
      else if (refusal.reason.empty()) refusal = v;
    }
    if (c.addrs.empty()) return refuse(c, 403, SocksReply::not_allowed, refusal.reason, refusal.told);
    try_connect(c);
  }

  void try_connect(Conn& c) {
    while (c.next_addr < c.addrs.size()) {
      const IpAddress& a = c.addrs[c.next_addr++];
      // Final check of the exact address (literal requests come here too).
      // A published port is the operator's own choice, inside the jail.
      Verdict v = c.kind == ListenerKind::publish || c.test_port ? c.verdict
                                                                 : rules.check_address(c.verdict, c.target.host, a);
      const int port = c.test_port ? c.test_port : c.target.port;
      if (!v.allowed) {
        if (c.next_addr == c.addrs.size()) return refuse(c, 403, SocksReply::not_allowed, v.reason, v.told);
        continue;
      }
      sockaddr_storage ss{};
      socklen_t len;
      if (a.v6) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = a.v6addr;
        s6->sin6_port = htons(static_cast<uint16_t>(port));
        len = sizeof *s6;
      } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_addr = a.v4addr;
        s4->sin_port = htons(static_cast<uint16_t>(port));
        len = sizeof *s4;
      }
      if (c.kind == ListenerKind::publish) {
        int fd = jail_sockets ? jail_sockets(ss.ss_family) : -ENOSYS;
        if (fd < 0) {  // e.g. no IPv6 in the jail: the next address, else refused below
          c.jail_socket_error = fmt::format("cannot make a socket in the jail's network namespace: {}",
                                            std::strerror(-fd));
          continue;
        }
        c.upstream.reset(fd);
      } else {
        c.upstream.reset(::socket(ss.ss_family, SOCK_STREAM, 0));
      }
      if (!c.upstream.valid() || !set_flags(c.upstream.get())) continue;
      no_delay(c.upstream.get());
      c.address = a.str();
      int rc = ::connect(c.upstream.get(), reinterpret_cast<sockaddr*>(&ss), len);
      if (rc == 0 || errno == EINPROGRESS) {
        c.state = State::connecting;
        watch(c.upstream.get(), (c.id << 1) | 1, kOut);
        return;
      }
    }
    refuse(c, 502, SocksReply::connection_refused,
           c.jail_socket_error.empty() ? fmt::format("cannot connect to {}:{}", bounded(c.target.host), c.target.port)
                                       : c.jail_socket_error);
  }

  void on_connected(Conn& c) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      poller.forget(c.upstream.get());
      c.upstream.reset();
      if (c.next_addr < c.addrs.size()) return try_connect(c);
      return refuse(c, 502, err == ECONNREFUSED ? SocksReply::connection_refused : SocksReply::host_unreachable,
                    fmt::format("cannot connect to {}:{}: {}", bounded(c.target.host), c.target.port,
                                std::strerror(err)));
    }
    if (interceptor && c.protocol != Protocol::http && interceptor->bound(checked_host(c), c.target.port))
      return hand_off(c);
    c.state = State::relaying;
    c.last_active = Clock::now();
    c.up.src = c.client.get();
    c.up.dst = c.upstream.get();
    c.down.src = c.upstream.get();
    c.down.dst = c.client.get();
    if (c.kind == ListenerKind::http && c.protocol == Protocol::http_connect)
      c.down.pending = "HTTP/1.1 200 Connection established\r\n\r\n";
    else if (c.kind == ListenerKind::socks)
      c.down.pending = socks_reply(SocksReply::succeeded);
    c.up.pending = c.upstream_head + c.inbuf;
    c.inbuf.clear();
#if PJ_PROXY_EPOLL
    for (Flow* f : {&c.up, &c.down}) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return close_conn(c.id);
      f->pipe_r.reset(p[0]);
      f->pipe_w.reset(p[1]);
    }
#endif
    relay(c);
  }

  void relay(Conn& c) {
    c.up.pump(limits.relay_slice);
    c.down.pump(limits.relay_slice);
    if (c.up.moved || c.down.moved) c.last_active = Clock::now();
    if (c.up.error || c.down.error || (c.up.done && c.down.done)) {
      record(c, true, c.verdict.reason);
      return close_conn(c.id);
    }
    constexpr std::uint32_t in = kIn, out = kOut, none = 0;
    std::uint32_t client_ev = (c.up.want_in ? in : none) | (c.down.want_out ? out : none);
    std::uint32_t upstream_ev = (c.down.want_in ? in : none) | (c.up.want_out ? out : none);
    // Level-triggered, and only what each flow waits for: a side whose
    // input is done is not watched for input any more (no spinning on EOF),
    // and a side that hung up is not watched at all.
    if (!c.client_dead) watch(c.client.get(), c.id << 1, client_ev);
    if (!c.upstream_dead) watch(c.upstream.get(), (c.id << 1) | 1, upstream_ev);
  }

  // A relayed socket hung up (EPOLLHUP/EPOLLERR: reset, or shut both
  // ways). The kernel reports that whatever is asked for, so the socket
  // leaves the poller for good: re-arming it would wake the loop forever.
  // What can still be read from it is relayed; if bytes were still owed to
  // it, they can never arrive, and the connection ends.
  void on_hangup(Conn& c, bool upstream_side) {
    std::uint64_t id = c.id;
    (upstream_side ? c.upstream_dead : c.client_dead) = true;
    (upstream_side ? c.down : c.up).src_dead = true;
    poller.forget(upstream_side ? c.upstream.get() : c.client.get());
    relay(c);
    if (!conns.count(id)) return;
    Flow& into = upstream_side ? c.up : c.down;
    if (!into.done) {
      record(c, true, c.verdict.reason);
      close_conn(id);
    }
  }

  void on_conn_event(std::uint64_t tag, std::uint32_t events) {
    auto it = conns.find(tag >> 1);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    switch (c.state) {
      case State::handshake:
      case State::socks_request:
        if ((tag & 1) == 0) {
          c.last_active = Clock::now();
          on_client_handshake(c);
        }
        break;
      case State::resolving:
        if (events & kHangup) close_conn(c.id);  // the client gave up: so does its look-up
        break;
      case State::connecting:
        if (tag & 1) on_connected(c);
        else if (events & kHangup) close_conn(c.id);
        break;
      case State::relaying:
        if (events & kHangup) on_hangup(c, (tag & 1) != 0);
        else relay(c);
        break;
      case State::closing: flush_and_close(c); break;
    }
  }

  // Timeouts: a handshake (request, resolution, connect) or an unread
  // refusal past its deadline; a relayed connection idle too long.
  void sweep() {
#if PJ_PROXY_EPOLL
    std::uint64_t n;
    ssize_t r = ::read(timer.get(), &n, sizeof n);
    (void)r;
#endif
    auto now = Clock::now();
    if (!PJ_PROXY_EPOLL && now - last_sweep < tick) return;
    last_sweep = now;
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
      if (it->second->state == State::closing) close_conn(id);
      else refuse(*it->second, 504, SocksReply::general_failure, "handshake timed out");
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
};

Proxy::Proxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Proxy::~Proxy() = default;

util::Result<std::unique_ptr<Proxy>> Proxy::start(Rules rules, int log_fd, ProxyLimits limits,
                                                  std::shared_ptr<Interceptor> interceptor) {
  // splice(2) into a socket whose peer is gone raises SIGPIPE (splice has
  // no MSG_NOSIGNAL): a jailed client that closes mid-download must not
  // kill the supervisor. Process-wide, and inherited by later children:
  // the Linux jail is cloned before the filter starts, and the Seatbelt
  // launch resets every signal before exec.
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  auto impl = std::make_unique<Impl>(std::move(rules), log_fd, limits);
  if (interceptor) {
    interceptor->set_limits({limits.handshake, limits.idle});
    impl->interceptor = std::move(interceptor);
  }
  if (!impl->poller.ok()) return Error::from_errno("create the network filter's event loop", errno);
  if (impl->resolver.fd() < 0) return Error::from_errno("network filter wake-up", errno);
#if PJ_PROXY_EPOLL
  if (!impl->timer.valid()) return Error::from_errno("network filter timer", errno);
  itimerspec its{};
  auto tick_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(impl->tick).count();
  its.it_interval.tv_sec = its.it_value.tv_sec = tick_ns / 1000000000;
  its.it_interval.tv_nsec = its.it_value.tv_nsec = tick_ns % 1000000000;
  if (::timerfd_settime(impl->timer.get(), 0, &its, nullptr) != 0)
    return Error::from_errno("start the network filter timer", errno);
  impl->watch(impl->timer.get(), kTagTimer, kIn);
#endif
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

void Proxy::set_jail_sockets(JailSockets make) { impl_->jail_sockets = std::move(make); }

int Proxy::fd() const { return impl_->poller.fd(); }

void Proxy::run_once() { run_for(std::chrono::milliseconds(0)); }

void Proxy::run_for(std::chrono::milliseconds max_wait) {
  Event evs[64];
  // Without a timer fd, the wait's timeout drives the sweep.
  auto wait = PJ_PROXY_EPOLL ? max_wait : std::min(max_wait, impl_->tick);
  size_t n = impl_->poller.wait(evs, 64, static_cast<int>(wait.count()));
  for (size_t i = 0; i < n; ++i) {
    std::uint64_t tag = evs[i].tag;
    if (tag & kTagListener) {
      if (!impl_->accept_paused_until) impl_->accept_on(tag & ~kTagListener);
    } else if (tag == kTagResolver) {
      for (auto& r : impl_->resolver.take()) impl_->on_resolved(r);
    } else if (tag == kTagTimer) {
      impl_->sweep();
    } else {
      impl_->on_conn_event(tag, evs[i].events);
    }
  }
  if (!PJ_PROXY_EPOLL) impl_->sweep();
  impl_->take_intercepted();
}

void Proxy::shutdown() {
  std::vector<std::uint64_t> ids;
  for (auto& [id, c] : impl_->conns) ids.push_back(id);
  for (auto id : ids) impl_->close_conn(id);
  if (impl_->interceptor) {
    impl_->interceptor->shutdown();
    impl_->take_intercepted();
  }
  impl_->recorder.flush();
}

const DecisionTable& Proxy::decisions() const { return impl_->recorder.table(); }

size_t Proxy::open_connections() const { return impl_->conns.size(); }

}  // namespace pj::netproxy
