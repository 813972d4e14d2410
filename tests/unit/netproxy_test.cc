// The network filter's pure parts: rules, address ranges, protocol parsers.
#include <doctest/doctest.h>

#include <string>

#include "netproxy/protocol.h"
#include "netproxy/rules.h"

using namespace pj::netproxy;

namespace {

Rules rules() {
  Rules r;
  r.allow("api.openai.com", "t:1");
  r.allow("*.anthropic.com", "t:2");
  r.allow("registry.npmjs.org:8443", "t:3");
  r.allow("10.1.2.3:5432", "t:4");
  r.allow("[2001:db8::5]:443", "t:5");
  r.allow("127.0.0.1:11434", "t:6");
  r.allow("internal.corp", "t:7");
  r.deny("evil.anthropic.com", "t:8");
  return r;
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += static_cast<char>(x);
  return s;
}

}  // namespace

TEST_CASE("rule matching: names, wildcards, ports, case, trailing dots, deny") {
  struct Case {
    const char* host;
    int port;
    bool allowed;
  } cases[] = {
      {"api.openai.com", 443, true},        {"API.OpenAI.com.", 443, true},   {"api.openai.com", 80, true},
      {"api.openai.com", 8080, false},      {"openai.com", 443, false},       {"xapi.openai.com", 443, false},
      {"api.openai.com.evil", 443, false},  {"x.anthropic.com", 443, true},   {"a.b.anthropic.com", 443, true},
      {"anthropic.com", 443, false},        {"xanthropic.com", 443, false},   {"evil.anthropic.com", 443, false},
      {"EVIL.anthropic.com.", 443, false},  {"registry.npmjs.org", 8443, true}, {"registry.npmjs.org", 443, false},
      {"10.1.2.3", 5432, true},             {"012.1.2.3", 5432, true},        {"0xa.1.2.3", 5432, true},
      {"10.66051", 5432, true},             {"167838211", 5432, true},        {"10.1.2.3", 5433, false},
      {"::ffff:10.1.2.3", 5432, true},      {"[::ffff:a01:203]", 5432, true}, {"2001:db8::5", 443, true},
      {"[2001:DB8:0::5]", 443, true},       {"127.0.0.1", 11434, true},       {"127.1", 11434, true},
      {"2130706433", 11434, true},          {"localhost", 11434, false},      {"bad host", 443, false},
      {"api.openai.com", 0, false},         {"api.openai.com", 70000, false},
  };
  Rules r = rules();
  for (const auto& c : cases) {
    CAPTURE(c.host);
    CAPTURE(c.port);
    CHECK(r.check(c.host, c.port).allowed == c.allowed);
  }
  CHECK(r.check("evil.anthropic.com", 443).reason.find("denied by evil.anthropic.com (t:8)") != std::string::npos);
  CHECK(r.check("x.anthropic.com", 443).reason == "allowed by *.anthropic.com (t:2)");
  CHECK(r.check("nope.example", 443).reason == "no rule allows nope.example:443");
}

TEST_CASE("IP literals are canonicalised in every notation resolvers accept") {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"},       {"2130706433", "127.0.0.1"},
      {"0x7f000001", "127.0.0.1"}, {"0177.0.0.1", "127.0.0.1"}, {"0x7f.1", "127.0.0.1"},
      {"::1", "::1"},             {"[::1]", "::1"},             {"::ffff:127.0.0.1", "127.0.0.1"},
      {"0:0:0:0:0:ffff:7f00:1", "127.0.0.1"}, {"169.254.169.254", "169.254.169.254"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto ip = parse_ip(c.in);
    REQUIRE(ip);
    CHECK(ip->str() == c.out);
  }
  for (const char* name : {"example.com", "deadbeef", "1.2.3.4.5", "256.1.1.1x", "", "1e100"}) {
    CAPTURE(name);
    CHECK_FALSE(parse_ip(name));
  }
}

