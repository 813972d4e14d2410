// The network filter's rules in real jails: the range check on every
// rule and every IPv4-in-IPv6 form, strict proxy requests, and the
// host-loopback forwards. Test servers listen on the host's loopback;
// names resolve through an /etc/hosts of the test's own, bound in a mount
// namespace the test creates, and traffic to other addresses is tried
// only in a network namespace the test creates (nothing leaves it).
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "harness.h"
#include "text.h"

using namespace pj::test;

namespace {

enum class Net { host, own };

// pi-jail ARGS with `hosts` as /etc/hosts, bound in a mount namespace of
// this test; Net::own: in a network namespace of its own too (only a
// down lo: whatever the filter lets through cannot leave).
Outcome jail_with_hosts(const Sandbox& sb, const std::string& hosts, Net net, const std::vector<std::string>& args) {
  std::string file = sb.base + "/hosts";
  write_file(file, hosts);
  std::vector<std::string> argv{"/usr/bin/unshare"};
  if (::getuid() != 0) argv.push_back("-Ur");
  argv.push_back("-m");
  if (net == Net::own) argv.push_back("-n");
  argv.insert(argv.end(),
              {"/bin/sh", "-c", "mount --bind \"$0\" /etc/hosts && exec \"$@\"", file, pi_jail(), "-q", "-w", sb.ws});
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {"HOME=" + sb.home});
}

const std::string kCurl = "env -u NO_PROXY -u no_proxy curl -s --max-time 20 ";

// A python3 client inside the jail: each argument is a request (hex) sent
// raw to the HTTP proxy; prints the response's status line and body, one
// line per request.
std::vector<std::string> raw_requests(const std::vector<std::string>& requests) {
  std::vector<std::string> argv{
      "/usr/bin/python3", "-c",
      "import socket, sys\n"
      "for h in sys.argv[1:]:\n"
      "    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "    s.sendall(bytes.fromhex(h))\n"
      "    data = b''\n"
      "    while True:\n"
      "        b = s.recv(65536)\n"
      "        if not b: break\n"
      "        data += b\n"
      "    head, _, body = data.partition(b'\\r\\n\\r\\n')\n"
      "    print(head.split(b'\\r\\n')[0].decode(), '|', body.decode().strip(), flush=True)\n"};
  for (const auto& r : requests) argv.push_back(hex(r));
  return argv;
}

}  // namespace

TEST_CASE("a null-routed exact name (0.0.0.0 pi.dev) cannot reach the host's loopback: HTTP, CONNECT or SOCKS5") {
  Sandbox sb;
  HttpServer server;
  std::string log = sb.outside + "/net.jsonl";
  std::string url = "http://pi.dev:" + server.port() + "/";
  auto o = jail_with_hosts(
      sb, "127.0.0.1 localhost\n0.0.0.0 pi.dev\n127.0.0.1 loopback.pjtest.example\n", Net::host,
      {"--net-log", log, "--allow-net", "pi.dev:" + server.port(), "--allow-net",
       "loopback.pjtest.example:" + server.port(), "--", "/bin/sh", "-c",
       kCurl + "-w ' %{http_code}\\n' -x http://127.0.0.1:3128 " + url + "; " +  //
           kCurl + "-p -x http://127.0.0.1:3128 " + url + "; echo connect=$?; " + kCurl +
           "--socks5-hostname 127.0.0.1:1080 " + url + "; echo socks=$?; " + kCurl +
           "-w ' %{http_code}\\n' -x http://127.0.0.1:3128 http://loopback.pjtest.example:" + server.port() + "/"});
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(server.hits() == 0);
  CHECK(count(o.out, " 403\n") == 2);
  CHECK(o.out.find("connect=56") != std::string::npos);
  CHECK(o.out.find("socks=97") != std::string::npos);
  CHECK(o.out.find("0.0.0.0") == std::string::npos);  // the jail is not told the host's DNS answer
  std::string lines = read_file(log);
  CHECK(count(lines, "resolves to 0.0.0.0, unspecified (0.0.0.0/8)") == 3);
  CHECK(count(lines, "resolves to 127.0.0.1, loopback (127.0.0.0/8)") == 1);
}

