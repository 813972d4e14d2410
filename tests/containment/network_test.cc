// The network filter in real jails, against test servers on the host's
// loopback. Names resolve through an /etc/hosts of the test's own, bound
// in a mount namespace the test creates: no traffic leaves the machine.
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "harness.h"
#include "text.h"

using namespace pj::test;

namespace {

const std::string kNoProxyEnv = "env -u NO_PROXY -u no_proxy ";

}  // namespace

TEST_CASE("an allowed host-loopback service: forwarded, and through the HTTP proxy and SOCKS5") {
  Sandbox sb;
  HttpServer server("served-by-host\n");
  std::string url = "http://127.0.0.1:" + server.port() + "/";
  std::string report = sb.outside + "/r.json";
  auto o = sb.jail({"/bin/sh", "-c",
                    "curl -sS " + url + " && " + kNoProxyEnv + "curl -sS -x http://127.0.0.1:3128 " + url + " && " +
                        kNoProxyEnv + "curl -sS -p -x http://127.0.0.1:3128 " + url + " && " + kNoProxyEnv +
                        "curl -sS --socks5-hostname 127.0.0.1:1080 " + url},
                   {"--allow-net", "127.0.0.1:" + server.port(), "--report", report});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out == "served-by-host\nserved-by-host\nserved-by-host\nserved-by-host\n");
  CHECK(server.hits() == 4);
  std::string text = read_file(report);
  for (const char* proto : {"\"forward\"", "\"http\"", "\"http-connect\"", "\"socks5\""}) {
    CAPTURE(proto);
    CHECK(text.find("\"protocol\": " + std::string(proto)) != std::string::npos);
  }
}

TEST_CASE("refused destinations: 403 from the HTTP proxy, a SOCKS refusal, a log line each") {
  Sandbox sb;
  HttpServer server("must-not-be-served\n");
  std::string url = "http://127.0.0.1:" + server.port() + "/";
  std::string log = sb.outside + "/net.jsonl";
  auto o = sb.jail(
      {"/bin/sh", "-c",
       kNoProxyEnv + "curl -s -o /dev/null -w '%{http_code}\\n' -x http://127.0.0.1:3128 " + url + "; " + kNoProxyEnv +
           "curl -s -o /dev/null -w '%{http_code}\\n' -x http://127.0.0.1:3128 http://blocked.example/; " +
           kNoProxyEnv + "curl -s -p -x http://127.0.0.1:3128 https://blocked.example/; echo connect=$?; " +
           kNoProxyEnv + "curl -s --socks5-hostname 127.0.0.1:1080 " + url + "; echo socks=$?; " + "curl -s " + url +
           "; echo direct=$?"},
      {"--net-log", log});
  CHECK(o.out.find("403\n403\n") == 0);
  CHECK(o.out.find("connect=56") != std::string::npos);  // CONNECT tunnel failed, response 403
  CHECK(o.out.find("socks=97") != std::string::npos);    // SOCKS5 request refused
  CHECK(o.out.find("direct=7") != std::string::npos);    // not forwarded: nothing listens inside
  CHECK(server.hits() == 0);
  std::string lines = read_file(log);
  CHECK(count(lines, "\"allowed\": false") == 4);
  CHECK(lines.find("\"reason\": \"no rule allows blocked.example:443\"") != std::string::npos);
  CHECK(lines.find("\"protocol\": \"socks5\"") != std::string::npos);
}

TEST_CASE("UDP reaches nothing, raw sockets and DNS fail inside") {
  Sandbox sb;
  int udp_port = 0;
  int u = loopback_socket(SOCK_DGRAM, udp_port);
  auto sent = sb.probe({"udp", "127.0.0.1", std::to_string(udp_port)});
  CHECK(trim(sent.out) == "ok");  // sent... to the jail's own loopback
  pollfd p{u, POLLIN, 0};
  CHECK(::poll(&p, 1, 300) == 0);  // and nothing arrived on the host
  ::close(u);
  CHECK(trim(sb.probe({"syscall", "41", "2", "3", "1"}).out) == "EPERM");  // socket(AF_INET, SOCK_RAW, ICMP)
  auto dns = sb.probe({"resolve", "example.com"});
  CHECK(dns.status == 1);
  CHECK(dns.out.find("failed") == 0);
}

TEST_CASE("an allowed name that resolves to a refused range is refused, even when named exactly") {
  Sandbox sb;
  HttpServer server("internal-service\n");
  std::string hosts = sb.base + "/hosts";
  std::string log = sb.outside + "/net.jsonl";
  write_file(hosts, "127.0.0.1 localhost\n127.0.0.1 svc.pjtest.example\n10.0.0.7 db.pjtest.example\n");
  // Resolution happens in the supervisor, outside the jail: give it our
  // own /etc/hosts in a mount namespace of this test.
  auto in_ns = [&](const std::string& rule, const std::string& url) {
    std::string cmd =
        "mount --bind \"$0\" /etc/hosts && exec \"$1\" -q -w \"$2\" --net-log \"$4\" --allow-net \"$3\" -- " +
        kNoProxyEnv + "curl -s -w ' %{http_code}' -x http://127.0.0.1:3128 " + url;
    std::vector<std::string> argv{"/usr/bin/unshare"};
    if (::getuid() != 0) argv.push_back("-Ur");
    argv.insert(argv.end(), {"-m", "/bin/sh", "-c", cmd, hosts, pi_jail(), sb.ws, rule, log});
    return run(argv, {"HOME=" + sb.home});
  };
  std::string port = server.port();
  auto wild = in_ns("*.pjtest.example:" + port, "http://svc.pjtest.example:" + port + "/");
  CHECK(wild.out.find("svc.pjtest.example: an address it stands for is in a range the rule does not reach") !=
        std::string::npos);
  CHECK(wild.out.find("127.0.0.1") == std::string::npos);  // the jail is not told the host's DNS answer
  CHECK(wild.out.find(" 403") != std::string::npos);
  auto priv = in_ns("*.pjtest.example:" + port, "http://db.pjtest.example:" + port + "/");
  CHECK(priv.out.find(" 403") != std::string::npos);
  auto exact = in_ns("svc.pjtest.example:" + port, "http://svc.pjtest.example:" + port + "/");
  CHECK(exact.out.find(" 403") != std::string::npos);
  CHECK(server.hits() == 0);
  std::string lines = read_file(log);
  CHECK(count(lines, "resolves to 127.0.0.1, loopback (127.0.0.0/8)") == 2);
  CHECK(count(lines, "resolves to 10.0.0.7, private (10.0.0.0/8)") == 1);
}

TEST_CASE("if the network filter cannot start, the command never starts: 125, naming the step") {
  Sandbox sb;
  std::string ran = sb.ws + "/ran";
  auto o = sb.jail({"/usr/bin/touch", ran}, {"--test-fail-network-filter"});
  CHECK(o.status == 125);
  CHECK(o.err.find("step: start the network filter: failing on purpose") != std::string::npos);
  CHECK_FALSE(exists(ran));  // init waits for the filter before it forks the command
}
