// The upstream HTTP proxy: its URL and NO_PROXY list as the policy and
// the filter read them (net/proxy_url.h), and the tunnel's opening on a
// socket, the proxy's reply read as hostile input (netproxy/upstream.h).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "net/proxy_url.h"
#include "netproxy/http1.h"
#include "netproxy/upstream.h"
#include "util/unique_fd.h"

using namespace pj;
using namespace std::chrono_literals;

namespace {

std::string url_error(std::string_view text) {
  auto u = net::parse_proxy_url(text);
  REQUIRE_FALSE(u.ok());
  return u.error().what();
}

// A connected pair: [0] the filter's end (non-blocking), [1] the proxy's.
struct Pair {
  util::UniqueFd filter, proxy;
  Pair() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    filter.reset(sv[0]);
    proxy.reset(sv[1]);
    REQUIRE(::fcntl(filter.get(), F_SETFL, O_NONBLOCK) == 0);
  }
  std::string read_request() {
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(proxy.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  void answer(std::string_view bytes) {
    REQUIRE(::send(proxy.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
};

netproxy::UpstreamProxy proxy_with(std::string_view url) {
  auto u = net::parse_proxy_url(url);
  REQUIRE(u.ok());
  return netproxy::UpstreamProxy{*u, {*net::parse_ip("127.0.0.1")}, {}};
}

// Steps until the opener stops waiting to write: what it sent is then
// readable at the proxy's end.
netproxy::TunnelOpener::Step step_past_write(netproxy::TunnelOpener& t, int fd) {
  auto s = t.step(fd);
  while (s == netproxy::TunnelOpener::Step::want_write) s = t.step(fd);
  return s;
}

}  // namespace

TEST_CASE("upstream proxy URL: http://[user:pass@]host:port, credentials decoded, never in an error") {
  auto u = net::parse_proxy_url("HTTP://Alice:p%40ss%3Aw0rd@Proxy.Corp.:3128/");
  REQUIRE(u.ok());
  CHECK(u->host == "proxy.corp");
  CHECK(u->port == 3128);
  CHECK(u->user == "Alice");
  CHECK(u->password == "p@ss:w0rd");
  CHECK(u->redacted() == "http://Alice:***@proxy.corp:3128");
  auto v6 = net::parse_proxy_url("http://[fd00::1]:8080");
  REQUIRE(v6.ok());
  CHECK(v6->authority() == "[fd00::1]:8080");
  CHECK_FALSE(v6->user);
  CHECK(v6->redacted() == "http://[fd00::1]:8080");

  CHECK(url_error("proxy.corp:3128").find("not a URL") != std::string::npos);
  CHECK(url_error("https://proxy.corp:3128").find("must be http://") != std::string::npos);
  CHECK(url_error("socks5://proxy.corp:1080").find("must be http://") != std::string::npos);
  CHECK(url_error("http://proxy.corp").find("no port") != std::string::npos);
  CHECK(url_error("http://proxy.corp:0").find("1 to 65535") != std::string::npos);
  CHECK(url_error("http://proxy.corp:65536").find("1 to 65535") != std::string::npos);
  CHECK(url_error("http://proxy.corp:31x8").find("1 to 65535") != std::string::npos);
  CHECK(url_error("http://proxy.corp:3128/path").find("path") != std::string::npos);
  CHECK(url_error("http://pro xy:3128").find("not a name") != std::string::npos);
  CHECK(url_error("").find("empty") != std::string::npos);
  CHECK(url_error("http://u:%zz@proxy.corp:3128").find("'%'") != std::string::npos);
  CHECK(url_error("http://u:a%0Ab@proxy.corp:3128").find("control character") != std::string::npos);
  for (const char* bad : {"http://alice:S3cret@proxy.corp", "http://alice:S3cret@proxy.corp:99999",
                          "http://alice:S3cret@proxy.corp:1/x"}) {
    CAPTURE(bad);
    CHECK(url_error(bad).find("S3cret") == std::string::npos);
    CHECK(net::redact_userinfo(bad).find("S3cret") == std::string::npos);
    CHECK(net::redact_userinfo(bad).find("alice:***@proxy.corp") != std::string::npos);
  }
  CHECK(net::redact_userinfo("http://proxy.corp:3128") == "http://proxy.corp:3128");
}

TEST_CASE("NO_PROXY: names with their subdomains, literals, ranges, ports; the rest ignored") {
  auto np = net::NoProxy::parse(
      " corp.example , .internal.test,*.svc.local, 10.0.0.0/8,192.0.2.7, ::1, [fd00::7]:8443,"
      "build.example:8080, <local>, 10.*, fd00::/129");
  CHECK(np.matches("corp.example", 443));
  CHECK(np.matches("git.corp.example", 443));
  CHECK_FALSE(np.matches("notcorp.example", 443));
  CHECK(np.matches("internal.test", 443));
  CHECK(np.matches("a.b.internal.test", 80));
  CHECK(np.matches("x.svc.local", 443));
  CHECK(np.matches("10.1.2.3", 443));
  CHECK_FALSE(np.matches("11.1.2.3", 443));
  CHECK(np.matches("192.0.2.7", 22));
  CHECK(np.matches("::1", 443));
  CHECK(np.matches("fd00::7", 8443));
  CHECK_FALSE(np.matches("fd00::7", 443));
  CHECK(np.matches("build.example", 8080));
  CHECK_FALSE(np.matches("build.example", 443));
  CHECK_FALSE(np.matches("api.anthropic.com", 443));
  // A name never matches a range: the proxy, not the filter, resolves it.
  CHECK_FALSE(np.matches("ten.example", 443));
  CHECK(np.ignored() == std::vector<std::string>{"<local>", "10.*", "fd00::/129"});
  CHECK(np.str() ==
        "corp.example,internal.test,svc.local,10.0.0.0/8,192.0.2.7,[::1],[fd00::7]:8443,build.example:8080");
  CHECK(net::NoProxy::parse(np.str()).str() == np.str());
  CHECK(net::NoProxy::parse("*").matches("anything.example", 1));
  CHECK(net::NoProxy::parse("").empty());
}

TEST_CASE("upstream proxy: loopback and NO_PROXY destinations go out directly, the rest through it") {
  auto p = proxy_with("http://proxy.corp:3128");
  p.no_proxy = net::NoProxy::parse("corp.example");
  CHECK(p.applies("api.anthropic.com", 443));
  CHECK(p.applies("10.0.0.5", 443));
  CHECK_FALSE(p.applies("localhost", 8080));
  CHECK_FALSE(p.applies("127.0.0.1", 11434));
  CHECK_FALSE(p.applies("::1", 11434));
  CHECK_FALSE(p.applies("git.corp.example", 443));
}

TEST_CASE("upstream proxy: itself is its name or an address of it at its port, nothing else") {
  auto p = proxy_with("http://proxy.corp:3128");
  p.addrs = {*net::parse_ip("10.0.0.5"), *net::parse_ip("fd00::5")};
  CHECK(p.is_itself("proxy.corp", 3128));
  CHECK(p.is_itself("10.0.0.5", 3128));
  CHECK(p.is_itself("fd00::5", 3128));
  CHECK(p.is_itself(*net::parse_ip("10.0.0.5"), 3128));
  CHECK(p.is_itself(*net::parse_ip("::ffff:10.0.0.5"), 3128));  // unwrapped to 10.0.0.5 when parsed
  CHECK_FALSE(p.is_itself("proxy.corp", 443));
  CHECK_FALSE(p.is_itself("10.0.0.5", 443));
  CHECK_FALSE(p.is_itself(*net::parse_ip("10.0.0.6"), 3128));
  CHECK_FALSE(p.is_itself("other.corp", 3128));
  CHECK_FALSE(p.is_itself("sub.proxy.corp", 3128));
}

TEST_CASE("tunnel: CONNECT with Host and Basic credentials; a 2xx opens it and leaves the server's bytes") {
  Pair pair;
  netproxy::TunnelOpener t(proxy_with("http://alice:p%40ss@127.0.0.1:3128"), "api.example.com", 443);
  CHECK(step_past_write(t, pair.filter.get()) == netproxy::TunnelOpener::Step::want_read);
  const std::string req = pair.read_request();
  CHECK(req == "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic " +
                   netproxy::http1::base64_encode("alice:p@ss") + "\r\n\r\n");
  // The reply in pieces, the server's first bytes right behind it (an
  // SSH banner, say): they are the relay's, never taken by the opener.
  pair.answer("HTTP/1.1 200 Connection est");
  CHECK(t.step(pair.filter.get()) == netproxy::TunnelOpener::Step::want_read);
  pair.answer("ablished\r\nContent-Length: 5\r\n\r\nSSH-2.0-x\r\n");
  CHECK(t.step(pair.filter.get()) == netproxy::TunnelOpener::Step::open);
  char buf[64];
  ssize_t n = ::recv(pair.filter.get(), buf, sizeof buf, 0);
  CHECK(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) == "SSH-2.0-x\r\n");

  Pair v6;
  netproxy::TunnelOpener plain(proxy_with("http://127.0.0.1:3128"), "2001:db8::1", 8443);
  CHECK(step_past_write(plain, v6.filter.get()) == netproxy::TunnelOpener::Step::want_read);
  CHECK(v6.read_request() == "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n");
}

TEST_CASE("tunnel: a refusal names the proxy's status, escaped; garbage, an oversized head, a close fail it") {
  using Step = netproxy::TunnelOpener::Step;
  auto proxy = proxy_with("http://alice:secret@127.0.0.1:3128");
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    // Remote text: an 8-bit CSI and a stray byte (the head parser takes
    // them; it refuses C0 controls) come out escaped.
    pair.answer(
        "HTTP/1.1 407 Proxy Authentication Required \xc2\x9b"
        "31m\xff\r\nProxy-Authenticate: Basic\r\n\r\n");
    CHECK(t.step(pair.filter.get()) == Step::failed);
    CAPTURE(t.error());
    CHECK(t.error().find("the upstream proxy 127.0.0.1:3128 refused the tunnel to api.example.com:443: HTTP/1.1 407 "
                         "Proxy Authentication Required \\u009b31m\\xff") != std::string::npos);
    CHECK(t.error().find("secret") == std::string::npos);
  }
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    pair.answer("HTTP/1.1 403 Forbidden\x1b[2J\r\n\r\n");
    CHECK(t.step(pair.filter.get()) == Step::failed);
    CHECK(t.error().find("malformed reply: control character") != std::string::npos);
  }
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    pair.answer("SSH-2.0-OpenSSH\r\n\r\n");
    CHECK(t.step(pair.filter.get()) == Step::failed);
    CHECK(t.error().find("malformed status line") != std::string::npos);
  }
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    pair.answer("HTTP/1.1 200 OK\r\nBad Field\r\n\r\n");
    CHECK(t.step(pair.filter.get()) == Step::failed);
    CHECK(t.error().find("malformed reply") != std::string::npos);
  }
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    std::thread flood([&] {
      std::string big = "HTTP/1.1 200 OK\r\nX: " + std::string(netproxy::kMaxProxyReply * 2, 'a');
      (void)::send(pair.proxy.get(), big.data(), big.size(), MSG_NOSIGNAL);
    });
    Step s = Step::want_read;
    for (int i = 0; i < 1000 && s == Step::want_read; ++i) {
      s = t.step(pair.filter.get());
      if (s == Step::want_read) std::this_thread::sleep_for(1ms);
    }
    CHECK(s == Step::failed);
    CHECK(t.error().find("larger than") != std::string::npos);
    pair.filter.reset();  // the flood's send ends
    flood.join();
  }
  {
    Pair pair;
    netproxy::TunnelOpener t(proxy, "api.example.com", 443);
    step_past_write(t, pair.filter.get());
    pair.read_request();
    pair.proxy.reset();
    CHECK(t.step(pair.filter.get()) == Step::failed);
    CHECK(t.error().find("closed the connection before it answered") != std::string::npos);
  }
}

