// The network filter's pure parts: rules, address ranges, protocol parsers.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "netproxy/protocol.h"
#include "netproxy/rules.h"

using namespace pj::net;
using namespace pj::netproxy;
using namespace std::string_literals;

namespace {

Rules rules() {
  Rules r;
  REQUIRE(r.allow("api.openai.com", "t:1"));
  REQUIRE(r.allow("*.anthropic.com", "t:2"));
  REQUIRE(r.allow("registry.npmjs.org:8443", "t:3"));
  REQUIRE(r.allow("10.1.2.3:5432", "t:4"));
  REQUIRE(r.allow("[2001:db8::5]:443", "t:5"));
  REQUIRE(r.allow("127.0.0.1:11434", "t:6"));
  REQUIRE(r.allow("internal.corp", "t:7"));
  REQUIRE(r.deny("evil.anthropic.com", "t:8"));
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
      {"api.openai.com", 443, true},
      {"API.OpenAI.com.", 443, true},
      {"api.openai.com", 80, true},
      {"api.openai.com", 8080, false},
      {"openai.com", 443, false},
      {"xapi.openai.com", 443, false},
      {"api.openai.com.evil", 443, false},
      {"x.anthropic.com", 443, true},
      {"a.b.anthropic.com", 443, true},
      {"anthropic.com", 443, false},
      {"xanthropic.com", 443, false},
      {"evil.anthropic.com", 443, false},
      {"EVIL.anthropic.com.", 443, false},
      {"registry.npmjs.org", 8443, true},
      {"registry.npmjs.org", 443, false},
      {"10.1.2.3", 5432, true},
      {"012.1.2.3", 5432, true},
      {"0xa.1.2.3", 5432, true},
      {"10.66051", 5432, true},
      {"167838211", 5432, true},
      {"10.1.2.3", 5433, false},
      {"::ffff:10.1.2.3", 5432, true},
      {"[::ffff:a01:203]", 5432, true},
      {"2001:db8::5", 443, true},
      {"[2001:DB8:0::5]", 443, true},
      {"127.0.0.1", 11434, true},
      {"127.1", 11434, true},
      {"2130706433", 11434, true},
      {"localhost", 11434, false},
      {"bad host", 443, false},
      {"api.openai.com", 0, false},
      {"api.openai.com", 70000, false},
  };
  Rules r = rules();
  for (const auto& c : cases) {
    CAPTURE(c.host);
    CAPTURE(c.port);
    CHECK(r.check(c.host, c.port).allowed == c.allowed);
  }
  CHECK(r.check("evil.anthropic.com", 443).reason.find("denied by evil.anthropic.com (t:8)") != std::string::npos);
  CHECK(r.check("evil.anthropic.com", 443).denied);  // an exact allow would not outweigh it
  CHECK_FALSE(r.check("nothing.example", 443).denied);
  CHECK(r.check("x.anthropic.com", 443).reason == "allowed by *.anthropic.com (t:2)");
  CHECK(r.check("nope.example", 443).reason == "no rule allows nope.example:443");
}

TEST_CASE("IP literals are canonicalised in every notation resolvers accept") {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"127.0.0.1", "127.0.0.1"},
      {"127.1", "127.0.0.1"},
      {"2130706433", "127.0.0.1"},
      {"0x7f000001", "127.0.0.1"},
      {"0177.0.0.1", "127.0.0.1"},
      {"0x7f.1", "127.0.0.1"},
      {"::1", "::1"},
      {"[::1]", "::1"},
      {"::ffff:127.0.0.1", "127.0.0.1"},
      {"0:0:0:0:0:ffff:7f00:1", "127.0.0.1"},
      {"169.254.169.254", "169.254.169.254"},
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

