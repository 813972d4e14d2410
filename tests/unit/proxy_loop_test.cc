// The network filter's loop on loopback sockets: relaying, refusals and
// handshakes. Built twice: with the Linux loop (epoll, splice) into
// unit-tests, and with the portable loop (poll, buffer copy: what macOS
// runs) into proxy-portable-tests.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "loopback.h"
#include "net/proxy_url.h"
#include "netproxy/http1.h"
#include "netproxy/proxy.h"

using namespace pj;
using namespace std::chrono_literals;

namespace {

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    off += static_cast<size_t>(n);
  }
}

// Read until `n` bytes or EOF.
std::string recv_n(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

std::string recv_all(int fd) { return recv_n(fd, SIZE_MAX); }

// An upstream that echoes each connection until EOF, then half-closes.
class EchoServer {
public:
  EchoServer() {
    port = server_.port;
    server_.start([](int c) {
      std::thread([c] {
        char buf[65536];
        ssize_t n;
        while ((n = ::recv(c, buf, sizeof buf, 0)) > 0)
          if (::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
        ::shutdown(c, SHUT_WR);
        ::close(c);
      }).detach();
    });
  }
  int port = 0;

private:
  test::LoopbackServer server_;
};

// The proxy with an HTTP and a SOCKS listener, its loop on a thread.
class Running {
public:
  // `setup` adds listeners before the loop starts.
  explicit Running(netproxy::Rules rules, netproxy::ProxyLimits limits = {},
                   const std::function<void(netproxy::Proxy&)>& setup = {}) {
    auto p = netproxy::Proxy::start(std::move(rules), -1, limits);
    REQUIRE(p.ok());
    proxy_ = std::move(*p);
    REQUIRE(proxy_->add_listener(test::listen_loopback(http), netproxy::ListenerKind::http, std::nullopt).ok());
    REQUIRE(proxy_->add_listener(test::listen_loopback(socks), netproxy::ListenerKind::socks, std::nullopt).ok());
    if (setup) setup(*proxy_);
    thread_ = std::thread([this] {
      while (!stop_) {
        proxy_->run_for(20ms);
        ++turns;
      }
    });
  }
  // Stop the loop; then the decisions may be read.
  const std::vector<netproxy::Decision>& stop() {
    if (!stop_.exchange(true)) thread_.join();
    proxy_->shutdown();
    return proxy_->decisions().entries;
  }
  ~Running() { stop(); }
  int http = 0, socks = 0;
  std::atomic<std::uint64_t> turns{0};  // loop iterations: an idle loop makes ~50 a second

private:
  std::unique_ptr<netproxy::Proxy> proxy_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("proxy loop: CONNECT relays a megabyte both ways, half-close included") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  Running proxy(rules);
  auto c = test::connect_loopback(proxy.http);
  send_all(c.get(), "CONNECT 127.0.0.1:" + std::to_string(echo.port) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
  CHECK(recv_n(c.get(), ok.size()) == ok);
  std::string payload(1 << 20, 'x');
  for (size_t i = 0; i < payload.size(); i += 4096) payload[i] = static_cast<char>('a' + i % 26);
  std::thread writer([&] {
    send_all(c.get(), payload);
    ::shutdown(c.get(), SHUT_WR);  // the upstream sees EOF and ends its side
  });
  std::string back = recv_all(c.get());
  writer.join();
  CHECK(back.size() == payload.size());
  CHECK(back == payload);
  c.reset();
  std::this_thread::sleep_for(100ms);
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK(d[0].allowed);
  CHECK(d[0].protocol == netproxy::Protocol::http_connect);
  CHECK(d[0].bytes_up == payload.size());
  CHECK(d[0].bytes_down >= payload.size());
}

TEST_CASE("proxy loop: a host the rules do not name is refused with 403, and recorded") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("example.org", "test"));
  Running proxy(rules);
  auto c = test::connect_loopback(proxy.http);
  send_all(c.get(), "CONNECT 127.0.0.1:" + std::to_string(echo.port) + " HTTP/1.1\r\n\r\n");
  std::string reply = recv_all(c.get());
  CHECK(reply.rfind("HTTP/1.1 403", 0) == 0);
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK_FALSE(d[0].allowed);
  CHECK(d[0].host == "127.0.0.1");
}

TEST_CASE("proxy loop: SOCKS5 CONNECT by address relays; BIND is refused") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  Running proxy(rules);
  auto request = [&](char cmd) {
    std::string r{'\x05', cmd, '\x00', '\x01', '\x7f', '\x00', '\x00', '\x01'};
    r += static_cast<char>(echo.port >> 8);
    r += static_cast<char>(echo.port & 0xff);
    return r;
  };
  auto c = test::connect_loopback(proxy.socks);
  send_all(c.get(), std::string{'\x05', '\x01', '\x00'});
  CHECK(recv_n(c.get(), 2) == std::string{'\x05', '\x00'});
  send_all(c.get(), request('\x01'));
  std::string reply = recv_n(c.get(), 10);
  REQUIRE(reply.size() == 10);
  CHECK(reply[1] == '\x00');
  send_all(c.get(), "ping");
  CHECK(recv_n(c.get(), 4) == "ping");
  auto b = test::connect_loopback(proxy.socks);
  send_all(b.get(), std::string{'\x05', '\x01', '\x00'});
  CHECK(recv_n(b.get(), 2) == std::string{'\x05', '\x00'});
  send_all(b.get(), request('\x02'));
  std::string refused = recv_all(b.get());
  REQUIRE(refused.size() >= 2);
  CHECK(refused[1] == '\x07');  // command not supported
}

