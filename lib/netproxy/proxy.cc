#include "netproxy/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
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
#define MSG_NOSIGNAL 0  // macOS: sockets get SO_NOSIGPIPE instead (no_sigpipe())
#endif

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "netproxy/protocol.h"
#include "util/json.h"

namespace pj::netproxy {

using util::Error;
using util::UniqueFd;
using Clock = std::chrono::steady_clock;

std::string Decision::json() const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  std::string line = "{";
  line += fmt::format("\"time_ms\": {}, \"protocol\": {}, \"host\": {}, \"port\": {}, \"address\": {}, ", ms,
                      util::json_escape(protocol), util::json_escape(host), port, util::json_escape(address));
  line += fmt::format("\"allowed\": {}, \"reason\": {}, \"bytes_up\": {}, \"bytes_down\": {}, \"duration_ms\": {}}}",
                      allowed, util::json_escape(reason), bytes_up, bytes_down, duration_ms);
  return line;
}

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

// Wakes the loop from another thread.
class Wakeup {
public:
  bool ok() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void signal() {
    std::uint64_t one = 1;
    ssize_t w = ::write(fd_.get(), &one, sizeof one);
    (void)w;
  }
  void drain() {
    std::uint64_t n;
    ssize_t r = ::read(fd_.get(), &n, sizeof n);
    (void)r;
  }

private:
  UniqueFd fd_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
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
    for (const auto& x : p) {
      if (!x.revents || n == max) continue;
      std::uint32_t e = ((x.revents & POLLIN) ? kIn : 0U) | ((x.revents & POLLOUT) ? kOut : 0U) |
                        ((x.revents & (POLLHUP | POLLERR | POLLNVAL)) ? kHangup : 0U);
      out[n++] = {fds_[x.fd].first, e};
    }
    return n;
  }

private:
  std::map<int, std::pair<std::uint64_t, std::uint32_t>> fds_;
};

class Wakeup {
public:
  Wakeup() {
    int p[2];
    if (::pipe(p) != 0) return;
    r_.reset(p[0]);
    w_.reset(p[1]);
    if (!set_flags(p[0]) || !set_flags(p[1])) r_.reset();
  }
  bool ok() const { return r_.valid(); }
  int fd() const { return r_.get(); }
  void signal() {
    char c = 1;
    ssize_t w = ::write(w_.get(), &c, 1);
    (void)w;
  }
  void drain() {
    char buf[64];
    while (::read(r_.get(), buf, sizeof buf) > 0) {
    }
  }

private:
  UniqueFd r_, w_;
};
#endif

// Name resolution off the loop: a few worker threads, results announced
// through a Wakeup (an eventfd, or a pipe).
class Resolver {
public:
  struct Result {
    std::uint64_t conn;
    std::vector<IpAddress> addrs;
    std::string error;
  };