TEST_CASE("every IPv4-in-IPv6 form of a private or loopback address is refused, for exact names and wildcards") {
  Sandbox sb;
  struct Form {
    const char* name;
    const char* addr;
    const char* why;
  } forms[] = {
      {"mapped", "::ffff:10.0.0.7", "10.0.0.7, private (10.0.0.0/8)"},
      {"compat", "::10.0.0.7", "::10.0.0.7, IPv4-compatible (::/96)"},
      {"siit", "::ffff:0:10.0.0.7", "::ffff:0:a00:7, private (10.0.0.0/8) in SIIT (::ffff:0:0:0/96)"},
      {"nat64", "64:ff9b::a00:7", "64:ff9b::a00:7, private (10.0.0.0/8) in NAT64 (64:ff9b::/96)"},
      {"nat64local", "64:ff9b:1::a00:7", "64:ff9b:1::a00:7, local-use NAT64 (64:ff9b:1::/48)"},
      {"sixtofour", "2002:a00:7::1", "2002:a00:7::1, private (10.0.0.0/8) in 6to4 (2002::/16)"},
      {"teredo", "2001:0:808:808::f5ff:fff8",
       "2001:0:808:808::f5ff:fff8, private (10.0.0.0/8) in Teredo client (2001::/32)"},
      {"siitlo", "::ffff:0:127.0.0.1", "::ffff:0:7f00:1, loopback (127.0.0.0/8) in SIIT (::ffff:0:0:0/96)"},
      {"nat64locallo", "64:ff9b:1::7f00:1",
       "64:ff9b:1::7f00:1, loopback (127.0.0.0/8) in local-use NAT64 (64:ff9b:1::/48)"},
      {"unspec", "::", "resolves to ::, unspecified (::)"},
  };
  std::string hosts = "127.0.0.1 localhost\n";
  std::string script;
  std::vector<std::string> args{"--net-log",   sb.outside + "/net.jsonl", "--config", sb.outside + "/policy.toml",
                                "--allow-net", "*.w.pjtest.example:8080"};
  for (const auto& f : forms) {
    std::string exact = std::string(f.name) + ".pjtest.example", wild = std::string(f.name) + ".w.pjtest.example";
    hosts += std::string(f.addr) + " " + exact + " " + wild + "\n";
    args.insert(args.end(), {"--allow-net", exact + ":8080"});
    for (const auto& name : {exact, wild})
      script += "echo " + name + " $(" + kCurl + "-o /dev/null -w '%{http_code}' -x http://127.0.0.1:3128 http://" +
                name + ":8080/); ";
  }
  // An operator's allow_private lets one name reach a private address
  // (the connection then fails: this network namespace has nowhere to
  // go), never a loopback one.
  hosts += "::ffff:0:10.0.0.8 corp.pjtest.example\n::ffff:0:127.0.0.2 corplo.pjtest.example\n";
  write_file(sb.outside + "/policy.toml",
             "[network]\nallow = [{ host = \"corp.pjtest.example:8080\", allow_private = true },\n"
             "  { host = \"corplo.pjtest.example:8080\", allow_private = true }]\n");
  for (const char* name : {"corp.pjtest.example", "corplo.pjtest.example"})
    script += "echo " + std::string(name) + " $(" + kCurl +
              "-o /dev/null -w '%{http_code}' -x http://127.0.0.1:3128 http://" + name + ":8080/); ";
  args.insert(args.end(), {"--", "/bin/sh", "-c", script});
  auto o = jail_with_hosts(sb, hosts, Net::own, args);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  for (const auto& f : forms) {
    CAPTURE(f.name);
    CHECK(o.out.find(std::string(f.name) + ".pjtest.example 403\n") != std::string::npos);
    CHECK(o.out.find(std::string(f.name) + ".w.pjtest.example 403\n") != std::string::npos);
  }
  CHECK(o.out.find("corp.pjtest.example 502\n") != std::string::npos);  // allowed: tried, unreachable
  CHECK(o.out.find("corplo.pjtest.example 403\n") != std::string::npos);
  std::string lines = read_file(sb.outside + "/net.jsonl");
  for (const auto& f : forms) {
    CAPTURE(std::string(f.why));
    CHECK(count(lines, f.why) == 2);
  }
  CHECK(lines.find("cannot connect to corp.pjtest.example:8080") != std::string::npos);
  CHECK(lines.find("resolves to ::ffff:0:7f00:2, loopback (127.0.0.0/8) in SIIT") != std::string::npos);
}