TEST_CASE("proxy loop: a client that never finishes its request is cut off at the handshake limit") {
  netproxy::Rules rules;
  netproxy::ProxyLimits limits;
  limits.handshake = 300ms;
  Running proxy(rules, limits);
  auto c = test::connect_loopback(proxy.http);
  send_all(c.get(), "CONNECT example.org:443 HTTP/1.1\r\n");  // no blank line: never complete
  auto start = std::chrono::steady_clock::now();
  std::string reply = recv_all(c.get());
  CHECK(reply.rfind("HTTP/1.1 504", 0) == 0);
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // the sweep runs without a timer fd too
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK(d[0].reason == "handshake timed out");
}

namespace {

// An upstream that accepts and then says nothing, holding each connection.
class SilentServer {
public:
  SilentServer() {
    port = server_.port;
    server_.start([this](int c) { held_.emplace_back(c); });
  }
  int port = 0;

private:
  std::vector<util::UniqueFd> held_;
  test::LoopbackServer server_;  // last: its thread adds to held_ until joined
};

util::UniqueFd tunnel(int proxy_port, int target_port) {
  auto c = test::connect_loopback(proxy_port);
  send_all(c.get(), "CONNECT 127.0.0.1:" + std::to_string(target_port) + " HTTP/1.1\r\n\r\n");
  const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
  REQUIRE(recv_n(c.get(), ok.size()) == ok);
  return c;
}

void reset(util::UniqueFd& fd) {
  linger l{1, 0};  // close sends RST
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  fd.reset();
}

}  // namespace

TEST_CASE("proxy loop: a client that half-closes, then resets, before a silent upstream: no spinning") {
  SilentServer silent;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(silent.port), "test"));
  Running proxy(rules);
  std::vector<util::UniqueFd> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(tunnel(proxy.http, silent.port));
    ::shutdown(clients.back().get(), SHUT_WR);
  }
  std::this_thread::sleep_for(50ms);  // the proxy sees the half-closes first
  for (auto& c : clients) reset(c);
  std::this_thread::sleep_for(100ms);
  auto before = proxy.turns.load();
  std::this_thread::sleep_for(500ms);
  auto turns = proxy.turns.load() - before;
  CAPTURE(turns);
  CHECK(turns < 200);  // idle: ~25 turns of 20 ms; the spin made thousands
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK(d[0].count == 8);
  CHECK(d[0].allowed);
}