  Resolver() {
    for (int i = 0; i < 4; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Resolver() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int fd() const { return wake_.ok() ? wake_.fd() : -1; }

  void submit(std::uint64_t conn, std::string host) {
    {
      std::lock_guard lock(m_);
      queue_.push_back({conn, std::move(host)});
    }
    cv_.notify_one();
  }

  std::vector<Result> take() {
    wake_.drain();
    std::lock_guard lock(m_);
    std::vector<Result> out(std::make_move_iterator(done_.begin()), std::make_move_iterator(done_.end()));
    done_.clear();
    return out;
  }

private:
  void work() {
    while (true) {
      std::pair<std::uint64_t, std::string> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      Result res{job.first, {}, {}};
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* ai = nullptr;
      int rc = ::getaddrinfo(job.second.c_str(), nullptr, &hints, &ai);
      if (rc != 0) {
        res.error = ::gai_strerror(rc);
      } else {
        for (addrinfo* p = ai; p; p = p->ai_next) {
          IpAddress a;
          if (p->ai_family == AF_INET) {
            a.v4addr = reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr;
          } else if (p->ai_family == AF_INET6) {
            char text[INET6_ADDRSTRLEN];
            ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr, text, sizeof text);
            auto parsed = parse_ip(text);  // unwraps IPv4-mapped forms
            if (!parsed) continue;
            a = *parsed;
          } else {
            continue;
          }
          bool dup = false;
          for (const auto& x : res.addrs) dup = dup || x == a;
          if (!dup) res.addrs.push_back(a);
        }
        ::freeaddrinfo(ai);
      }
      {
        std::lock_guard lock(m_);
        done_.push_back(std::move(res));
      }
      wake_.signal();
    }
  }

  Wakeup wake_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<std::uint64_t, std::string>> queue_;
  std::deque<Result> done_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

enum class State { handshake, socks_request, resolving, connecting, relaying, closing };

// One direction of a relay: pending bytes first, then splice(2) through a
// pipe (Linux) or a buffer copy (portable).
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

  void pump() {
    want_in = want_out = false;
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
        continue;
      }
      if (!src_eof) {
        ssize_t n = ::splice(src, nullptr, pipe_w.get(), nullptr, kPipeSize, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0) {
          if (errno == EAGAIN) want_in = true;
          else error = true;
          return;
        }
        if (n == 0) src_eof = true;
        else in_pipe += static_cast<size_t>(n);
        continue;
      }
#else
      if (!src_eof) {
        char buf[kPipeSize];
        ssize_t n = ::recv(src, buf, sizeof buf, 0);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) want_in = true;
          else error = true;
          return;
        }
        if (n == 0) src_eof = true;
        else pending.assign(buf, static_cast<size_t>(n));
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
  ListenerKind kind;
  std::string protocol;
  UniqueFd client, upstream;
  State state = State::handshake;
  std::string inbuf;
  bool greeted = false;  // SOCKS greeting answered
  Target target;
  Verdict verdict;
  std::string upstream_head;  // absolute-form HTTP
  std::vector<IpAddress> addrs;
  size_t next_addr = 0;
  std::string address;
  std::string to_client;  // a reply to flush before closing or relaying
  Flow up, down;
  Clock::time_point started = Clock::now();
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
  Clock::time_point deadline;
  bool logged = false;
};

constexpr std::uint64_t kTagListener = 1ULL << 62;
constexpr std::uint64_t kTagResolver = 1ULL << 61;
constexpr std::uint64_t kTagTimer = 1ULL << 60;

}  // namespace

struct Proxy::Impl {
  Rules rules;
  int log_fd;
  ProxyLimits limits;
  Poller poller;
#if PJ_PROXY_EPOLL
  UniqueFd timer{::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)};
