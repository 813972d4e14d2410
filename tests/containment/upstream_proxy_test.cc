// The upstream HTTP proxy ([network] upstream_proxy) in real jails: a
// proxy stand-in on the host's loopback that wants Proxy-Authorization and
// tunnels every CONNECT to one target stand-in, also on loopback (names
// are never resolved: the proxy stand-in maps them). The jail's requests
// go through it with the operator's credentials, which the jail never
// sees; refused hosts never reach it; without the setting it sees nothing.
#include <doctest/doctest.h>

#include <string>

#include "harness.h"
#include "stand_in.h"
#include "text.h"

using namespace pj::test;

namespace {

// args: USER:PASSWORD the proxy wants (empty: none), then the port every
// tunnel goes to on 127.0.0.1. Each CONNECT is noted with what it carried.
const char* const kProxyHandler = R"PY(
import base64, select, socket
class Handler(StandIn):
    def any(self):
        note("plain %s\n" % self.requestline)
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_CONNECT(self):
        auth = self.headers.get("Proxy-Authorization")
        note("CONNECT %s host=%s auth=%s\n" % (self.path, self.headers.get("Host"), auth))
        want = "Basic " + base64.b64encode(args[0].encode()).decode() if args[0] else None
        if auth != want:
            self.send_response(407)
            self.send_header("Proxy-Authenticate", 'Basic realm="pj-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        up = socket.create_connection(("127.0.0.1", int(args[1])))
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        ends = [self.connection, up]
        while True:
            ready, _, _ = select.select(ends, [], [], 30)
            if not ready:
                break
            done = False
            for s in ready:
                data = s.recv(65536)
                if not data:
                    done = True
                    break
                (up if s is self.connection else self.connection).sendall(data)
            if done:
                break
        up.close()
        self.close_connection = True
)PY";

// HTTPS: answers what x-api-key it got, and notes every request head.
const char* const kKeyEcho = R"PY(
class Handler(StandIn):
    def any(self):
        note(self.requestline + "\n" + str(self.headers) + "--\n")
        body = ("seen x-api-key=%s\n" % self.headers.get("x-api-key")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
)PY";

// A policy file outside the jail's view with the upstream proxy at `port`.
std::string proxy_policy(const Sandbox& sb, const std::string& userinfo, const std::string& port) {
  const std::string path = sb.outside + "/policy.toml";
  write_file(path, "[network]\nupstream_proxy = \"http://" + userinfo + "127.0.0.1:" + port + "\"\n");
  return path;
}

}  // namespace

