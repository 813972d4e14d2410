// Pi's login callbacks in real jails (supervisor/login_callbacks.h): a
// server the jail starts on one of the pi profile's callback ports
// (53692: Anthropic's) answers on the host's loopback at that port while
// it listens, on both 127.0.0.1 and ::1 whichever of them it listens on,
// and no longer once it stopped; a server on any other port is never
// served; a host port that is taken is said in one line, nothing of that
// port is served, and the run goes on.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
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

// pi-jail [-q] -w ws [--report REPORT] -- python3 server.py ADDRESS
// PORT..., its stderr into `err` (the run's own lines), in the background.
pid_t start_server(const Sandbox& sb, const std::string& address, const std::vector<int>& ports, bool quiet = true,
                   const std::string& err = "/dev/null", const std::string& report = "") {
  write_file(sb.ws + "/server.py", kServer);
  std::string command = "exec \"$0\" " + std::string(quiet ? "-q " : "") + "-w \"$1\" " +
                        (report.empty() ? "" : "--report \"$3\" ") + "-- /usr/bin/python3 server.py " + address;
  for (int p : ports) command += " " + std::to_string(p);
  command += " 2>\"$2\"";
  return spawn({"/usr/bin/env", "-C", sb.ws, "/bin/sh", "-c", command, pi_jail(), sb.ws, err, report},
               {"HOME=" + sb.home});
}

// curl's exit status and output for the workspace's page.txt at HOST:PORT
// of the host (7: nothing listens there).
Outcome curl(const std::string& host, int port) {
  return run(
      {"/usr/bin/curl", "-gsS", "--max-time", "10", "http://" + host + ":" + std::to_string(port) + "/page.txt"});
}

// A listening socket on the host's loopback at `port` (-1 when taken,
// with errno as bind(2) or listen(2) left it).
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
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// What binding the host's loopback of that family at `port` gives now: 0
// (it was free; closed again) or bind(2)'s errno (EADDRINUSE: taken).
int bind_error(bool v6, int port) {
  int fd = listen_on(v6, port);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
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

// The report lists what the host served of the jail: the operator's
// published ports and, marked apart, the login callbacks served during
// the run, once each per host address.
TEST_CASE(
    "a login callback port served during the run is in the report's published ports, marked as a login callback") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kAnthropic), "something on this host listens on 127.0.0.1:53692 already");
  write_file(sb.ws + "/page.txt", "the-jail-s-callback\n");
  const std::string report = sb.outside + "/report.json";
  pid_t pid = start_server(sb, "127.0.0.1", {kAnthropic}, true, "/dev/null", report);
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  CHECK(eventually([&] { return curl("127.0.0.1", kAnthropic).status == 0; }));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
  CHECK(validate_report(report).status == 0);
  // Each of policy.published as "KIND HOST_ADDRESS HOST_PORT JAIL_PORT WHY".
  auto o = run({"/usr/bin/python3", "-c",
                "import json, sys\n"
                "for p in json.load(open(sys.argv[1]))['policy']['published']:\n"
                "    print(p['kind'], p['host_address'], p['host_port'], p['jail_port'], p['why'])\n",
                report});
  CAPTURE(o.err);
  CHECK(o.out.find("login callback 127.0.0.1 53692 53692 ") != std::string::npos);
  CHECK(o.out.find("login callback 53692 (Anthropic (Claude Pro/Max))") != std::string::npos);
  CHECK(count(o.out, "\n") == (host_has_ipv6_loopback() ? 2 : 1));
  const bool v6_listed = o.out.find("login callback ::1 53692 53692 ") != std::string::npos;
  CHECK(v6_listed == host_has_ipv6_loopback());
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

// A browser that opens http://localhost:PORT/ may try ::1 or 127.0.0.1
// first, whichever family the jail listens on: while it listens on
// either, the host's port is taken on both, so a login on the host gets
// "in use" rather than binding the other family and losing its redirect
// (code and state) to the jail.
TEST_CASE(
    "a server the jail starts on ::1 only at a login callback port takes the host's 127.0.0.1 there too, and "
    "answers on it, while it listens") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kAnthropic), "something on this host listens on 127.0.0.1:53692 already");
  const bool v6 = host_has_ipv6_loopback();
  if (v6) REQUIRE_MESSAGE(bind_error(true, kAnthropic) == 0, "something on this host listens on [::1]:53692 already");
  write_file(sb.ws + "/page.txt", "served-from-v6\n");
  pid_t pid = start_server(sb, "::1", {kAnthropic});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  // The host's 127.0.0.1 reaches the jail's ::1.
  CHECK(eventually([&] {
    auto o = curl("127.0.0.1", kAnthropic);
    return o.status == 0 && o.out == "served-from-v6\n";
  }));
  CHECK(bind_error(false, kAnthropic) == EADDRINUSE);
  if (v6) {
    CHECK(eventually([&] {
      auto o = curl("[::1]", kAnthropic);
      return o.status == 0 && o.out == "served-from-v6\n";
    }));
    CHECK(bind_error(true, kAnthropic) == EADDRINUSE);
  }
  write_file(sb.ws + "/stop", "");
  REQUIRE(eventually([&] { return exists(sb.ws + "/stopped"); }));
  // The jail no longer listens: both of the host's ports are free again.
  CHECK(eventually([&] { return bind_error(false, kAnthropic) == 0; }));
  if (v6) CHECK(eventually([&] { return bind_error(true, kAnthropic) == 0; }));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