TEST_CASE("special ranges are refused unless a rule names the host exactly") {
  struct Case {
    const char* addr;
    bool special;
  } cases[] = {
      {"127.0.0.1", true},     {"127.255.0.9", true}, {"10.0.0.1", true},   {"172.16.5.4", true},
      {"172.32.0.1", false},   {"192.168.1.1", true}, {"100.64.0.1", true}, {"169.254.169.254", true},
      {"0.0.0.0", true},       {"224.0.0.1", true},   {"255.255.255.255", true}, {"8.8.8.8", false},
      {"::1", true},           {"::", true},          {"fd00::1", true},    {"fe80::1", true},
      {"ff02::1", true},       {"::ffff:10.0.0.1", true}, {"64:ff9b::a00:1", true}, {"2002:a00:1::", true},
      {"2606:4700::1", false}, {"64:ff9b::808:808", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.addr);
    auto ip = parse_ip(c.addr);
    REQUIRE(ip);
    CHECK((special_range(*ip) != nullptr) == c.special);
  }
  Rules r = rules();
  Verdict wild = r.check("x.anthropic.com", 443);
  CHECK_FALSE(r.check_address(wild, "x.anthropic.com", *parse_ip("169.254.169.254")).allowed);
  CHECK_FALSE(r.check_address(wild, "x.anthropic.com", *parse_ip("::ffff:10.0.0.1")).allowed);
  CHECK(r.check_address(wild, "x.anthropic.com", *parse_ip("93.184.216.34")).allowed);
  Verdict exact = r.check("internal.corp", 443);
  CHECK(exact.explicit_host);
  CHECK(r.check_address(exact, "internal.corp", *parse_ip("10.9.9.9")).allowed);
}

TEST_CASE("forwards: loopback rules with a port") {
  Rules r;
  r.allow("127.0.0.1:11434", "a");
  r.allow("localhost:8080", "b");
  r.allow("[::1]:9000", "c");
  r.allow("127.0.0.1", "no port: not forwarded");
  r.allow("example.com:8080", "not loopback");
  auto f = r.forwards();
  REQUIRE(f.size() == 4);
  CHECK(f[0].addr.str() == "127.0.0.1");
  CHECK(f[0].port == 11434);
  CHECK(f[1].addr.str() == "127.0.0.1");
  CHECK(f[2].addr.str() == "::1");
  CHECK(f[3].addr.str() == "::1");
  CHECK(f[3].port == 9000);
}

TEST_CASE("HTTP proxy requests: CONNECT and absolute form") {
  auto c = parse_http_request("CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\nextra");
  REQUIRE(c.progress == Progress::done);
  CHECK(c.tunnel);
  CHECK(c.target.host == "api.openai.com");
  CHECK(c.target.port == 443);
  CHECK(c.consumed == std::string("CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n").size());

  auto v6 = parse_http_request("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n");
  REQUIRE(v6.progress == Progress::done);
  CHECK(v6.target.host == "[::1]");
  CHECK(v6.target.port == 8080);

  auto a = parse_http_request(
      "GET http://Example.com/a/b?q=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: secret\r\n"
      "Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n");
  REQUIRE(a.progress == Progress::done);
  CHECK_FALSE(a.tunnel);
  CHECK(a.target.host == "Example.com");
  CHECK(a.target.port == 80);
  CHECK(a.upstream == "GET /a/b?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n");

  auto port = parse_http_request("POST http://h.example:8080 HTTP/1.0\r\n\r\n");
  REQUIRE(port.progress == Progress::done);
  CHECK(port.target.port == 8080);
  CHECK(port.upstream == "POST / HTTP/1.0\r\nHost: h.example:8080\r\nConnection: close\r\n\r\n");

  CHECK(parse_http_request("CONNECT a.b:443 HTTP/1.1\r\nHost: a").progress == Progress::need_more);
}