#endif
  Clock::time_point last_sweep = Clock::now();
  Resolver resolver;
  struct Listener {
    UniqueFd fd;
    ListenerKind kind;
    std::optional<Rules::Forward> target;
  };
  std::vector<Listener> listeners;
  std::map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::uint64_t next_id = 1;
  std::vector<Decision> decisions;

  Impl(Rules r, int fd, ProxyLimits l) : rules(std::move(r)), log_fd(fd), limits(l) {}

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
    d.bytes_up = c.up.bytes;
    d.bytes_down = c.down.bytes;
    d.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
    if (log_fd >= 0) {
      std::string line = d.json() + "\n";
      ssize_t n = ::write(log_fd, line.data(), line.size());
      (void)n;
    }
    decisions.push_back(std::move(d));
  }

  void close_conn(std::uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (!c.logged) record(c, c.verdict.allowed, c.verdict.reason.empty() ? "closed" : c.verdict.reason);
    if (c.client.valid()) poller.forget(c.client.get());
    if (c.upstream.valid()) poller.forget(c.upstream.get());
    conns.erase(it);  // fds close with their owners
  }

  // Refuse: answer in the protocol's words, then close once flushed.
  // `told`: what the jail is told (default: `reason`), never a host file path or DNS answer.
  void refuse(Conn& c, int http_status, SocksReply socks, const std::string& reason, std::string_view told = {}) {
    record(c, false, reason);
    if (c.kind == ListenerKind::http)
      c.to_client = http_response(http_status, reason_phrase(http_status),
                                  fmt::format("pi-jail: {}\n", told.empty() ? reason : told));
    else if (c.kind == ListenerKind::socks)
      c.to_client = socks_reply(socks);
    c.state = State::closing;
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

  void accept_on(Listener& l) {
    while (true) {
      int fd = ::accept(l.fd.get(), nullptr, nullptr);
      if (fd < 0) return;
      if (!set_flags(fd)) {
        ::close(fd);
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->id = next_id++;
      c->kind = l.kind;
      c->client.reset(fd);
      c->deadline = Clock::now() + limits.handshake;
      c->protocol = l.kind == ListenerKind::http ? "http" : l.kind == ListenerKind::socks ? "socks5" : "forward";
      Conn& ref = *c;
      conns.emplace(ref.id, std::move(c));
      if (conns.size() > limits.max_connections) {
        refuse(ref, 503, SocksReply::general_failure, "too many concurrent connections");
        continue;
      }
      watch(fd, ref.id << 1, kIn);
      if (l.kind == ListenerKind::forward) {
        ref.target = {l.target->host, l.target->port};  // checked as the rule that made it
        decide(ref);
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
        return refuse(c, r.status, SocksReply::general_failure, "malformed request: " + r.error);
      }
      c.protocol = r.tunnel ? "http-connect" : "http";
      c.target = r.target;
      c.upstream_head = r.upstream;
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
    if (!c.verdict.allowed) return refuse(c, 403, SocksReply::not_allowed, c.verdict.reason, c.verdict.told);
    watch(c.client.get(), c.id << 1, 0);  // nothing more from the client until connected
    if (auto fixed = Rules::fixed_addresses(host); !fixed.empty()) {  // literals, localhost
      c.addrs = std::move(fixed);
      return try_connect(c);
    }
    c.state = State::resolving;
    resolver.submit(c.id, host);
  }

  void on_resolved(Resolver::Result& r) {
    auto it = conns.find(r.conn);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (!r.error.empty() || r.addrs.empty())
      return refuse(c, 502, SocksReply::host_unreachable,
                    fmt::format("cannot resolve {}: {}", c.target.host, r.error.empty() ? "no address" : r.error),
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
      Verdict v = rules.check_address(c.verdict, c.target.host, a);
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
        s6->sin6_port = htons(static_cast<uint16_t>(c.target.port));
        len = sizeof *s6;
      } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_addr = a.v4addr;
        s4->sin_port = htons(static_cast<uint16_t>(c.target.port));
        len = sizeof *s4;
      }
      c.upstream.reset(::socket(ss.ss_family, SOCK_STREAM, 0));
      if (!c.upstream.valid() || !set_flags(c.upstream.get())) continue;
      c.address = a.str();
      int rc = ::connect(c.upstream.get(), reinterpret_cast<sockaddr*>(&ss), len);
      if (rc == 0 || errno == EINPROGRESS) {
        c.state = State::connecting;
        watch(c.upstream.get(), (c.id << 1) | 1, kOut);
        return;
      }
    }
    refuse(c, 502, SocksReply::connection_refused, fmt::format("cannot connect to {}:{}", c.target.host, c.target.port));
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
                    fmt::format("cannot connect to {}:{}: {}", c.target.host, c.target.port, std::strerror(err)));
    }
    c.state = State::relaying;
    c.up.src = c.client.get();
    c.up.dst = c.upstream.get();
    c.down.src = c.upstream.get();
    c.down.dst = c.client.get();
    if (c.kind == ListenerKind::http && c.protocol == "http-connect")
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
    c.up.pump();
    c.down.pump();
    if (c.up.error || c.down.error || (c.up.done && c.down.done)) {
      record(c, true, c.verdict.reason);
      return close_conn(c.id);
    }
    constexpr std::uint32_t in = kIn, out = kOut, none = 0;
    std::uint32_t client_ev = (c.up.want_in ? in : none) | (c.down.want_out ? out : none);
    std::uint32_t upstream_ev = (c.down.want_in ? in : none) | (c.up.want_out ? out : none);
    // Level-triggered, and only what each flow waits for: a side whose
    // input is done is not watched for input any more (no spinning on EOF).
    watch(c.client.get(), c.id << 1, client_ev);
    watch(c.upstream.get(), (c.id << 1) | 1, upstream_ev);
  }

  void on_conn_event(std::uint64_t tag, std::uint32_t events) {
    auto it = conns.find(tag >> 1);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    switch (c.state) {
      case State::handshake:
      case State::socks_request:
        if ((tag & 1) == 0) on_client_handshake(c);
        break;
      case State::resolving:
        if (events & kHangup) close_conn(c.id);  // the client gave up
        break;
      case State::connecting:
        if (tag & 1) on_connected(c);
        else if (events & kHangup) close_conn(c.id);
        break;
      case State::relaying: relay(c); break;
      case State::closing: flush_and_close(c); break;
    }
  }

  // Handshakes past their deadline are refused; at most once a second.
  void sweep() {
#if PJ_PROXY_EPOLL
    std::uint64_t n;
    ssize_t r = ::read(timer.get(), &n, sizeof n);
    (void)r;
#endif
    auto now = Clock::now();
    if (!PJ_PROXY_EPOLL && now - last_sweep < std::chrono::seconds(1)) return;
    last_sweep = now;
    std::vector<std::uint64_t> late;
    for (auto& [id, c] : conns)
      if (c->state != State::relaying && c->state != State::closing && now > c->deadline) late.push_back(id);
    for (auto id : late) {
      auto it = conns.find(id);
      if (it != conns.end()) refuse(*it->second, 504, SocksReply::general_failure, "handshake timed out");
    }
  }
};