TEST_CASE("proxy loop: each listener has its own budget; a full one makes room for a newcomer") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  netproxy::ProxyLimits limits;
  limits.connections_per_listener = 8;
  Running proxy(rules, limits);
  std::vector<util::UniqueFd> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(test::connect_loopback(proxy.http));  // no request: idle handshakes
  std::this_thread::sleep_for(100ms);
  auto c = tunnel(proxy.http, echo.port);  // the HTTP port: an idle one gave way
  send_all(c.get(), "ping");
  CHECK(recv_n(c.get(), 4) == "ping");
  auto s = test::connect_loopback(proxy.socks);  // the SOCKS port: untouched by the HTTP port's crowd
  send_all(s.get(), std::string{'\x05', '\x01', '\x00'});
  CHECK(recv_n(s.get(), 2) == std::string{'\x05', '\x00'});
  const auto& d = proxy.stop();
  bool made_room = false;
  for (const auto& e : d) made_room = made_room || e.reason.find("closed to make room") != std::string::npos;
  CHECK(made_room);
}

TEST_CASE("proxy loop: a relayed connection idle past the limit is closed and recorded") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  netproxy::ProxyLimits limits;
  limits.idle = 200ms;
  Running proxy(rules, limits);
  auto c = tunnel(proxy.http, echo.port);
  send_all(c.get(), "ping");
  CHECK(recv_n(c.get(), 4) == "ping");
  CHECK(recv_all(c.get()).empty());  // EOF (the socket's 10 s receive timeout is the guard)
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK(d[0].reason.find("without a byte either way") != std::string::npos);
}

TEST_CASE("proxy loop: a flood of refusals with huge names is aggregated and bounded") {
  netproxy::Rules rules;
  Running proxy(rules);
  for (int i = 0; i < 600; ++i) {
    auto c = test::connect_loopback(proxy.http);
    std::string host = std::to_string(i % 3) + std::string(16000, 'a');  // three distinct names
    send_all(c.get(), "CONNECT " + host + ":443 HTTP/1.1\r\n\r\n");
    std::string reply = recv_all(c.get());
    CHECK(reply.size() < 2048);  // the refusal does not echo the name back whole
  }
  const auto& d = proxy.stop();
  CHECK(d.size() <= 3);
  std::uint64_t total = 0;
  for (const auto& e : d) {
    total += e.count;
    CHECK(e.host.size() <= netproxy::kMaxJailText);
    CHECK(e.reason.size() <= netproxy::kMaxJailText);
    CHECK_FALSE(e.allowed);
  }
  CHECK(total == 600);
}

TEST_CASE("proxy loop: a client that resets mid-transfer does not kill the process (splice raises SIGPIPE)") {
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  Running proxy(rules);
  for (int i = 0; i < 5; ++i) {
    auto c = tunnel(proxy.http, echo.port);
    std::string chunk(1 << 20, 'z');
    for (int k = 0; k < 4; ++k) {
      // The echo comes back towards a client that does not read it.
      if (::send(c.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) <= 0) break;
    }
    reset(c);
  }
  std::this_thread::sleep_for(200ms);
  auto c = tunnel(proxy.http, echo.port);  // still serving: this process is alive
  send_all(c.get(), "ping");
  CHECK(recv_n(c.get(), 4) == "ping");
}

TEST_CASE("proxy loop: a published port relays through the socket the jail-socket maker gives, without a rule") {
  EchoServer echo;  // stands in for the server inside the jail
  int publish_port = 0;
  std::atomic<int> made{0};
  auto setup = [&](netproxy::Proxy& p) {
    p.set_jail_sockets([&](int family) {
      ++made;
      return ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    });
    netproxy::Rules::Forward target{*net::parse_ip("127.0.0.1"), echo.port, "127.0.0.1", "publish test"};
    REQUIRE(p.add_listener(test::listen_loopback(publish_port), netproxy::ListenerKind::publish, target).ok());
  };
  Running proxy(netproxy::Rules{}, {}, setup);  // no rule names the echo server
  auto c = test::connect_loopback(publish_port);
  send_all(c.get(), "ping");
  CHECK(recv_n(c.get(), 4) == "ping");
  c.reset();
  std::this_thread::sleep_for(100ms);
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK(d[0].allowed);
  CHECK(d[0].protocol == netproxy::Protocol::publish);
  CHECK(d[0].reason == "the operator's publish test");
  CHECK(made == 1);
}

