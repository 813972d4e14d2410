// One connection through the network filter, from its request to its
// end: the request head (HTTP or SOCKS5), the rule check, resolution off
// the loop, the connect to a checked address, the relay or the hand-off
// to the credential filter, and the refusal in the client's protocol
// (proxy_impl.h). Loop thread only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "netproxy/proxy_impl.h"

namespace pj::netproxy {

namespace {

// The refusal of a destination that is the upstream proxy itself
// (UpstreamProxy::is_itself): `addr` when it was found by an address
// looked up, which the jail is never told.
Verdict proxy_itself(const UpstreamProxy& proxy, std::string_view host, int port, const net::IpAddress* addr) {
  const std::string target = fmt::format("{}:{}", bounded(host), port);
  return {false, Reach::public_only,
          fmt::format("{} is the upstream proxy {}{}: never a destination, whatever the rules allow", target,
                      proxy.name(), addr ? " (address " + addr->str() + ")" : ""),
          fmt::format("{} is the upstream proxy: never a destination, whatever the rules allow", target)};
}

}  // namespace

// The target as the rules see it (lower case, no brackets or trailing dot).
std::string Proxy::Impl::checked_host(const Conn& c) const {
  std::string host = c.target.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return net::normalise_host(host).value_or(host);
}

// Connected to a host bound to a credential: the credential filter
// serves it from here (TLS both ways, or plain HTTP to a loopback port
// bound so), on its own thread.
void Proxy::Impl::hand_off(Conn& c, Wire wire) {
  if (!credentials->has_room()) {
    c.rule_refusal = false;
    return refuse(
        c, 503, SocksReply::general_failure,
        fmt::format("too many connections to hosts bound to a credential at once ({}); try again", kMaxIntercepted));
  }
  // Plain HTTP has no handshake to come first: what the jail sent
  // already (an absolute-form request, its rewritten head) is its first request.
  if (!c.inbuf.empty() && wire != Wire::plain_http) {
    c.rule_refusal = false;
    return refuse(c, 400, SocksReply::general_failure,
                  "bytes sent before the tunnel was open, to a host bound to a credential");
  }
  CredentialFilter::Handoff h;
  h.wire = wire;
  if (wire == Wire::plain_http) h.prefill = std::exchange(c.upstream_head, {}) + std::exchange(c.inbuf, {});
  // An absolute-form request gets no reply of the proxy's own.
  if (c.protocol == Protocol::http_connect)
    h.reply = "HTTP/1.1 200 Connection established\r\n\r\n";
  else if (c.kind == ListenerKind::socks)
    h.reply = socks_reply(SocksReply::succeeded);
  h.protocol = c.protocol;
  h.host = checked_host(c);
  h.port = c.target.port;
  h.address = c.address;
  h.reason = c.verdict.reason;
  h.wall = c.wall;
  if (c.via_proxy) h.via = upstream_proxy;  // its reconnections tunnel too
  poller.forget(c.client.get());
  poller.forget(c.upstream.get());
  h.client = std::move(c.client);
  h.upstream = std::move(c.upstream);
  c.logged = true;  // the credential filter records this connection
  std::uint64_t id = c.id;
  if (!credentials->start(std::move(h))) {
    c.logged = false;
    record(c, false, fmt::format("too many connections to credential hosts at once ({})", kMaxIntercepted));
  }
  close_conn(id);
}

void Proxy::Impl::record(Conn& c, bool allowed, std::string reason) {
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
  d.rule_refusal = !allowed && c.rule_refusal && c.target.port > 0 && net::normalise_host(c.target.host).has_value();
  d.bytes_up = c.up.bytes;
  d.bytes_down = c.down.bytes;
  d.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
  recorder.add(std::move(d));
}

void Proxy::Impl::close_conn(std::uint64_t id) {
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
void Proxy::Impl::refuse(Conn& c, int http_status, SocksReply socks, const std::string& reason, std::string_view told) {
  record(c, false, reason);
  // A rule's refusal names the host and the fix in the status line too:
  // some clients show nothing else.
  if (c.kind == ListenerKind::http)
    c.to_client =
        http_response(http_status,
                      c.rule_refusal && http_status == 403 ? refusal_reason_phrase(c.target.host, c.target.port)
                                                           : reason_phrase(http_status),
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

void Proxy::Impl::flush_and_close(Conn& c) {
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

void Proxy::Impl::on_client_handshake(Conn& c) {
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
    if (credentials) {
      // A placeholder is never sent in clear (but to a loopback port
      // bound for plain HTTP), nor through a tunnel to a host it is not
      // bound to.
      std::string host = checked_host(c);
      const auto wire = credentials->bound_wire(host, c.target.port);
      const bool plain_bound = wire == Wire::plain_http;
      if (auto name =
              credentials->unbound_placeholder(std::string_view(c.inbuf).substr(0, r.consumed), host,
                                               r.tunnel || plain_bound ? c.target.port : -1, wire.value_or(Wire::tls)))
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
void Proxy::Impl::decide(Conn& c) {
  std::string host = c.target.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  c.verdict = rules.check(host, c.target.port);
  if (!c.verdict.allowed) {
    c.rule_refusal = !c.verdict.denied;  // an allow rule would not outweigh a deny
    return refuse(c, 403, SocksReply::not_allowed, c.verdict.reason, c.verdict.told);
  }
  // The proxy itself, named or as a literal: refused before it is sent
  // to the proxy or connected to (an address a name resolves to is
  // checked in try_connect). A published port goes into the jail.
  const std::string checked = checked_host(c);
  if (upstream_proxy && c.kind != ListenerKind::publish && upstream_proxy->is_itself(checked, c.target.port)) {
    const Verdict v = proxy_itself(*upstream_proxy, checked, c.target.port, nullptr);
    return refuse(c, 403, SocksReply::not_allowed, v.reason, v.told);
  }
  watch(c.client.get(), c.id << 1, 0);  // nothing more from the client until connected
  // Through the upstream proxy, which resolves the name: nothing is
  // looked up here (and --test-resolve, a stand-in for a look-up, does
  // not apply). A literal is checked as a literal always is.
  if (upstream_proxy && c.kind != ListenerKind::publish && upstream_proxy->applies(checked, c.target.port)) {
    if (auto literal = net::parse_ip(checked)) {
      Verdict v = rules.check_address(c.verdict, c.target.host, *literal);
      if (!v.allowed) return refuse(c, 403, SocksReply::not_allowed, v.reason, v.told);
    }
    c.via_proxy = true;
    c.verdict.reason += "; through the upstream proxy " + upstream_proxy->name();
    c.addrs = upstream_proxy->addrs;
    return try_connect(c);
  }
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

void Proxy::Impl::on_resolved(Resolver::Answer& r) {
  auto it = conns.find(r.conn);
  if (it == conns.end()) return;
  Conn& c = *it->second;
  c.resolving.clear();
  if (!r.error.empty() || r.addrs.empty())
    return refuse(
        c, 502, SocksReply::host_unreachable,
        fmt::format("cannot resolve {}: {}", bounded(c.target.host), r.error.empty() ? "no address" : r.error),
        "cannot resolve the host");
  // Every address is checked; only checked ones are connected to.
  Verdict refusal;
  for (const auto& a : r.addrs) {
    Verdict v = rules.check_address(c.verdict, c.target.host, a);
    if (v.allowed)
      c.addrs.push_back(a);
    else if (refusal.reason.empty())
      refusal = v;
  }
  if (c.addrs.empty()) return refuse(c, 403, SocksReply::not_allowed, refusal.reason, refusal.told);
  try_connect(c);
}

void Proxy::Impl::try_connect(Conn& c) {
  // Never the upstream proxy but through it (via_proxy): a destination
  // one of whose addresses is the proxy's, at its port, is refused whole.
  if (upstream_proxy && !c.via_proxy && c.kind != ListenerKind::publish)
    for (const auto& a : c.addrs)
      if (upstream_proxy->is_itself(a, c.test_port ? c.test_port : c.target.port)) {
        const Verdict v = proxy_itself(*upstream_proxy, checked_host(c), c.target.port, &a);
        return refuse(c, 403, SocksReply::not_allowed, v.reason, v.told);
      }
  while (c.next_addr < c.addrs.size()) {
    const net::IpAddress& a = c.addrs[c.next_addr++];
    // Final check of the exact address (literal requests come here too).
    // A published port is the operator's own choice, inside the jail, and
    // so is the upstream proxy.
    Verdict v = c.kind == ListenerKind::publish || c.test_port || c.via_proxy
                    ? c.verdict
                    : rules.check_address(c.verdict, c.target.host, a);
    const int port = c.via_proxy ? upstream_proxy->url.port : c.test_port ? c.test_port : c.target.port;
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
        c.jail_socket_error =
            fmt::format("cannot make a socket in the jail's network namespace: {}", std::strerror(-fd));
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
         !c.jail_socket_error.empty() ? c.jail_socket_error
         : c.via_proxy                ? fmt::format("cannot connect to the upstream proxy {}", upstream_proxy->name())
                                      : fmt::format("cannot connect to {}:{}", bounded(c.target.host), c.target.port));
}

void Proxy::Impl::on_connected(Conn& c) {
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    poller.forget(c.upstream.get());
    c.upstream.reset();
    if (c.next_addr < c.addrs.size()) return try_connect(c);
    return refuse(
        c, 502, err == ECONNREFUSED ? SocksReply::connection_refused : SocksReply::host_unreachable,
        c.via_proxy
            ? fmt::format("cannot connect to the upstream proxy {}: {}", upstream_proxy->name(), std::strerror(err))
            : fmt::format("cannot connect to {}:{}: {}", bounded(c.target.host), c.target.port, std::strerror(err)));
  }
  if (c.via_proxy) {
    c.state = State::proxy_handshake;
    c.tunnel = std::make_unique<TunnelOpener>(*upstream_proxy, checked_host(c), c.target.port);
    return proxy_handshake(c);
  }
  on_open(c);
}

// Connected to the upstream proxy: the CONNECT out, its reply in (within
// the connection's handshake deadline, Proxy::Impl::sweep).
void Proxy::Impl::proxy_handshake(Conn& c) {
  switch (c.tunnel->step(c.upstream.get())) {
    case TunnelOpener::Step::want_write: return watch(c.upstream.get(), (c.id << 1) | 1, kOut);
    case TunnelOpener::Step::want_read: return watch(c.upstream.get(), (c.id << 1) | 1, kIn);
    case TunnelOpener::Step::failed: return refuse(c, 502, SocksReply::general_failure, c.tunnel->error());
    case TunnelOpener::Step::open: break;
  }
  c.tunnel.reset();
  on_open(c);
}

// The upstream is open (connected, or tunnelled through the proxy): hand
// it to the credential filter, or relay.
void Proxy::Impl::on_open(Conn& c) {
  if (credentials) {
    // Absolute-form plain HTTP is served by the credential filter only
    // for a loopback port bound for plain HTTP (elsewhere a placeholder
    // in it was refused with its head).
    auto wire = credentials->bound_wire(checked_host(c), c.target.port);
    if (wire && (c.protocol != Protocol::http || *wire == Wire::plain_http)) return hand_off(c, *wire);
  }
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
  for (Flow* f : {&c.up, &c.down})
    if (!f->prepare()) return close_conn(c.id);
  start_sniffing(c);
  relay(c);
}

// A host loopback port that no binding covers (the credential filter
// took the bound ones): a local server the jail may send a placeholder
// to. What it sends first (the head that would carry a key) is scanned.
void Proxy::Impl::start_sniffing(Conn& c) {
  if (watched.empty() || c.kind == ListenerKind::publish || !net::is_loopback_host(checked_host(c)) ||
      !net::is_loopback_literal(c.address))
    return;
  c.sniff_left = kSniffBytes;
  c.sniff_tail.clear();
  const std::string pending = std::exchange(c.up.pending, {});
  c.sniff_left -= std::min(c.sniff_left, pending.size());
  scan_for_placeholders(c, pending);
  c.up.pending = pending;
}

// Read what the jail sent (up to the window) into the pending bytes,
// scanned: the relay sends pending bytes first and, while the window is
// open, reads nothing itself (Proxy::Impl::relay).
void Proxy::Impl::sniff(Conn& c) {
  char buf[16384];
  while (c.sniff_left > 0 && c.up.pending.size() < sizeof buf) {
    ssize_t n = ::recv(c.client.get(), buf, std::min(sizeof buf, c.sniff_left), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The end or an error: the relay's own read sees it again.
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.sniff_left = 0;
      return;
    }
    c.sniff_left -= static_cast<size_t>(n);
    scan_for_placeholders(c, std::string_view(buf, static_cast<size_t>(n)));
    c.up.pending.append(buf, static_cast<size_t>(n));
  }
}

void Proxy::Impl::scan_for_placeholders(Conn& c, std::string_view bytes) {
  if (bytes.empty()) return;
  std::string text = c.sniff_tail;
  text.append(bytes);
  size_t longest = 0;
  for (const auto& w : watched) {
    longest = std::max(longest, w.placeholder.size());
    if (text.find(w.placeholder) == std::string::npos) continue;
    Decision d;
    d.time = d.last = std::chrono::system_clock::now();
    d.protocol = Protocol::credential;
    d.host = checked_host(c);
    d.port = c.target.port;
    d.address = c.address;
    d.allowed = true;
    d.reason = fmt::format(
        "a placeholder of {} went to this host loopback port unsubstituted: no [credentials] "
        "bind covers it",
        w.name);
    d.unbound_credential = w.credential;
    recorder.add(std::move(d));
    c.sniff_left = 0;  // once per connection
    return;
  }
  c.sniff_tail = text.substr(text.size() - std::min(text.size(), longest > 0 ? longest - 1 : 0));
}

namespace {

// The flows a readiness event concerns: the client readable or the
// upstream writable moves bytes up; the reverse, down. A flow no event
// concerns would only hear EAGAIN again (one system call a turn).
Pump flows_for(bool upstream_side, std::uint32_t events) {
  const bool in = (events & kIn) != 0, out = (events & kOut) != 0;
  const bool up = upstream_side ? out : in, down = upstream_side ? in : out;
  return up == down ? Pump::both : up ? Pump::up : Pump::down;
}

}  // namespace

void Proxy::Impl::relay(Conn& c, Pump which) {
  if (c.sniff_left > 0) {
    sniff(c);  // what it read waits in up's pending bytes: up is pumped
    which = Pump::both;
  }
  // While the window is open the relay reads nothing unscanned.
  if (which != Pump::down)
    c.up.pump(c.sniff_left > 0 && !c.up.src_dead ? 0 : limits.relay_slice);
  else
    c.up.moved = false;
  if (which != Pump::up)
    c.down.pump(limits.relay_slice);
  else
    c.down.moved = false;
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
  if (!c.client_dead && std::exchange(c.client_watch, client_ev) != client_ev)
    watch(c.client.get(), c.id << 1, client_ev);
  if (!c.upstream_dead && std::exchange(c.upstream_watch, upstream_ev) != upstream_ev)
    watch(c.upstream.get(), (c.id << 1) | 1, upstream_ev);
}

// A relayed socket hung up (kHangup: reset, or shut both
// ways). The kernel reports that whatever is asked for, so the socket
// leaves the poller for good: re-arming it would wake the loop forever.
// What can still be read from it is relayed; if bytes were still owed to
// it, they can never arrive, and the connection ends.
void Proxy::Impl::on_hangup(Conn& c, bool upstream_side) {
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

void Proxy::Impl::on_conn_event(std::uint64_t tag, std::uint32_t events) {
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
      if (tag & 1)
        on_connected(c);
      else if (events & kHangup)
        close_conn(c.id);
      break;
    case State::proxy_handshake:
      if (tag & 1)
        proxy_handshake(c);
      else if (events & kHangup)
        close_conn(c.id);
      break;
    case State::relaying:
      if (events & kHangup)
        on_hangup(c, (tag & 1) != 0);
      else
        relay(c, flows_for((tag & 1) != 0, events));
      break;
    case State::closing: flush_and_close(c); break;
  }
}

}  // namespace pj::netproxy