TEST_CASE(
    "proxy requests: control bytes refused with 400, Host from the target, query kept, reason phrases, "
    "refusals name the rule and no file path") {
  Sandbox sb;
  HttpServer server;
  std::string p = server.port(), hp = "127.0.0.1:" + p;
  std::string config = sb.outside + "/operator-policy.toml";
  write_file(config, "[network]\ndeny = [\"blocked.pjtest.example\"]\n");
  std::vector<std::string> reqs{
      "GET http://" + hp + "/a\rInjected: 1 HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET http://" + hp + "/a\nInjected: 1 HTTP/1.1\r\nHost: x\r\n\r\n",
      "CONNECT " + hp + "\rInjected: 1 HTTP/1.1\r\n\r\n",
      "",  // set below: a NUL in the target
      "GET http://" + hp + "/hello?x=1 HTTP/1.1\r\nHost: evil.internal\r\nUser-Agent: t\r\n\r\n",
      "GET http://" + hp + "?only=query HTTP/1.1\r\n\r\n",
      "GET http://127.0.0.1.:" + p + "/dot HTTP/1.1\r\n\r\n",
      "GET http://blocked.pjtest.example/ HTTP/1.1\r\n\r\n",
      "GET http://nope.pjtest.example/ HTTP/1.1\r\n\r\n",
  };
  reqs[3] = "GET http://" + hp + "/a" + std::string(1, '\0') + "b HTTP/1.1\r\n\r\n";
  auto o = sb.jail(raw_requests(reqs), {"--config", config, "--allow-net", hp});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  std::vector<std::string> got;
  for (size_t a = 0, b; (b = o.out.find('\n', a)) != std::string::npos; a = b + 1)
    got.push_back(o.out.substr(a, b - a));
  REQUIRE(got.size() == reqs.size());
  for (int i : {0, 1, 2, 3}) {
    CAPTURE(i);
    CHECK(got[i].starts_with("HTTP/1.1 400 Bad Request | pi-jail: malformed request: control character"));
  }
  CHECK(got[4] == "HTTP/1.1 200 OK | served");
  CHECK(got[5] == "HTTP/1.1 200 OK | served");
  CHECK(got[6] == "HTTP/1.1 200 OK | served");  // 127.0.0.1. is the literal, checked as such
  CHECK(got[7] == "HTTP/1.1 403 Forbidden | pi-jail: denied by the rule blocked.pjtest.example");
  CHECK(got[8] ==
        "HTTP/1.1 403 pi-jail refused nope.pjtest.example:80 (allow: --allow-net nope.pjtest.example:80) | "
        "pi-jail: no rule allows nope.pjtest.example:80");
  CHECK(o.out.find(config) == std::string::npos);
  CHECK(server.hits() == 3);
  std::string heads = server.heads();
  CAPTURE(heads);
  CHECK(heads.find("Injected") == std::string::npos);
  CHECK(heads.find("evil.internal") == std::string::npos);
  CHECK(heads.find("GET /hello?x=1 HTTP/1.1\r\nHost: " + hp + "\r\nUser-Agent: t\r\n") != std::string::npos);
  CHECK(heads.find("GET /?only=query HTTP/1.1\r\nHost: " + hp + "\r\n") != std::string::npos);
  CHECK(heads.find("GET /dot HTTP/1.1\r\nHost: 127.0.0.1.:" + p + "\r\n") != std::string::npos);
}

TEST_CASE("localhost forwards: on 127.0.0.1 and ::1 inside, checked as their rule; duplicates merged") {
  Sandbox sb;
  HttpServer server;
  std::string p = server.port();
  std::string direct = "curl -s --noproxy '*' --max-time 20 ";
  std::string script = direct + "http://localhost:" + p + "/; " + direct + "http://127.0.0.1:" + p + "/; " + direct +
                       "-g http://[::1]:" + p + "/; " + kCurl + "-x http://127.0.0.1:3128 http://localhost:" + p + "/";
  auto lh = sb.jail({"/bin/sh", "-c", script}, {"--allow-net", "localhost:" + p});
  CAPTURE(lh.err);
  CHECK(lh.status == 0);
  CHECK(lh.out == "served\nserved\nserved\nserved\n");
  auto both = sb.jail({"/bin/sh", "-c", script}, {"--allow-net", "localhost:" + p, "--allow-net", "127.0.0.1:" + p});
  CAPTURE(both.err);
  CHECK(both.status == 0);
  CHECK(both.out == "served\nserved\nserved\nserved\n");
  CHECK(server.hits() == 8);
}

TEST_CASE("no jailed process can bind [::1]:PORT beside a 127.0.0.1 forward") {
  Sandbox sb;
  HttpServer server;
  std::string p = server.port();
  auto o = sb.jail({"/usr/bin/python3", "-c",
                    "import socket, sys\n"
                    "s = socket.socket(socket.AF_INET6)\n"
                    "try:\n"
                    "    s.bind(('::1', int(sys.argv[1]))); print('bound')\n"
                    "except OSError as e:\n"
                    "    print(e.strerror)\n",
                    p},
                   {"--allow-net", "127.0.0.1:" + p});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out == "Address already in use\n");
}

TEST_CASE("forwards past the 64-fd message: up to the documented bound; beyond it a clear error") {
  Sandbox sb;
  std::vector<std::string> many, too_many;
  for (int i = 0; i < 257; ++i) {
    std::string rule = "127.0.0.1:" + std::to_string(40000 + i);
    too_many.insert(too_many.end(), {"--allow-net", rule});
    if (i < 100) many.insert(many.end(), {"--allow-net", rule});
  }
  // The last of 202 listeners (the fourth message) accepts; whether a host
  // service answers does not matter here.
  auto ok = sb.jail({"/usr/bin/python3", "-c",
                     "import socket\nsocket.create_connection(('::1', 40099), timeout=20)\nprint('accepted')\n"},
                    many);
  CAPTURE(ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out == "accepted\n");
  auto bad = sb.jail({"/bin/true"}, too_many);
  CHECK(bad.status == 125);
  CHECK(bad.err.find("too many host-loopback forwards: 257 ports, at most 256") != std::string::npos);
}

TEST_CASE("--report is created 0600, like the network log") {
  Sandbox sb;
  std::string report = sb.outside + "/r.json", log = sb.outside + "/n.jsonl";
  auto o = sb.jail({"/bin/true"}, {"--report", report, "--net-log", log});
  CHECK(o.status == 0);
  struct stat st {};
  REQUIRE(::stat(report.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  REQUIRE(::stat(log.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}