TEST_CASE("malformed HTTP proxy requests are refused with a status, never a crash") {
  struct Case {
    std::string req;
    int status;
  } cases[] = {
      {"GET /path HTTP/1.1\r\n\r\n", 400},                      // origin form: not a proxy request
      {"GET https://a.example/ HTTP/1.1\r\n\r\n", 400},         // TLS is for CONNECT
      {"CONNECT a.example HTTP/1.1\r\n\r\n", 400},               // no port
      {"CONNECT a.example:0 HTTP/1.1\r\n\r\n", 400},
      {"CONNECT a.example:99999 HTTP/1.1\r\n\r\n", 400},
      {"CONNECT user@a.example:443 HTTP/1.1\r\n\r\n", 400},
      {"CONNECT a.example:443 HTTP/2\r\n\r\n", 505},
      {"connect a.example:443 HTTP/1.1\r\n\r\n", 400},
      {"GARBAGE\r\n\r\n", 400},
      {"CONNECT a.example:443 HTTP/1.1\r\n folded: header\r\n\r\n", 400},
      {"CONNECT a.example:443 HTTP/1.1\r\nNoColon\r\n\r\n", 400},
      {"CONNECT a.example:443 HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n", 431},
      {std::string(kMaxHttpHead + 10, 'A'), 431},
      {"GET http://[::1 HTTP/1.1\r\n\r\n", 400},
      {std::string("CONNECT a\0b:443 HTTP/1.1\r\n\r\n", 29), 400},
  };
  for (const auto& c : cases) {
    CAPTURE(c.req.substr(0, 60));
    auto r = parse_http_request(c.req);
    CHECK(r.progress == Progress::bad);
    CHECK(r.status == c.status);
  }
}

TEST_CASE("SOCKS5: greeting and CONNECT with every address type; BIND and UDP refused") {
  auto g = parse_socks_greeting(bytes({5, 2, 2, 0}));
  REQUIRE(g.progress == Progress::done);
  CHECK(g.no_auth_offered);
  CHECK(g.consumed == 4);
  CHECK_FALSE(parse_socks_greeting(bytes({5, 1, 2})).no_auth_offered);
  CHECK(parse_socks_greeting(bytes({4, 1, 0})).progress == Progress::bad);
  CHECK(parse_socks_greeting(bytes({5, 3, 0})).progress == Progress::need_more);

  auto v4 = parse_socks_request(bytes({5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90}));
  REQUIRE(v4.progress == Progress::done);
  CHECK(v4.target.host == "127.0.0.1");
  CHECK(v4.target.port == 8080);
  auto name = parse_socks_request(bytes({5, 1, 0, 3, 7, 'a', '.', 'e', 'x', 'a', 'm', 'p', 1, 0xbb}));
  REQUIRE(name.progress == Progress::done);
  CHECK(name.target.host == "a.examp");
  CHECK(name.target.port == 443);
  auto v6 = parse_socks_request(bytes({5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80}));
  REQUIRE(v6.progress == Progress::done);
  CHECK(v6.target.host == "[::1]");

  auto bind = parse_socks_request(bytes({5, 2, 0, 1, 1, 2, 3, 4, 0, 80}));
  CHECK(bind.progress == Progress::bad);
  CHECK(bind.reply == SocksReply::command_not_supported);
  auto udp = parse_socks_request(bytes({5, 3, 0, 1, 1, 2, 3, 4, 0, 80}));
  CHECK(udp.reply == SocksReply::command_not_supported);
  CHECK(parse_socks_request(bytes({5, 1, 0, 9, 1})).reply == SocksReply::address_type_not_supported);
  CHECK(parse_socks_request(bytes({5, 1, 0, 3, 0, 0, 80})).progress == Progress::bad);
  CHECK(parse_socks_request(bytes({5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80})).progress == Progress::bad);
  CHECK(parse_socks_request(bytes({5, 1, 0, 1, 1, 2, 3, 4, 0, 0})).progress == Progress::bad);
  CHECK(parse_socks_request(bytes({5, 1, 0, 3, 200, 'a'})).progress == Progress::need_more);
  CHECK(socks_reply(SocksReply::not_allowed) == bytes({5, 2, 0, 1, 0, 0, 0, 0, 0, 0}));
}