TEST_CASE("one classifier: every IPv4-in-IPv6 form is classified as the IPv4 address it carries") {
  struct Case {
    const char* addr;
    Range range;
  } cases[] = {
      {"127.0.0.1", Range::loopback},
      {"127.255.0.9", Range::loopback},
      {"10.0.0.1", Range::private_use},
      {"172.16.5.4", Range::private_use},
      {"172.32.0.1", Range::global},
      {"192.168.1.1", Range::private_use},
      {"100.64.0.1", Range::private_use},
      {"169.254.169.254", Range::special},
      {"0.0.0.0", Range::unspecified},
      {"0.1.2.3", Range::unspecified},
      {"224.0.0.1", Range::special},
      {"255.255.255.255", Range::special},
      {"8.8.8.8", Range::global},
      {"::1", Range::loopback},
      {"::", Range::unspecified},
      {"fd00::1", Range::private_use},
      {"fe80::1", Range::special},
      {"ff02::1", Range::special},
      {"fec0::1", Range::private_use},
      {"2606:4700::1", Range::global},
      // IPv4-mapped (unwrapped by parse_ip), IPv4-compatible, SIIT
      {"::ffff:10.0.0.1", Range::private_use},
      {"::ffff:127.0.0.1", Range::loopback},
      {"::ffff:0.0.0.0", Range::unspecified},
      {"::127.0.0.1", Range::loopback},
      {"::10.0.0.1", Range::special},
      {"::8.8.8.8", Range::special},
      {"::0.0.0.2", Range::unspecified},
      {"::ffff:0:127.0.0.1", Range::loopback},
      {"::ffff:0:10.1.2.3", Range::private_use},
      {"::ffff:0:0.0.0.0", Range::unspecified},
      {"::ffff:0:8.8.8.8", Range::global},
      // NAT64, well-known prefix and local use (RFC 8215) at /48, /56, /64 and /96
      {"64:ff9b::a00:1", Range::private_use},
      {"64:ff9b::7f00:1", Range::loopback},
      {"64:ff9b::0:0", Range::unspecified},
      {"64:ff9b::808:808", Range::global},
      {"64:ff9b:1::a00:1", Range::private_use},
      {"64:ff9b:1::7f00:1", Range::loopback},
      {"64:ff9b:1:7f00:0:100::", Range::loopback},    // /48: 127.0 | u | 0.1
      {"64:ff9b:1:7f:0:1::", Range::loopback},        // /56: 127 | u | 0.0.1
      {"64:ff9b:1:0:7f:0:100:0", Range::loopback},    // /64: u | 127.0.0.1
      {"64:ff9b:1:808:8:808::", Range::private_use},  // local use is never public
      // 6to4 and Teredo (server, and the client stored inverted)
      {"2002:a00:1::", Range::private_use},
      {"2002:7f00:1::1", Range::loopback},
      {"2002:0:0::1", Range::unspecified},
      {"2002:808:808::1", Range::global},
      {"2001:0:808:808::80ff:fffe", Range::loopback},     // client 127.0.0.1
      {"2001:0:808:808::f5ff:fffe", Range::private_use},  // client 10.0.0.1
      {"2001:0:a00:1::f7f7:f7f7", Range::private_use},    // server 10.0.0.1
      {"2001:0:808:808::f7f7:f7f7", Range::global},       // 8.8.8.8 both
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.addr));
    auto ip = parse_ip(c.addr);
    REQUIRE(ip);
    AddressClass k = classify(*ip);
    CHECK(k.range == c.range);
    CHECK(k.why.empty() == (c.range == Range::global));
  }
  CHECK(classify(*parse_ip("64:ff9b::7f00:1")).why == "loopback (127.0.0.0/8) in NAT64 (64:ff9b::/96)");
}