TEST_CASE("proxy loop: a published port whose jail socket cannot be made is refused and recorded") {
  int publish_port = 0;
  auto setup = [&](netproxy::Proxy& p) {
    p.set_jail_sockets([](int) { return -EPERM; });
    netproxy::Rules::Forward target{*net::parse_ip("127.0.0.1"), 9, "127.0.0.1", "publish test"};
    REQUIRE(p.add_listener(test::listen_loopback(publish_port), netproxy::ListenerKind::publish, target).ok());
  };
  Running proxy(netproxy::Rules{}, {}, setup);
  auto c = test::connect_loopback(publish_port);
  CHECK(recv_all(c.get()).empty());  // closed without a byte
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 1);
  CHECK_FALSE(d[0].allowed);
  CHECK(d[0].reason == "cannot make a socket in the jail's network namespace: Operation not permitted");
}

namespace {

// An upstream HTTP proxy on loopback: each connection's CONNECT head goes
// to heads(); it answers `reply`, and after a 2xx echoes the tunnel's
// bytes as the destination would. One connection at a time.
class UpstreamStandIn {
public:
  explicit UpstreamStandIn(std::string reply = "HTTP/1.1 200 Connection established\r\n\r\n")
      : reply_(std::move(reply)) {
    port = server_.port;
    server_.start([this](int fd) {
      util::UniqueFd c(fd);
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
        if (n <= 0) return;
        head.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(m_);
        heads_ += head.substr(0, head.find("\r\n\r\n") + 4) + "--\n";
      }
      ++connections;
      std::string rest = head.substr(head.find("\r\n\r\n") + 4);
      if (::send(c.get(), reply_.data(), reply_.size(), MSG_NOSIGNAL) < 0 || reply_.find(" 200 ") == std::string::npos)
        return;
      if (!rest.empty()) (void)::send(c.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
      ssize_t n;
      while ((n = ::recv(c.get(), buf, sizeof buf, 0)) > 0)
        if (::send(c.get(), buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    });
  }
  std::string heads() {
    std::lock_guard<std::mutex> lock(m_);
    return heads_;
  }
  std::shared_ptr<const netproxy::UpstreamProxy> config(const std::string& userinfo = "", std::string no_proxy = "") {
    auto url = net::parse_proxy_url("http://" + userinfo + "127.0.0.1:" + std::to_string(port));
    REQUIRE(url.ok());
    return std::make_shared<const netproxy::UpstreamProxy>(
        netproxy::UpstreamProxy{*url, {*net::parse_ip("127.0.0.1")}, net::NoProxy::parse(no_proxy)});
  }
  int port = 0;
  std::atomic<int> connections{0};

private:
  std::string reply_;
  std::mutex m_;
  std::string heads_;
  test::LoopbackServer server_;
};

}  // namespace

TEST_CASE("proxy loop: through an upstream proxy, by name and unresolved: CONNECT with its credentials, relayed") {
  UpstreamStandIn upstream;
  netproxy::Rules rules;
  REQUIRE(rules.allow("api.pjtest.example", "test"));
  auto via = upstream.config("svc:p%40ss@");
  Running proxy(rules, {}, [&](netproxy::Proxy& p) { p.use_upstream_proxy(via); });
  const std::string auth = "Proxy-Authorization: Basic " + netproxy::http1::base64_encode("svc:p@ss") + "\r\n";
  {
    auto c = test::connect_loopback(proxy.http);
    send_all(c.get(), "CONNECT api.pjtest.example:443 HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
    CHECK(recv_n(c.get(), ok.size()) == ok);
    send_all(c.get(), "ping");
    CHECK(recv_n(c.get(), 4) == "ping");
  }
  {
    auto c = test::connect_loopback(proxy.http);  // absolute form: a tunnel to port 80, the head inside
    send_all(c.get(), "GET http://API.pjtest.example/x HTTP/1.1\r\nUser-Agent: t\r\n\r\n");
    CHECK(recv_n(c.get(), 4) == "GET ");
  }
  {
    auto c = test::connect_loopback(proxy.socks);  // SOCKS5 by name
    send_all(c.get(), std::string{'\x05', '\x01', '\x00'});
    CHECK(recv_n(c.get(), 2) == std::string{'\x05', '\x00'});
    const std::string name = "api.pjtest.example";
    std::string r{'\x05', '\x01', '\x00', '\x03', static_cast<char>(name.size())};
    r += name + std::string{'\x01', '\xbb'};
    send_all(c.get(), r);
    std::string reply = recv_n(c.get(), 10);
    REQUIRE(reply.size() == 10);
    CHECK(reply[1] == '\x00');
    send_all(c.get(), "pong");
    CHECK(recv_n(c.get(), 4) == "pong");
  }
  std::this_thread::sleep_for(100ms);
  const std::string heads = upstream.heads();
  CHECK(heads == "CONNECT api.pjtest.example:443 HTTP/1.1\r\nHost: api.pjtest.example:443\r\n" + auth + "\r\n--\n" +
                     "CONNECT api.pjtest.example:80 HTTP/1.1\r\nHost: api.pjtest.example:80\r\n" + auth + "\r\n--\n" +
                     "CONNECT api.pjtest.example:443 HTTP/1.1\r\nHost: api.pjtest.example:443\r\n" + auth + "\r\n--\n");
  const auto& d = proxy.stop();
  REQUIRE(d.size() == 3);
  for (const auto& e : d) {
    CHECK(e.allowed);
    CHECK(e.address == "127.0.0.1");
    CHECK(e.reason.find("; through the upstream proxy 127.0.0.1:" + std::to_string(upstream.port)) !=
          std::string::npos);
  }
}

TEST_CASE("proxy loop: with an upstream proxy, a refused host never reaches it; loopback and NO_PROXY go direct") {
  UpstreamStandIn upstream;
  EchoServer echo;
  netproxy::Rules rules;
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  REQUIRE(rules.allow("direct.pjtest.example", "test"));
  netproxy::ProxyLimits limits;
  limits.test_resolve.push_back({"direct.pjtest.example:443", {*net::parse_ip("127.0.0.1"), echo.port}});
  auto via = upstream.config("", "direct.pjtest.example");
  Running proxy(rules, limits, [&](netproxy::Proxy& p) { p.use_upstream_proxy(via); });
  auto status_of = [&](const std::string& target) {
    auto c = test::connect_loopback(proxy.http);
    send_all(c.get(), "CONNECT " + target + " HTTP/1.1\r\n\r\n");
    std::string line = recv_n(c.get(), 12);
    if (line == "HTTP/1.1 200") {
      recv_n(c.get(), std::string(" Connection established\r\n\r\n").size());
      send_all(c.get(), "ping");
      line += recv_n(c.get(), 4);
    }
    return line;
  };
  CHECK(status_of("refused.pjtest.example:443") == "HTTP/1.1 403");
  CHECK(status_of("10.0.0.1:443") == "HTTP/1.1 403");  // a literal the rules refuse: never sent on either
  CHECK(status_of("127.0.0.1:" + std::to_string(echo.port)) == "HTTP/1.1 200ping");
  CHECK(status_of("direct.pjtest.example:443") == "HTTP/1.1 200ping");
  CHECK(upstream.connections == 0);
  const auto& d = proxy.stop();
  for (const auto& e : d) CHECK(e.reason.find("upstream proxy") == std::string::npos);
}

// The proxy is never a destination, whatever the rules allow: a
// connection of the jail's own to it would carry CONNECTs that no rule
// checks.
TEST_CASE("proxy loop: the upstream proxy itself is refused as a destination, by its name or an address of it") {
  UpstreamStandIn upstream;
  EchoServer echo;
  const std::string port = std::to_string(upstream.port);
  netproxy::Rules rules;
  for (const std::string host : {"127.0.0.1", "localhost", "proxy.pjtest.example", "alias.pjtest.example"})
    REQUIRE(rules.allow(host + ":" + port, "test"));
  REQUIRE(rules.allow("127.0.0.1:" + std::to_string(echo.port), "test"));
  netproxy::ProxyLimits limits;
  limits.idle = 500ms;  // a tunnel that did open ends soon (the case fails then, never hangs)
  // A name reached directly (NO_PROXY) that resolves to the proxy.
  limits.test_resolve.push_back({"alias.pjtest.example:" + port, {*net::parse_ip("127.0.0.1"), upstream.port}});
  // The proxy by name, as an operator would write it.
  auto url = net::parse_proxy_url("http://proxy.pjtest.example:" + port);
  REQUIRE(url.ok());
  auto via = std::make_shared<const netproxy::UpstreamProxy>(
      netproxy::UpstreamProxy{*url, {*net::parse_ip("127.0.0.1")}, net::NoProxy::parse("alias.pjtest.example")});
  Running proxy(rules, limits, [&](netproxy::Proxy& p) { p.use_upstream_proxy(via); });
  auto connect = [&](const std::string& target) {
    auto c = test::connect_loopback(proxy.http);
    send_all(c.get(), "CONNECT " + target + " HTTP/1.1\r\n\r\n");
    return recv_all(c.get());
  };
  for (const std::string host : {"proxy.pjtest.example", "PROXY.pjtest.example.", "127.0.0.1", "localhost",
                                 "alias.pjtest.example", "[::ffff:127.0.0.1]"}) {
    const std::string reply = connect(host + ":" + port);
    CAPTURE(host);
    CAPTURE(reply);
    CHECK(reply.starts_with("HTTP/1.1 403 "));
    CHECK(reply.find(" is the upstream proxy: never a destination") != std::string::npos);
  }
  {
    auto c = test::connect_loopback(proxy.http);  // absolute form
    send_all(c.get(), "GET http://127.0.0.1:" + port + "/ HTTP/1.1\r\n\r\n");
    CHECK(recv_all(c.get()).starts_with("HTTP/1.1 403 "));
  }
  {
    auto c = test::connect_loopback(proxy.socks);  // SOCKS5 by address
    send_all(c.get(), std::string{'\x05', '\x01', '\x00'});
    CHECK(recv_n(c.get(), 2) == std::string{'\x05', '\x00'});
    std::string r{'\x05', '\x01', '\x00', '\x01', '\x7f', '\x00', '\x00', '\x01'};
    r += static_cast<char>(upstream.port >> 8);
    r += static_cast<char>(upstream.port & 0xff);
    send_all(c.get(), r);
    const std::string reply = recv_all(c.get());
    REQUIRE(reply.size() >= 2);
    CHECK(reply[1] == '\x02');  // not allowed by the ruleset
  }
  // Another port of the same address is not the proxy.
  CHECK(connect("127.0.0.1:" + std::to_string(echo.port)).starts_with("HTTP/1.1 200 "));
  CHECK(upstream.connections == 0);
  const auto& d = proxy.stop();
  size_t refused = 0;
  for (const auto& e : d)
    if (!e.allowed) {
      ++refused;
      CHECK(e.reason.find("is the upstream proxy proxy.pjtest.example:" + port) != std::string::npos);
      CHECK_FALSE(e.rule_refusal);  // no allow rule would let it through
    }
  CHECK(refused >= 6);
}

TEST_CASE("proxy loop: an upstream proxy's refusal is the jail's 502 naming its status; a silent one times out") {
  netproxy::Rules rules;
  REQUIRE(rules.allow("api.pjtest.example", "test"));
  {
    UpstreamStandIn upstream("HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n");
    auto via = upstream.config("svc:wrong@");
    Running proxy(rules, {}, [&](netproxy::Proxy& p) { p.use_upstream_proxy(via); });
    auto c = test::connect_loopback(proxy.http);
    send_all(c.get(), "CONNECT api.pjtest.example:443 HTTP/1.1\r\n\r\n");
    std::string reply = recv_all(c.get());
    CAPTURE(reply);
    CHECK(reply.starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
    CHECK(reply.find("refused the tunnel to api.pjtest.example:443: HTTP/1.1 407 Proxy Authentication Required") !=
          std::string::npos);
    CHECK(reply.find("wrong") == std::string::npos);
    const auto& d = proxy.stop();
    REQUIRE(d.size() == 1);
    CHECK_FALSE(d[0].allowed);
  }
  {
    int port = 0;
    auto silent = test::listen_loopback(port);  // accepts (backlog), never answers
    auto url = net::parse_proxy_url("http://127.0.0.1:" + std::to_string(port));
    REQUIRE(url.ok());
    auto via = std::make_shared<const netproxy::UpstreamProxy>(
        netproxy::UpstreamProxy{*url, {*net::parse_ip("127.0.0.1")}, {}});
    netproxy::ProxyLimits limits;
    limits.handshake = 200ms;
    Running proxy(rules, limits, [&](netproxy::Proxy& p) { p.use_upstream_proxy(via); });
    auto c = test::connect_loopback(proxy.http);
    send_all(c.get(), "CONNECT api.pjtest.example:443 HTTP/1.1\r\n\r\n");
    std::string reply = recv_all(c.get());
    CAPTURE(reply);
    CHECK(reply.starts_with("HTTP/1.1 504"));
    CHECK(reply.find("did not open the tunnel to api.pjtest.example:443 in time") != std::string::npos);
  }
}

TEST_CASE("proxy loop: a removed listener's port is closed at once, and a connection it accepted goes on") {
  EchoServer echo;  // stands in for the server inside the jail
  auto made = netproxy::Proxy::start(netproxy::Rules{}, -1);
  REQUIRE(made.ok());
  netproxy::Proxy& p = **made;
  p.set_jail_sockets([](int family) { return ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0); });
  int port = 0;
  util::UniqueFd listener = test::listen_loopback(port);
  const int raw = listener.get();
  netproxy::Rules::Forward target{*net::parse_ip("127.0.0.1"), echo.port, "127.0.0.1", "login callback test"};
  REQUIRE(p.add_listener(std::move(listener), netproxy::ListenerKind::publish, target).ok());
  // The loop on this thread: turns until `c` got `n` bytes (a guard of
  // 10 s, not a timing assertion).
  auto echoed = [&p](int c, size_t n) {
    std::string got;
    for (int i = 0; i < 1000 && got.size() < n; ++i) {
      p.run_for(10ms);
      char buf[64];
      ssize_t r = ::recv(c, buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) got.append(buf, static_cast<size_t>(r));
    }
    return got;
  };
  auto c = test::connect_loopback(port);
  send_all(c.get(), "ping");
  CHECK(echoed(c.get(), 4) == "ping");

  REQUIRE(p.remove_listener(raw).ok());
  // Nothing listens on the port any more: a new client is refused by the
  // kernel.
  util::UniqueFd again(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  CHECK(::connect(again.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
  CHECK(errno == ECONNREFUSED);
  // The connection accepted before goes on.
  send_all(c.get(), "pong");
  CHECK(echoed(c.get(), 4) == "pong");
  // A listener it does not serve.
  auto twice = p.remove_listener(raw);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message() == "no listener of the network filter has descriptor " + std::to_string(raw));
  CHECK_FALSE(p.remove_listener(-1).ok());
  p.shutdown();
}

TEST_CASE("proxy loop: run_for wakes for the owner's fd given to wake_on, and says so") {
  auto made = netproxy::Proxy::start(netproxy::Rules{}, -1);
  REQUIRE(made.ok());
  netproxy::Proxy& p = **made;
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  util::UniqueFd mine(fds[0]), theirs(fds[1]);
  p.wake_on(mine.get());
  CHECK_FALSE(p.run_for(0ms));
  send_all(theirs.get(), "x");
  // A guard of 10 s, not a timing assertion: the wait ends when the byte is there.
  const auto start = std::chrono::steady_clock::now();
  CHECK(p.run_for(10s));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(p.run_for(0ms));  // level-triggered: until the owner reads it
  char c;
  REQUIRE(::recv(mine.get(), &c, 1, 0) == 1);
  CHECK_FALSE(p.run_for(0ms));
  theirs.reset();  // a hang-up wakes it too
  CHECK(p.run_for(10s));
}