TEST_CASE("upstream proxy: the jail's requests tunnel through it with the operator's credentials, unseen inside") {
  Sandbox sb;
  HttpServer target("served-through-the-proxy\n");
  const std::string password = "pw-" + unique_token() + unique_token();
  StandInServer proxy(sb.base, "upstream", kProxyHandler, {"pj-operator:" + password, target.port()});
  const std::string config = proxy_policy(sb, "pj-operator:" + password + "@", proxy.port());
  const std::string allowed = "allowed.pjtest.example:" + target.port();
  const std::string report = sb.outside + "/r.json", log = sb.outside + "/net.jsonl";
  // Absolute-form and CONNECT through the jail's proxy, then SOCKS5; a
  // refused host; then everything the jail can see of itself.
  auto o = sb.jail(
      {"/bin/sh", "-c",
       "curl -sS http://" + allowed + "/a && curl -sS -p http://" + allowed +
           "/b && env -u ALL_PROXY -u all_proxy curl -sS --socks5-hostname 127.0.0.1:1080 http://" + allowed +
           "/c && curl -s -o /dev/null -w 'refused=%{http_code}\\n' http://refused.pjtest.example:" + target.port() +
           "/; echo ==env; env; echo ==notes; cat /run/pi-jail/* 2>&1; echo ==proc; " +
           "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null | tr '\\0' '\\n'; done; " + probe() +
           " find-in 1 " + hex(password) + "; " + probe() + " find-in 1 " + hex(base64("pj-operator:" + password))},
      {"--config", config, "--allow-net", allowed, "--report", report, "--net-log", log});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("served-through-the-proxy\nserved-through-the-proxy\nserved-through-the-proxy\nrefused=403\n") == 0);
  CHECK(target.hits() == 3);
  const std::string seen = proxy.log();
  CAPTURE(seen);
  const std::string auth = "auth=Basic " + base64("pj-operator:" + password) + "\n";
  CHECK(count(seen, "CONNECT " + allowed + " host=" + allowed + " " + auth) == 3);
  CHECK(seen.find("refused.pjtest.example") == std::string::npos);  // refused before the proxy
  CHECK(seen.find("plain ") == std::string::npos);
  // Nothing inside holds the credentials: not the environment (the
  // jail's proxy variables are pi-jail's own), not the notes, not /proc;
  // init's environment and memory are refused outright.
  CHECK(o.out.find(password) == std::string::npos);
  CHECK(o.out.find(base64("pj-operator:" + password)) == std::string::npos);
  CHECK(o.out.find("HTTPS_PROXY=http://127.0.0.1:3128\n") != std::string::npos);
  CHECK(count(o.out, "environ EACCES\n") == 2);
  CHECK(count(o.out, "mem EACCES\n") == 2);
  CHECK(count(o.out, "cmdline absent\n") == 2);
  // Nor pi-jail's messages, report or log; the log says which way it went.
  const std::string text = read_file(report), lines = read_file(log);
  for (const std::string& out : {o.err, text, lines}) {
    CHECK(out.find(password) == std::string::npos);
    CHECK(out.find(base64("pj-operator:" + password)) == std::string::npos);
  }
  CHECK(lines.find("through the upstream proxy 127.0.0.1:" + proxy.port()) != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("upstream proxy: its refusal (407) is the jail's 502 naming the status; loopback never goes through it") {
  Sandbox sb;
  HttpServer target("served\n");
  StandInServer proxy(sb.base, "upstream", kProxyHandler, {"pj-operator:right", target.port()});
  const std::string config = proxy_policy(sb, "pj-operator:wrong@", proxy.port());
  const std::string allowed = "allowed.pjtest.example:" + target.port();
  auto o = sb.jail(
      {"/bin/sh", "-c",
       "curl -s -w ' %{http_code}\\n' http://" + allowed + "/; curl -sS http://127.0.0.1:" + target.port() + "/local"},
      {"--config", config, "--allow-net", allowed, "--allow-net", "127.0.0.1:" + target.port()});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out.find("refused the tunnel to " + allowed + ": HTTP/1.1 407 Proxy Authentication Required") !=
        std::string::npos);
  CHECK(o.out.find(" 502\nserved\n") != std::string::npos);
  CHECK(o.out.find("wrong") == std::string::npos);
  const std::string seen = proxy.log();
  CHECK(count(seen, "CONNECT ") == 1);  // the loopback request went direct
  CHECK(target.hits() == 1);
}

TEST_CASE("upstream proxy: without the setting the filter connects directly and the proxy sees nothing") {
  Sandbox sb;
  HttpServer target("served-directly\n");
  StandInServer proxy(sb.base, "upstream", kProxyHandler, {"", target.port()});
  const std::string allowed = "allowed.pjtest.example:" + target.port();
  auto o = sb.jail({"/bin/sh", "-c", "curl -sS http://" + allowed + "/ && curl -sS -p http://" + allowed + "/"},
                   {"--allow-net", allowed, "--test-resolve", allowed + "=127.0.0.1:" + target.port()});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out == "served-directly\nserved-directly\n");
  CHECK(target.hits() == 2);
  CHECK(proxy.log().empty());
}