TEST_CASE(
    "the range check applies to every rule: names reach private ranges only with allow_private, loopback only "
    "through localhost or a loopback literal") {
  Rules r = rules();
  REQUIRE(r.allow("db.corp:5432", "op:1", PrivateRanges::allowed));
  REQUIRE(r.allow("pi.dev:8080", "t:9"));
  REQUIRE(r.allow("*.lab.corp", "op:2", PrivateRanges::allowed));
  REQUIRE(r.allow("localhost:3000", "t:10"));
  REQUIRE(r.allow("169.254.169.254", "t:11"));
  Verdict wild = r.check("x.anthropic.com", 443);
  Verdict exact = r.check("internal.corp", 443);
  Verdict priv = r.check("db.corp", 5432);
  Verdict null_routed = r.check("pi.dev", 8080);
  Verdict lab = r.check("a.lab.corp", 443);
  REQUIRE(wild.allowed);
  REQUIRE(exact.allowed);
  REQUIRE(priv.allowed);
  REQUIRE(null_routed.allowed);
  REQUIRE(lab.allowed);
  struct Case {
    const Verdict* v;
    const char* addr;
    bool allowed;
  } cases[] = {
      {&wild, "93.184.216.34", true},     {&wild, "169.254.169.254", false},
      {&wild, "::ffff:10.0.0.1", false},  {&wild, "64:ff9b:1::a00:1", false},
      {&wild, "::ffff:0:a00:1", false},   {&exact, "93.184.216.34", true},
      {&exact, "10.9.9.9", false},        {&exact, "127.0.0.1", false},
      {&exact, "0.0.0.0", false},         {&exact, "::", false},
      {&exact, "64:ff9b::7f00:1", false}, {&priv, "10.9.9.9", true},
      {&priv, "fd00::5", true},           {&priv, "::ffff:0:a00:1", true},
      {&priv, "169.254.169.254", false},  {&priv, "127.0.0.1", false},
      {&priv, "0.0.0.0", false},          {&priv, "2002:7f00:1::", false},
      {&lab, "192.168.1.2", true},        {&lab, "::1", false},
      {&null_routed, "0.0.0.0", false},   {&null_routed, "127.0.0.1", false},
      {&null_routed, "::1", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.addr);
    CAPTURE(c.v->reason);
    Verdict v = r.check_address(*c.v, "h", *parse_ip(c.addr));
    CHECK(v.allowed == c.allowed);
    if (!v.allowed) {
      CHECK(v.told.find(c.addr) == std::string::npos);  // the jail is not told the host's DNS answer
      CHECK(v.told.find("op:") == std::string::npos);
      CHECK(v.reason.find(parse_ip(c.addr)->str()) != std::string::npos);  // the log is
    }
  }
  // Literal rules reach the address they name; loopback ones and localhost reach loopback.
  Verdict lit = r.check("10.1.2.3", 5432);
  CHECK(r.check_address(lit, "10.1.2.3", *parse_ip("10.1.2.3")).allowed);
  Verdict meta = r.check("169.254.169.254", 80);
  CHECK(r.check_address(meta, "169.254.169.254", *parse_ip("169.254.169.254")).allowed);
  Verdict lo = r.check("127.0.0.1", 11434);
  CHECK(r.check_address(lo, "127.0.0.1", *parse_ip("127.0.0.1")).allowed);
  Verdict lh = r.check("localhost", 3000);
  REQUIRE(lh.allowed);
  CHECK(r.check_address(lh, "localhost", *parse_ip("::1")).allowed);
  Rules zero;
  REQUIRE(zero.allow("0.0.0.0:80", "t"));
  Verdict z = zero.check("0.0.0.0", 80);
  CHECK_FALSE(zero.check_address(z, "0.0.0.0", *parse_ip("0.0.0.0")).allowed);  // never
}

TEST_CASE("fixed addresses: literals (trailing dot too) and localhost never go to the host's resolver") {
  auto one = Rules::fixed_addresses("127.0.0.1.");
  REQUIRE(one.size() == 1);
  CHECK(one[0].str() == "127.0.0.1");
  CHECK(Rules::fixed_addresses("0x7f.1.")[0].str() == "127.0.0.1");
  CHECK(Rules::fixed_addresses("[::1]")[0].str() == "::1");
  auto lh = Rules::fixed_addresses("LocalHost.");
  REQUIRE(lh.size() == 2);
  CHECK(lh[0].str() == "127.0.0.1");
  CHECK(lh[1].str() == "::1");
  CHECK(Rules::fixed_addresses("example.com").empty());
  CHECK(normalise_host("127.0.0.1.") == std::optional<std::string>("127.0.0.1"));
  // Checked as the literal: a name rule cannot be satisfied by it, a literal rule can.
  Rules r;
  REQUIRE(r.allow("127.0.0.1:8080", "t"));
  Verdict v = r.check("127.0.0.1.", 8080);
  CHECK(v.allowed);
  CHECK(v.reach == Reach::loopback);
}

