// Pi's login callbacks in real jails (supervisor/login_callbacks.h): a
// server the jail starts on one of the pi profile's callback ports
// (53692: Anthropic's) answers on the host's loopback at that port while
// it listens, and no longer once it stopped; a server on any other port
// is never served; a host port that is taken is said in one line, and
// the run goes on.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"
#include "text.h"

using namespace pj::test;

namespace {

constexpr int kAnthropic = 53692;  // anthropic.js's CALLBACK_PORT
constexpr int kOpenAI = 1455;      // openai-codex.js's and openai-chatgpt.js's

// A server in the jail on ADDRESS at each PORT, serving the workspace:
// it writes `ready` once listening, closes its sockets when the test
// writes `stop` (then writes `stopped`), and ends when it writes `done`.
const char* kServer =
    "import http.server, os, socket, sys, threading, time\n"
    "addr = sys.argv[1]\n"
    "class S(http.server.ThreadingHTTPServer):\n"
    "    address_family = socket.AF_INET6 if ':' in addr else socket.AF_INET\n"
    "servers = [S((addr, int(p)), http.server.SimpleHTTPRequestHandler) for p in sys.argv[2:]]\n"
    "for s in servers: threading.Thread(target=s.serve_forever, daemon=True).start()\n"
    "open('ready', 'w').close()\n"
    "while not os.path.exists('stop') and not os.path.exists('done'): time.sleep(0.05)\n"
    "for s in servers: s.shutdown(); s.server_close()\n"
    "open('stopped', 'w').close()\n"
    "while not os.path.exists('done'): time.sleep(0.05)\n";

// pi-jail [-q] -w ws -- python3 server.py ADDRESS PORT..., its stderr
// into `err` (the run's own lines), in the background.
pid_t start_server(const Sandbox& sb, const std::string& address, const std::vector<int>& ports, bool quiet = true,
                   const std::string& err = "/dev/null") {
  write_file(sb.ws + "/server.py", kServer);
  std::string command =
      "exec \"$0\" " + std::string(quiet ? "-q " : "") + "-w \"$1\" -- /usr/bin/python3 server.py " + address;
  for (int p : ports) command += " " + std::to_string(p);
  command += " 2>\"$2\"";
  return spawn({"/usr/bin/env", "-C", sb.ws, "/bin/sh", "-c", command, pi_jail(), sb.ws, err}, {"HOME=" + sb.home});
}

// curl's exit status and output for the workspace's page.txt at HOST:PORT
// of the host (7: nothing listens there).
Outcome curl(const std::string& host, int port) {
  return run(
      {"/usr/bin/curl", "-gsS", "--max-time", "10", "http://" + host + ":" + std::to_string(port) + "/page.txt"});
}

// A listening socket on the host's loopback at `port` (-1 when taken).
int listen_on(bool v6, int port) {
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    a->sin6_port = htons(static_cast<std::uint16_t>(port));
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the host's port is free now (nothing of the host, nor a jail
// through pi-jail, listens there).
bool host_port_free(int port) {
  int fd = listen_on(false, port);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

bool host_has_ipv6_loopback() {
  int fd = listen_on(true, 0);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

int free_port() {
  int port = 0;
  ::close(loopback_socket(SOCK_STREAM, port));
  return port;
}

}  // namespace

TEST_CASE(
    "a server the jail starts on a login callback port answers on the host's 127.0.0.1 at that port while it "
    "listens, and not once it stopped") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kAnthropic), "something on this host listens on 127.0.0.1:53692 already");
  write_file(sb.ws + "/page.txt", "the-jail-s-callback\n");
  pid_t pid = start_server(sb, "127.0.0.1", {kAnthropic});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  // Served once pi-jail has looked at the jail's sockets (a few times a
  // second; the guard is not a timing assertion).
  CHECK(eventually([&] {
    auto o = curl("127.0.0.1", kAnthropic);
    return o.status == 0 && o.out == "the-jail-s-callback\n";
  }));
  write_file(sb.ws + "/stop", "");
  REQUIRE(eventually([&] { return exists(sb.ws + "/stopped"); }));
  // The jail no longer listens: the host's port closes, and is free.
  CHECK(eventually([&] { return curl("127.0.0.1", kAnthropic).status == 7; }));
  CHECK(host_port_free(kAnthropic));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

TEST_CASE("a server the jail starts on a port outside the login callbacks is never served on the host") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kAnthropic), "something on this host listens on 127.0.0.1:53692 already");
  write_file(sb.ws + "/page.txt", "only-the-callback\n");
  const int other = free_port();
  pid_t pid = start_server(sb, "127.0.0.1", {kAnthropic, other});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  // The callback port is served: pi-jail has looked at the jail's sockets,
  // the other port among them.
  REQUIRE(eventually([&] { return curl("127.0.0.1", kAnthropic).status == 0; }));
  CHECK(curl("127.0.0.1", other).status == 7);
  CHECK(curl("[::1]", other).status == 7);
  CHECK(host_port_free(other));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

TEST_CASE("a server the jail starts on ::1 at a login callback port answers on the host's ::1 there") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kOpenAI), "something on this host listens on 127.0.0.1:1455 already");
  write_file(sb.ws + "/page.txt", "served-on-v6\n");
  pid_t pid = start_server(sb, "::1", {kOpenAI});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  if (host_has_ipv6_loopback()) {
    CHECK(eventually([&] {
      auto o = curl("[::1]", kOpenAI);
      return o.status == 0 && o.out == "served-on-v6\n";
    }));
  }
  // The jail listens on ::1 only: the host's 127.0.0.1 is not taken for it.
  CHECK(host_port_free(kOpenAI));
  write_file(sb.ws + "/stop", "");
  REQUIRE(eventually([&] { return exists(sb.ws + "/stopped"); }));
  CHECK(eventually([&] { return curl("[::1]", kOpenAI).status == 7; }));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

TEST_CASE("a login callback port the host already uses is said in one line, and the run goes on") {
  Sandbox sb;
  const int busy = listen_on(false, kAnthropic);
  REQUIRE_MESSAGE(busy >= 0, "something on this host listens on 127.0.0.1:53692 already");
  write_file(sb.ws + "/page.txt", "not-reachable\n");
  const std::string err = sb.outside + "/err.txt";
  pid_t pid = start_server(sb, "127.0.0.1", {kAnthropic}, false, err);
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  const std::string line =
      "pi-jail: warning: login callback 127.0.0.1:53692 (Anthropic (Claude Pro/Max)): the "
      "host's port is in use";
  REQUIRE_MESSAGE(eventually([&] { return read_file(err).find(line) != std::string::npos; }), read_file(err));
  // Looked at again and again while the jail listens (a few looks more
  // before it stops): said once.
  ::usleep(1000 * 1000);
  write_file(sb.ws + "/stop", "");
  REQUIRE(eventually([&] { return exists(sb.ws + "/stopped"); }));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
  ::close(busy);
  const std::string said = read_file(err);
  CAPTURE(said);
  CHECK(count(said, "login callback") == 1);
  CHECK(said.find("paste the redirect URL into Pi instead: that still works") != std::string::npos);
}