TEST_CASE("tunnel, blocking: a 2xx opens it; a slow proxy is given up at the timeout; a stop ends the wait") {
  auto proxy = proxy_with("http://127.0.0.1:3128");
  {
    Pair pair;
    std::thread answer([&] {
      pair.read_request();
      pair.answer("HTTP/1.0 200 Connection established\r\n\r\n");
    });
    std::string why;
    CHECK(netproxy::open_tunnel(pair.filter.get(), proxy, "api.example.com", 443, -1, 10s, why));
    CHECK(why.empty());
    answer.join();
  }
  {
    Pair pair;
    std::string why;
    pair.answer("HTTP/1.1 200");  // and nothing more
    CHECK_FALSE(netproxy::open_tunnel(pair.filter.get(), proxy, "api.example.com", 443, -1, 50ms, why));
    CHECK(why == "the upstream proxy 127.0.0.1:3128 did not open the tunnel within 50 ms");
  }
  {
    Pair pair;
    int stop[2];
    REQUIRE(::pipe(stop) == 0);
    util::UniqueFd stop_r(stop[0]), stop_w(stop[1]);
    REQUIRE(::write(stop_w.get(), "x", 1) == 1);
    std::string why;
    CHECK_FALSE(netproxy::open_tunnel(pair.filter.get(), proxy, "api.example.com", 443, stop_r.get(), 10s, why));
    CHECK(why == "stopped");
  }
}