TEST_CASE("rules do not depend on their order: the most specific decides, deny wins a tie") {
  auto decide = [](std::vector<std::pair<std::string, bool>> rs, const char* host) {
    Rules fwd, rev;
    for (const auto& [p, allow] : rs) REQUIRE((allow ? fwd.allow(p, p) : fwd.deny(p, p)));
    for (auto it = rs.rbegin(); it != rs.rend(); ++it)
      REQUIRE((it->second ? rev.allow(it->first, it->first) : rev.deny(it->first, it->first)));
    Verdict a = fwd.check(host, 443), b = rev.check(host, 443);
    CHECK(a.allowed == b.allowed);
    CHECK(a.reason == b.reason);
    return a;
  };
  Verdict v = decide({{"*.a.test", true}, {"x.a.test", true}}, "x.a.test");
  CHECK(v.reason == "allowed by x.a.test (x.a.test)");
  CHECK(decide({{"*.a.test", false}, {"x.a.test", true}}, "x.a.test").allowed);  // exact beats wildcard
  CHECK_FALSE(decide({{"*.a.test", false}, {"x.a.test", true}}, "y.a.test").allowed);
  CHECK_FALSE(decide({{"*.a.test", true}, {"x.a.test", false}}, "x.a.test").allowed);
  CHECK(decide({{"*.a.test", true}, {"x.a.test", false}}, "y.a.test").allowed);
  CHECK_FALSE(decide({{"x.a.test", true}, {"x.a.test", false}}, "x.a.test").allowed);  // a tie: deny
  CHECK_FALSE(decide({{"*.a.test", true}, {"*.a.test", false}}, "x.a.test").allowed);
  CHECK(decide({{"*.a.test", false}, {"*.b.a.test", true}}, "x.b.a.test").allowed);  // longer wildcard
  CHECK_FALSE(decide({{"*.a.test", true}, {"*.b.a.test", false}}, "x.b.a.test").allowed);
  // Only an exact deny is one that no allow rule would outweigh.
  CHECK(decide({{"x.a.test", false}}, "x.a.test").denied);
  CHECK_FALSE(decide({{"*.a.test", false}}, "x.a.test").denied);  // --allow-net x.a.test:443 would do
  CHECK_FALSE(decide({{"x.a.test:443", true}, {"x.a.test", false}}, "x.a.test").allowed);  // port: same specificity
  CHECK(decide({{"x.a.test", true}, {"x.a.test:8443", false}}, "x.a.test").allowed);       // deny on another port
  Rules r;
  REQUIRE(r.allow("*.a.test", "w"));
  REQUIRE(r.allow("x.a.test", "e"));
  CHECK(r.check("x.a.test", 443).told == "allowed by the rule x.a.test");
}

TEST_CASE(
    "forwards: every loopback rule with a port listens on 127.0.0.1 and ::1, checked as its rule, merged per port") {
  Rules r;
  REQUIRE(r.allow("127.0.0.1:11434", "a"));
  REQUIRE(r.allow("localhost:8080", "b"));
  REQUIRE(r.allow("[::1]:9000", "c"));
  REQUIRE(r.allow("127.0.0.1", "no port: not forwarded"));
  REQUIRE(r.allow("example.com:8080", "not loopback"));
  REQUIRE(r.allow("127.0.0.1:8080", "d"));  // merged with localhost:8080
  REQUIRE(r.allow("localhost:11434", "e"));
  auto f = r.forwards();
  REQUIRE(f.size() == 6);
  struct Want {
    const char* addr;
    int port;
    const char* host;
  } want[] = {{"127.0.0.1", 11434, "127.0.0.1"}, {"::1", 11434, "localhost"}, {"127.0.0.1", 8080, "127.0.0.1"},
              {"::1", 8080, "localhost"},        {"127.0.0.1", 9000, "::1"},  {"::1", 9000, "::1"}};
  for (size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(f[i].addr.str() == want[i].addr);
    CHECK(f[i].port == want[i].port);
    CHECK(f[i].host == want[i].host);
    Verdict v = r.check(f[i].host, f[i].port);  // what the proxy checks for a forward
    CHECK(v.allowed);
    CHECK(v.reach == Reach::loopback);
  }
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
  CHECK(a.upstream == "GET /a/b?q=1 HTTP/1.1\r\nHost: Example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n");

  auto port = parse_http_request("POST http://h.example:8080 HTTP/1.0\r\n\r\n");
  REQUIRE(port.progress == Progress::done);
  CHECK(port.target.port == 8080);
  CHECK(port.upstream == "POST / HTTP/1.0\r\nHost: h.example:8080\r\nConnection: close\r\n\r\n");

  CHECK(parse_http_request("CONNECT a.b:443 HTTP/1.1\r\nHost: a").progress == Progress::need_more);
}