TEST_CASE("upstream proxy: a host bound to a credential is intercepted through it, its reconnections too") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"DNS:bound.pjtest.example"});
  StandInServer server(sb.base, "bound", certs, kKeyEcho);
  const std::string password = "pw-" + unique_token();
  StandInServer proxy(sb.base, "upstream", kProxyHandler, {"pj-operator:" + password, server.port()});
  const std::string config = proxy_policy(sb, "pj-operator:" + password + "@", proxy.port());
  const std::string bound = "bound.pjtest.example:" + server.port();
  const std::string ph = "sk-ant-api03-PH" + unique_token(), real = "sk-ant-api03-REAL" + unique_token();
  // A request, then on the same connection of curl's a token exchange,
  // which the credential filter sends on a server connection of its own:
  // a second tunnel through the proxy (what the exchange then makes of
  // this server's answer does not matter here).
  auto o = sb.jail(
      {"/bin/sh", "-c",
       "curl -sS -H 'x-api-key: " + ph + "' https://" + bound + "/a --next -s -o /dev/null -H 'x-api-key: " + ph +
           "' --data '{}' https://" + bound + "/v1/oauth/token"},
      {"--config", config, "--allow-net", bound, "--test-upstream-ca", certs.ca, "--test-token-endpoint",
       "anthropic@" + bound + "/v1/oauth/token"},
      "", {"PJ_TEST_BIND=TEST_KEY=" + ph + "=" + real + "@" + bound + "\n"});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out == "seen x-api-key=" + ph + "\n");
  const std::string heads = server.log();
  CAPTURE(heads);
  CHECK(heads.find("GET /a HTTP/1.1\n") != std::string::npos);
  CHECK(heads.find("POST /v1/oauth/token HTTP/1.1\n") != std::string::npos);
  CHECK(count(heads, "x-api-key: " + real) == 2);
  CHECK(count(proxy.log(),
              "CONNECT " + bound + " host=" + bound + " auth=Basic " + base64("pj-operator:" + password) + "\n") == 2);
}

// The proxy itself is never a destination: an allow rule that covers its
// address and port (here 127.0.0.1:PORT and localhost:PORT, forwarded
// into the jail as well) would otherwise give the jail a connection of
// its own to it, and CONNECTs from there that pi-jail never checks.
TEST_CASE("upstream proxy: it is never a destination, whatever the rules allow; it sees no connection of the jail") {
  Sandbox sb;
  HttpServer target("behind-the-proxy\n");
  // No credentials wanted: a CONNECT that reached it would be tunnelled.
  StandInServer proxy(sb.base, "upstream", kProxyHandler, {"", target.port()});
  const std::string config = proxy_policy(sb, "", proxy.port());
  const std::string at = "127.0.0.1:" + proxy.port(), named = "localhost:" + proxy.port();
  const std::string report = sb.outside + "/r.json";
  const std::string code = " -s -o /dev/null -w '%{http_code} %{http_connect}\\n' ";
  // Straight to its port (the forwarded listener inside), then through
  // the jail's HTTP proxy (absolute form, CONNECT) and SOCKS5, by address
  // and by name.
  auto o = sb.jail(
      {"/bin/sh", "-c",
       "curl" + code + "http://" + at + "/direct; curl" + code + "--noproxy '' -x http://127.0.0.1:3128 http://" + at +
           "/absolute; curl" + code + "--noproxy '' -p -x http://127.0.0.1:3128 http://" + at + "/connect; curl" +
           code + "--noproxy '' -p -x http://127.0.0.1:3128 http://" + named + "/by-name; curl" + code +
           "--noproxy '' --socks5-hostname 127.0.0.1:1080 http://" + at +
           "/socks; curl -s --noproxy '' -x http://127.0.0.1:3128 http://" + at + "/said"},
      {"--config", config, "--allow-net", at, "--allow-net", named, "--report", report});
  CAPTURE(o.err);
  CAPTURE(o.out);
  // No answer from it, ever: refused (403 from pi-jail's proxy; a closed
  // connection or a SOCKS refusal is 000).
  CHECK(o.out.find("000 000\n403 000\n000 403\n000 403\n000 000\n") == 0);
  CHECK(o.out.find(at + " is the upstream proxy: never a destination") != std::string::npos);
  CHECK(proxy.log().empty());
  CHECK(target.hits() == 0);
  const std::string text = read_file(report);
  CHECK(count(text, "is the upstream proxy " + at) >= 5);
  CHECK(validate_report(report).status == 0);
}
