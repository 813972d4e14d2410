// Operator-only grants past the jail's walls, in real jails: an agent
// socket ([filesystem] sockets) and a published port (--publish). Each is
// shown to work with the grant and to be refused by the kernel (nothing
// to connect to) without it; a project asking for one is refused.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

// pi-jail -q -w ws [extra...] -- args..., with HOME=home and `env`.
Outcome jail_with(const Sandbox& sb, const std::vector<std::string>& extra, const std::vector<std::string>& args,
                  std::vector<std::string> env = {}) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("HOME=" + sb.home);
  return run(argv, env);
}

// An ssh-agent of the test's own, holding one key commented `comment`.
struct Agent {
  std::string sock;
  pid_t pid = -1;
  Agent(const Sandbox& sb, const std::string& comment) : sock(sb.outside + "/agent.sock") {
    pid = spawn({"/bin/sh", "-c", "exec /usr/bin/ssh-agent -D -a \"$0\" >/dev/null", sock});
    REQUIRE(eventually([&] { return exists(sock); }));
    auto key = run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", sb.outside + "/key"});
    REQUIRE(key.status == 0);
    auto add = run({"/usr/bin/ssh-add", "-q", sb.outside + "/key"}, {"SSH_AUTH_SOCK=" + sock});
    REQUIRE(add.status == 0);
  }
  ~Agent() {
    ::kill(pid, SIGTERM);
    wait_status(pid);
  }
};

int free_port() {
  int port = 0;
  int fd = loopback_socket(SOCK_STREAM, port);
  ::close(fd);
  return port;
}

// A server in the jail on ADDRESS:PORT (default 127.0.0.1) serving the workspace; it
// writes `ready` once listening and stops when the test writes `done`.
const char* kServer =
    "import http.server, os, socket, sys, threading, time\n"
    "addr = sys.argv[2] if len(sys.argv) > 2 else '127.0.0.1'\n"
    "class S(http.server.ThreadingHTTPServer):\n"
    "    address_family = socket.AF_INET6 if ':' in addr else socket.AF_INET\n"
    "s = S((addr, int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)\n"
    "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
    "open('ready', 'w').close()\n"
    "while not os.path.exists('done'): time.sleep(0.05)\n";

// pi-jail [extra...] -- python3 server.py JAILPORT [ADDRESS]
std::vector<std::string> server_argv(const Sandbox& sb, const std::vector<std::string>& extra, int jail_port,
                                     const std::string& address = "127.0.0.1") {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (std::string a : {"--", "/usr/bin/python3", "server.py"}) argv.push_back(a);
  argv.push_back(std::to_string(jail_port));
  argv.push_back(address);
  return argv;
}

Outcome curl(int port) {
  return run({"/usr/bin/curl", "-sS", "--max-time", "10", "http://127.0.0.1:" + std::to_string(port) + "/page.txt"});
}

}  // namespace

TEST_CASE("an operator's socket grant reaches ssh-agent inside, with SSH_AUTH_SOCK set; without it, nothing") {
  Sandbox sb;
  Agent agent(sb, "pj-grant-key");
  std::string config = sb.base + "/operator.toml";
  write_file(config, "[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\"]\n");
  auto granted = jail_with(sb, {"--config", config}, {"/bin/sh", "-c", "echo \"sock=$SSH_AUTH_SOCK\"; ssh-add -l"},
                           {"SSH_AUTH_SOCK=" + agent.sock});
  CAPTURE(granted.err);
  CHECK(granted.status == 0);
  CHECK(granted.out.find("sock=" + agent.sock + "\n") == 0);
  CHECK(granted.out.find("pj-grant-key (ED25519)") != std::string::npos);

  // No grant: the variable is not passed, and the path does not exist inside.
  auto bare = jail_with(
      sb, {},
      {"/bin/sh", "-c", "echo \"sock=$SSH_AUTH_SOCK\"; SSH_AUTH_SOCK=" + agent.sock + " ssh-add -l; echo rc=$?"},
      {"SSH_AUTH_SOCK=" + agent.sock});
  CHECK(bare.out.find("sock=\n") == 0);
  CHECK(bare.out.find("pj-grant-key") == std::string::npos);
  CHECK(bare.out.find("rc=2") != std::string::npos);  // ssh-add: cannot connect to the agent
}