TEST_CASE("absolute form: the Host header is the checked target's, the query is kept, the fragment dropped") {
  auto spoof =
      parse_http_request("GET http://allowed.test/x HTTP/1.1\r\nHost: internal.corp\r\nhOsT: b\r\nA: 1\r\n\r\n");
  REQUIRE(spoof.progress == Progress::done);
  CHECK(spoof.upstream == "GET /x HTTP/1.1\r\nHost: allowed.test\r\nA: 1\r\nConnection: close\r\n\r\n");
  auto q = parse_http_request("GET http://h.test?q=1&r HTTP/1.1\r\n\r\n");
  REQUIRE(q.progress == Progress::done);
  CHECK(q.upstream == "GET /?q=1&r HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n");
  auto frag = parse_http_request("GET http://[::1]:8080/p?a#frag HTTP/1.1\r\n\r\n");
  REQUIRE(frag.progress == Progress::done);
  CHECK(frag.upstream == "GET /p?a HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");
  auto bare = parse_http_request("GET http://h.test#f HTTP/1.1\r\n\r\n");
  REQUIRE(bare.progress == Progress::done);
  CHECK(bare.upstream.starts_with("GET / HTTP/1.1\r\nHost: h.test\r\n"));
}

TEST_CASE("control bytes in a request target or header are refused with 400, never forwarded") {
  for (std::string bad :
       {std::string("GET http://a.test/x\rInjected: 1 HTTP/1.1\r\n\r\n"),
        std::string("GET http://a.test/x\nInjected: 1 HTTP/1.1\r\n\r\n"), "GET http://a.test/x\0y HTTP/1.1\r\n\r\n"s,
        std::string("GET http://a.test/\x01 HTTP/1.1\r\n\r\n"), std::string("GET http://a.test/\x7f HTTP/1.1\r\n\r\n"),
        std::string("GET http://a.test/x\tHTTP/1.1 HTTP/1.1\r\n\r\n"),
        std::string("CONNECT a.test:443\rX: HTTP/1.1\r\n\r\n"), std::string("CONNECT a.te\nst:443 HTTP/1.1\r\n\r\n"),
        std::string("GET http://a.test/ HTTP/1.1\r\nA: b\nInjected: 1\r\n\r\n"),
        std::string("GET http://a.test/ HTTP/1.1\r\nA: b\rInjected: 1\r\n\r\n"),
        "GET http://a.test/ HTTP/1.1\r\nA: b\0c\r\n\r\n"s}) {
    CAPTURE(bad);
    auto r = parse_http_request(bad);
    CHECK(r.progress == Progress::bad);
    CHECK(r.status == 400);
    CHECK(r.error.starts_with("control character"));  // the reason the agent reads
    CHECK(r.upstream.empty());
  }
  CHECK(parse_http_request("GET http://a.test/ HTTP/1.1\r\nA: b\tc\r\n\r\n").progress == Progress::done);
}

TEST_CASE("refusals carry the reason phrase of their status") {
  CHECK(std::string(reason_phrase(400)) == "Bad Request");
  CHECK(std::string(reason_phrase(403)) == "Forbidden");
  CHECK(std::string(reason_phrase(431)) == "Request Header Fields Too Large");
  CHECK(std::string(reason_phrase(502)) == "Bad Gateway");
  CHECK(std::string(reason_phrase(503)) == "Service Unavailable");
  CHECK(std::string(reason_phrase(504)) == "Gateway Timeout");
  CHECK(std::string(reason_phrase(505)) == "HTTP Version Not Supported");
  CHECK(http_response(504, reason_phrase(504), "x").starts_with("HTTP/1.1 504 Gateway Timeout\r\n"));
}

TEST_CASE("a refused destination's reason phrase names the host and the flag that allows it") {
  CHECK(refusal_reason_phrase("example.com", 443) ==
        "pi-jail refused example.com:443 (allow: --allow-net example.com:443)");
  CHECK(refusal_reason_phrase("[::1]", 8080) == "pi-jail refused [::1]:8080 (allow: --allow-net [::1]:8080)");
  CHECK(http_response(403, refusal_reason_phrase("a.test", 80), "x")
            .starts_with("HTTP/1.1 403 pi-jail refused a.test:80 (allow: --allow-net a.test:80)\r\n"));
}