TEST_CASE(
    "a server the jail starts on 127.0.0.1 only at a login callback port takes the host's ::1 there too, and "
    "answers on it, while it listens") {
  Sandbox sb;
  REQUIRE_MESSAGE(host_port_free(kOpenAI), "something on this host listens on 127.0.0.1:1455 already");
  // A host without ::1 has no [::1]:1455 for a browser to try: the case
  // is then the first test's.
  const bool v6 = host_has_ipv6_loopback();
  if (v6) REQUIRE_MESSAGE(bind_error(true, kOpenAI) == 0, "something on this host listens on [::1]:1455 already");
  write_file(sb.ws + "/page.txt", "served-from-v4\n");
  pid_t pid = start_server(sb, "127.0.0.1", {kOpenAI});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  CHECK(eventually([&] {
    auto o = curl("127.0.0.1", kOpenAI);
    return o.status == 0 && o.out == "served-from-v4\n";
  }));
  if (v6) {
    // The host's ::1 reaches the jail's 127.0.0.1.
    CHECK(eventually([&] {
      auto o = curl("[::1]", kOpenAI);
      return o.status == 0 && o.out == "served-from-v4\n";
    }));
    CHECK(bind_error(true, kOpenAI) == EADDRINUSE);
  }
  write_file(sb.ws + "/stop", "");
  REQUIRE(eventually([&] { return exists(sb.ws + "/stopped"); }));
  CHECK(eventually([&] { return bind_error(false, kOpenAI) == 0; }));
  if (v6) CHECK(eventually([&] { return bind_error(true, kOpenAI) == 0; }));
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

// The other order: a login on the host holds 127.0.0.1 first. Serving
// the host's ::1 for the jail would hand the jail that login's redirect
// from a browser that tries ::1 first: nothing of the port is served.
TEST_CASE(
    "while the host's 127.0.0.1 is taken at a login callback port, a server the jail starts on ::1 there is not "
    "served on the host's ::1 either") {
  Sandbox sb;
  const int busy = listen_on(false, kOpenAI);
  REQUIRE_MESSAGE(busy >= 0, "something on this host listens on 127.0.0.1:1455 already");
  const bool v6 = host_has_ipv6_loopback();
  if (v6) REQUIRE_MESSAGE(bind_error(true, kOpenAI) == 0, "something on this host listens on [::1]:1455 already");
  write_file(sb.ws + "/page.txt", "not-reachable\n");
  const std::string err = sb.outside + "/err.txt";
  pid_t pid = start_server(sb, "::1", {kOpenAI}, false, err);
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  const std::string line =
      "pi-jail: warning: login callback 127.0.0.1:1455 (OpenAI (ChatGPT Plus/Pro, Codex; Sign in with ChatGPT)): the "
      "host's port is in use";
  REQUIRE_MESSAGE(eventually([&] { return read_file(err).find(line) != std::string::npos; }), read_file(err));
  // Looked at again a few times while the jail listens: ::1 stays the host's.
  for (int i = 0; i < 4; ++i) {
    ::usleep(250 * 1000);
    if (v6) CHECK(bind_error(true, kOpenAI) == 0);
    CHECK(curl("[::1]", kOpenAI).status == 7);
  }
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
  ::close(busy);
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

// Under a program that holds the terminal raw (Pi's TUI: pi-jail then
// passes output unprocessed), the line still ends at the left margin:
// what the program prints next starts there, no staircase.
TEST_CASE("the port-taken line printed while the program holds the terminal ends with a carriage return") {
  Sandbox sb;
  const int busy = listen_on(false, kAnthropic);
  REQUIRE_MESSAGE(busy >= 0, "something on this host listens on 127.0.0.1:53692 already");
  write_file(sb.ws + "/taken.py",
             "import os, socket, time\n"
             "s = socket.socket()\n"
             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "s.bind(('127.0.0.1', 53692))\n"
             "s.listen()\n"
             "while not os.path.exists('stop'): time.sleep(0.05)\n"
             "print('after-the-warning', flush=True)\n");
  Tmux t("env PS1='outer$ ' HOME=" + sb.home + " bash --norc --noprofile", 100, 30);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + sb.ws + " && " + pi_jail() + " -w " + sb.ws + " -- /usr/bin/python3 taken.py; echo done-$((6*7))");
  REQUIRE_MESSAGE(t.wait_for("that still works"), t.screen());
  write_file(sb.ws + "/stop", "");
  REQUIRE_MESSAGE(t.wait_for("done-42"), t.screen());
  const std::string screen = t.screen();
  CAPTURE(screen);
  CHECK(screen.find("\nafter-the-warning") != std::string::npos);
  ::close(busy);
}

// A callback on a port the policy forwards to a host service is not
// served (the filter holds that port in the jail): explain leaves it out
// as the plan does.
TEST_CASE("explain lists no login callback on a port the policy forwards, and every other one") {
  Sandbox sb;
  auto explain = [&](const std::vector<std::string>& opts) {
    std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("explain");
    return run(argv, {"HOME=" + sb.home});
  };
  const std::string openai = "login-callback  host 127.0.0.1:1455 -> jail";
  auto plain = explain({});
  CAPTURE(plain.out);
  CHECK(plain.status == 0);
  CHECK(plain.out.find(openai) != std::string::npos);
  auto forwarded = explain({"--allow-net", "127.0.0.1:1455"});
  CAPTURE(forwarded.out);
  CHECK(forwarded.status == 0);
  CHECK(forwarded.out.find("127.0.0.1:1455") != std::string::npos);  // the forward itself
  CHECK(forwarded.out.find(openai) == std::string::npos);
  CHECK(forwarded.out.find("login-callback  host 127.0.0.1:1456 -> jail") != std::string::npos);
  CHECK(forwarded.out.find("login-callback  host 127.0.0.1:53692 -> jail") != std::string::npos);
}
