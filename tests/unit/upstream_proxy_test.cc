// The upstream HTTP proxy: its URL and NO_PROXY list as the policy and
// the filter read them (net/proxy_url.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "net/proxy_url.h"

using namespace pj;

namespace {

std::string url_error(std::string_view text) {
  auto u = net::parse_proxy_url(text);
  REQUIRE_FALSE(u.ok());
  return u.error().what();
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