TEST_CASE("a refused destination's reason phrase cannot break the status line") {
  const std::string evil = "a.test\r\nSet-Cookie: x=1\x1b[31m\x7f\xc3\xa9 %00";
  const std::string phrase = refusal_reason_phrase(evil, 443);
  CHECK(std::all_of(phrase.begin(), phrase.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
  CHECK(phrase ==
        "pi-jail refused a.test??Set-Cookie:?x?1?[31m?????00:443 (allow: --allow-net "
        "a.test??Set-Cookie:?x?1?[31m?????00:443)");
  const std::string long_host(5000, 'a');
  const std::string cut = refusal_reason_phrase(long_host, 443);
  CHECK(cut.size() < 2 * kMaxPhraseHost + 80);
  CHECK(cut.find(std::string(kMaxPhraseHost, 'a') + "...:443") != std::string::npos);
  CHECK(cut.find(std::string(kMaxPhraseHost + 1, 'a')) == std::string::npos);
}

TEST_CASE("malformed HTTP proxy requests are refused with a status, never a crash") {
  struct Case {
    std::string req;
    int status;
  } cases[] = {
      {"GET /path HTTP/1.1\r\n\r\n", 400},               // origin form: not a proxy request
      {"GET https://a.example/ HTTP/1.1\r\n\r\n", 400},  // TLS is for CONNECT
      {"CONNECT a.example HTTP/1.1\r\n\r\n", 400},       // no port
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

TEST_CASE("one pattern parser: what explain shows is the rule the filter enforces, and a bad pattern is an error") {
  struct Case {
    const char* in;
    const char* out;  // nullptr: refused
  } cases[] = {
      {"Example.COM", "example.com"},
      {"example.com.", "example.com"},
      {"*.Example.com.:8443", "*.example.com:8443"},
      {"127.1", "127.0.0.1"},
      {"0x7f.0.0.1:80", "127.0.0.1:80"},
      {"2130706433:8080", "127.0.0.1:8080"},
      {"[::ffff:10.0.0.1]", "10.0.0.1"},
      {"[2001:DB8::1]:443", "[2001:db8::1]:443"},
      {"localhost:3000", "localhost:3000"},
      {"*.1.2.3", nullptr},  // resolvers read 1.2.3 as 1.2.0.3: never a domain
      {"*.10.0.0.1", nullptr},
      {"*.com", nullptr},
      {"*.", nullptr},
      {"*.*.example.com", nullptr},
      {"x*.example.com", nullptr},
      {"a..b", nullptr},
      {"-a.example", nullptr},
      {"[1.2.3.4]", nullptr},
      {"[::1", nullptr},
      {"[::1]8080", nullptr},
      {"::1", nullptr},
      {"example.com:", nullptr},
      {"example.com:0", nullptr},
      {"example.com:65536", nullptr},
      {"example.com:http", nullptr},
      {"", nullptr},
      {"exa mple.com", nullptr},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto p = parse_net_pattern(c.in);
    if (!c.out) {
      CHECK_FALSE(p);
      Rules r;
      CHECK_FALSE(r.allow(c.in, "t"));  // an error, never a rule dropped in silence
      CHECK_FALSE(r.deny(c.in, "t"));
      CHECK(r.allows().empty());
      continue;
    }
    REQUIRE_MESSAGE(p, (p ? "" : p.error().what()));
    CHECK(p->str() == c.out);
    auto again = parse_net_pattern(p->str());  // explain's text reads back as the same rule
    REQUIRE(again);
    CHECK(*again == *p);
    Rules r;
    r.allow(*p, "t");
    REQUIRE(r.allows().size() == 1);
    CHECK(r.allows()[0].text() == c.out);
  }
}

TEST_CASE("a wildcard over numbers never becomes an address rule: *.1.2.3 is refused, 1.2.0.3 stays unreachable") {
  Rules r;
  CHECK_FALSE(r.allow("*.1.2.3", "t"));
  CHECK_FALSE(r.check("x.1.2.3", 443).allowed);
  CHECK_FALSE(r.check("1.2.0.3", 443).allowed);
}

TEST_CASE("host:port: one parser; brackets kept, the port required and in range, one colon unbracketed") {
  auto hp = pj::net::parse_host_port("api.example.com:443");
  REQUIRE(hp);
  CHECK(hp->host == "api.example.com");
  CHECK(hp->port == 443);
  hp = pj::net::parse_host_port("[::1]:8080");
  REQUIRE(hp);
  CHECK(hp->host == "[::1]");
  CHECK(hp->port == 8080);
  for (const char* bad : {"example.com", "example.com:", ":443", "example.com:0", "example.com:65536",
                          "example.com:44 3", "::1:443", "[::1]443", "[::1", "example.com:+443"})
    CHECK_MESSAGE(!pj::net::parse_host_port(bad), bad);
  auto split = pj::net::split_host_port("[::1]");
  REQUIRE(split);
  CHECK_FALSE(split->has_port);
  CHECK(split->host == "[::1]");
  CHECK(pj::net::split_host_port("a:b:c").error().message().find("brackets") != std::string::npos);
}