TEST_CASE("a project file asking for a socket is refused and reported; the agent stays out of reach") {
  Sandbox sb;
  Agent agent(sb, "pj-project-key");
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\", \"" + agent.sock + "\"]\n");
  std::string report = sb.outside + "/r.json";
  std::vector<std::string> argv{
      "/usr/bin/env", "-C",   sb.ws, pi_jail(), "-w", sb.ws,
      "--report",     report, "--",  "/bin/sh", "-c", "SSH_AUTH_SOCK=" + agent.sock + " ssh-add -l; echo rc=$?"};
  auto o = run(argv, {"HOME=" + sb.home, "SSH_AUTH_SOCK=" + agent.sock});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("pj-project-key") == std::string::npos);
  CHECK(o.out.find("rc=2") != std::string::npos);
  CHECK(o.err.find(".pi/jail.toml:2:12: sockets $SSH_AUTH_SOCK: socket grants are set by operators, not by projects") !=
        std::string::npos);
  CHECK(o.err.find(".pi/jail.toml:2:30: sockets " + agent.sock + ": socket grants are set by operators") !=
        std::string::npos);
  std::string text = read_file(report);
  CHECK(text.find("\"what\": \"sockets " + agent.sock + "\"") != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("a socket grant that is missing, not a socket, or a symlink stops the run (125) naming it") {
  Sandbox sb;
  Agent agent(sb, "pj-bad-key");
  std::string link = sb.outside + "/link.sock";
  std::filesystem::create_symlink(agent.sock, link);
  struct Case {
    std::string path, says;
  } cases[] = {
      {sb.outside + "/gone.sock", "no such socket"},
      {sb.outside + "/secret", "not a unix socket"},
      {sb.outside, "not a unix socket"},
      {link, "a symlink (to " + agent.sock + "); grant the socket itself"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    std::string config = sb.base + "/operator.toml";
    write_file(config, "[filesystem]\nsockets = [\"" + c.path + "\"]\n");
    auto o = jail_with(sb, {"--config", config}, {"/bin/sh", "-c", "echo ran"});
    CHECK(o.status == 125);
    CHECK(o.out.empty());
    CHECK(o.err.find(c.path + ": " + c.says) != std::string::npos);
    CHECK(o.err.find("operator.toml:2:12") != std::string::npos);
  }
}

TEST_CASE("--publish: a server started in the jail answers on the host's loopback; without it, nothing does") {
  Sandbox sb;
  write_file(sb.ws + "/page.txt", "served-from-the-jail\n");
  write_file(sb.ws + "/server.py", kServer);
  const int host_port = free_port(), jail_port = free_port();
  std::string report = sb.outside + "/r.json";
  auto argv = server_argv(
      sb, {"--publish", "127.0.0.1:" + std::to_string(host_port) + ":" + std::to_string(jail_port), "--report", report},
      jail_port);
  pid_t pid = spawn(argv, {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  auto through = curl(host_port);
  CHECK(through.status == 0);
  CHECK(through.out == "served-from-the-jail\n");
  auto direct = curl(jail_port);  // the jail's port is the jail's own, not the host's
  CHECK(direct.status == 7);
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
  std::string text = read_file(report);
  CHECK(text.find("\"protocol\": \"publish\"") != std::string::npos);
  CHECK(text.find("\"host_port\": " + std::to_string(host_port)) != std::string::npos);
  CHECK(validate_report(report).status == 0);
  // After the run the host port is free again: nothing answers.
  CHECK(curl(host_port).status == 7);

  // The same server without --publish: reachable from neither port.
  std::filesystem::remove(sb.ws + "/ready");
  std::filesystem::remove(sb.ws + "/done");
  auto plain = server_argv(sb, {}, jail_port);
  pid = spawn(plain, {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  CHECK(curl(host_port).status == 7);
  CHECK(curl(jail_port).status == 7);
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}

TEST_CASE("--publish refuses a host port in use (125, naming it) and any address but the host's loopback") {
  Sandbox sb;
  int port = 0;
  int busy = loopback_socket(SOCK_STREAM, port);
  auto o = jail_with(sb, {"--publish", std::to_string(port)}, {"/bin/sh", "-c", "echo ran"});
  ::close(busy);
  CHECK(o.status == 125);
  CHECK(o.out.empty());
  CHECK(o.err.find("publish 127.0.0.1:" + std::to_string(port) + ":" + std::to_string(port) +
                   " (--publish): cannot listen on the host's port " + std::to_string(port)) != std::string::npos);
  CHECK(o.err.find("EADDRINUSE") != std::string::npos);
  auto wide = jail_with(sb, {"--publish", "0.0.0.0:" + std::to_string(port)}, {"/bin/sh", "-c", "echo ran"});
  CHECK(wide.status == 125);
  CHECK(wide.out.empty());
  CHECK(wide.err.find("0.0.0.0 is not the host's loopback") != std::string::npos);
  auto proxy = jail_with(sb, {"--publish", std::to_string(port) + ":3128"}, {"/bin/sh", "-c", "echo ran"});
  CHECK(proxy.status == 125);
  CHECK(proxy.err.find("jail port 3128 is the network filter's proxy") != std::string::npos);
}

TEST_CASE("a project file asking for a published port is refused and reported; nothing listens on the host") {
  Sandbox sb;
  const int port = free_port();
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[network]\npublish = [\"" + std::to_string(port) + "\"]\n");
  write_file(sb.ws + "/page.txt", "must-not-be-served\n");
  write_file(sb.ws + "/server.py", kServer);
  std::string report = sb.outside + "/r.json";
  auto argv = server_argv(sb, {"--report", report}, port);
  pid_t pid = spawn(argv, {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  CHECK(curl(port).status == 7);
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
  std::string text = read_file(report);
  CHECK(text.find("\"what\": \"publish 127.0.0.1:" + std::to_string(port) + ":" + std::to_string(port) + "\"") !=
        std::string::npos);
  CHECK(text.find("published ports are set by operators, not by projects") != std::string::npos);
  CHECK(text.find("\"published\": []") != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("--publish reaches a server that listens on the jail's ::1 only (\"localhost\" resolved to ::1)") {
  Sandbox sb;
  write_file(sb.ws + "/page.txt", "served-on-v6\n");
  write_file(sb.ws + "/server.py", kServer);
  const int port = free_port();
  pid_t pid = spawn(server_argv(sb, {"--publish", std::to_string(port)}, port, "::1"), {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  auto o = curl(port);
  CHECK(o.status == 0);
  CHECK(o.out == "served-on-v6\n");
  write_file(sb.ws + "/done", "");
  CHECK(wait_status_guarded(pid) == 0);
}