Proxy::Proxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Proxy::~Proxy() = default;

util::Result<std::unique_ptr<Proxy>> Proxy::start(Rules rules, int log_fd, ProxyLimits limits) {
  auto impl = std::make_unique<Impl>(std::move(rules), log_fd, limits);
  if (!impl->poller.ok()) return Error::from_errno("create the network filter's event loop", errno);
  if (impl->resolver.fd() < 0) return Error::from_errno("network filter wake-up", errno);
#if PJ_PROXY_EPOLL
  if (!impl->timer.valid()) return Error::from_errno("network filter timer", errno);
  itimerspec its{};
  its.it_interval.tv_sec = 1;
  its.it_value.tv_sec = 1;
  ::timerfd_settime(impl->timer.get(), 0, &its, nullptr);
  impl->watch(impl->timer.get(), kTagTimer, kIn);
#endif
  impl->watch(impl->resolver.fd(), kTagResolver, kIn);
  return std::unique_ptr<Proxy>(new Proxy(std::move(impl)));
}

util::Status Proxy::add_listener(UniqueFd fd, ListenerKind kind, std::optional<Rules::Forward> target) {
  if (!set_flags(fd.get())) return Error::from_errno("make a network filter listener non-blocking", errno);
  std::uint64_t index = impl_->listeners.size();
  impl_->watch(fd.get(), kTagListener | index, kIn);
  impl_->listeners.push_back({std::move(fd), kind, std::move(target)});
  return {};
}

int Proxy::fd() const { return impl_->poller.fd(); }

void Proxy::run_once() { run_for(std::chrono::milliseconds(0)); }

void Proxy::run_for(std::chrono::milliseconds max_wait) {
  Event evs[64];
  // Without a timer fd, the wait's timeout drives the handshake sweep.
  int timeout = static_cast<int>(std::min<std::int64_t>(max_wait.count(), PJ_PROXY_EPOLL ? max_wait.count() : 1000));
  size_t n = impl_->poller.wait(evs, 64, timeout);
  for (size_t i = 0; i < n; ++i) {
    std::uint64_t tag = evs[i].tag;
    if (tag & kTagListener) impl_->accept_on(impl_->listeners[tag & ~kTagListener]);
    else if (tag == kTagResolver)
      for (auto& r : impl_->resolver.take()) impl_->on_resolved(r);
    else if (tag == kTagTimer) impl_->sweep();
    else impl_->on_conn_event(tag, evs[i].events);
  }
  if (!PJ_PROXY_EPOLL) impl_->sweep();
}

void Proxy::shutdown() {
  std::vector<std::uint64_t> ids;
  for (auto& [id, c] : impl_->conns) ids.push_back(id);
  for (auto id : ids) impl_->close_conn(id);
}

const std::vector<Decision>& Proxy::decisions() const { return impl_->decisions; }

}  // namespace pj::netproxy
