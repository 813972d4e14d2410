// The network filter in a process of its own: pi-jail exec'd afresh as
// `--network-filter` with a control socket as fd 3 and an empty
// environment, configured over that socket; it relays what its rules
// allow, asks this side (the supervisor's part) for the names it needs,
// and tells it every decision. Here the test plays the supervisor.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <optional>
#include <sstream>
#include <string>
#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>
#include <variant>

#include "filterlink/channel.h"
#include "harness.h"

using namespace pj;
using namespace pj::filterlink;

namespace {

struct FilterProcess {
  pid_t pid = -1;
  util::UniqueFd sock;

  FilterProcess() {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    sock.reset(sp[0]);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (::dup2(sp[1], 3) != 3) ::_exit(126);  // dup2 leaves fd 3 open across exec
      char* const argv[] = {const_cast<char*>("pi-jail-filter"), const_cast<char*>("--network-filter"), nullptr};
#ifdef PJ_SANITIZED
      // LeakSanitizer's exit-time check needs what the lock-down forbids
      // (a tracer thread, /proc): sanitizer builds only.
      char leak_check_off[] = "ASAN_OPTIONS=detect_leaks=0";
      char* const envp[] = {leak_check_off, nullptr};
#else
      char* const envp[] = {nullptr};
#endif
      ::execve(test::pi_jail().c_str(), argv, envp);
      ::_exit(127);
    }
    ::close(sp[1]);
  }
  ~FilterProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      test::wait_status(pid);
    }
  }

  void send(FromSupervisor m) { REQUIRE(send_message(sock.get(), m).ok()); }
  // The next message, within a guard against a hung filter (not a timing).
  FromFilter next() {
    pollfd p{sock.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20000) == 1);
    auto rec = receive_record(sock.get());
    REQUIRE(rec.ok());
    REQUIRE(rec->has_value());
    auto m = decode_from_filter((*rec)->bytes, std::move((*rec)->fds));
    REQUIRE_MESSAGE(m.ok(), m.error().message());
    return std::move(*m);
  }
  void configure(const std::string& allow) {
    send(Settings{});
    send(RuleMessage{RuleMessage::Kind::allow, allow, "test", net::PrivateRanges::refused});
    send(ConfigDone{});
    auto ready = next();
    REQUIRE(std::holds_alternative<Ready>(ready));
    CHECK(std::get<Ready>(ready).ca_pem.empty());  // nothing bound: no CA
  }
  // An HTTP proxy listener served by the filter; its port.
  int http_listener() {
    int port = 0;
    ListenerMessage l;
    l.kind = ListenerMessage::Kind::http;
    l.fd.reset(test::loopback_socket(SOCK_STREAM, port));
    send(std::move(l));
    return port;
  }
  int stop() {
    send(Stop{});
    int status = test::wait_status(pid);
    pid = -1;
    return status;
  }
};

// Send `request` to 127.0.0.1:`port` and read until the peer closes.
std::string through_proxy(int port, const std::string& request) {
  util::UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(c.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::write(c.get(), request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  while (true) {
    pollfd p{c.get(), POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) break;  // a guard, not a timing
    ssize_t n = ::read(c.get(), buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

TEST_CASE("the filter process relays what its rules allow and tells the supervisor its decision") {
  test::HttpServer server("served by the host\n");
  FilterProcess f;
  f.configure("127.0.0.1:" + server.port());
  int proxy = f.http_listener();
  auto reply =
      through_proxy(proxy, "GET http://127.0.0.1:" + server.port() + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + server.port() +
                               "\r\nConnection: close\r\n\r\n");
  CHECK(reply.find("served by the host") != std::string::npos);
  auto m = f.next();
  REQUIRE(std::holds_alternative<DecisionMessage>(m));
  const auto& d = std::get<DecisionMessage>(m).decision;
  CHECK(d.allowed);
  CHECK(d.host == "127.0.0.1");
  CHECK(std::to_string(d.port) == server.port());
  CHECK(d.protocol == netproxy::Protocol::http);
  CHECK(f.stop() == 0);
}

TEST_CASE("the filter process asks the supervisor for a name and checks the answer against its rules") {
  FilterProcess f;
  f.configure("db.example.test:5432");
  int proxy = f.http_listener();
  std::string reply;
  std::thread client([&] { reply = through_proxy(proxy, "CONNECT db.example.test:5432 HTTP/1.1\r\n\r\n"); });
  auto q = f.next();
  REQUIRE(std::holds_alternative<NameQuestion>(q));
  CHECK(std::get<NameQuestion>(q).host == "db.example.test");
  // A private address for a rule that does not reach private ranges.
  f.send(NameAnswer{std::get<NameQuestion>(q).id, {*net::parse_ip("10.1.2.3")}, ""});
  auto m = f.next();
  client.join();
  CHECK(reply.starts_with("HTTP/1.1 403"));
  REQUIRE(std::holds_alternative<DecisionMessage>(m));
  const auto& d = std::get<DecisionMessage>(m).decision;
  CHECK_FALSE(d.allowed);
  CHECK(d.host == "db.example.test");
  CHECK(d.reason.find("10.1.2.3") != std::string::npos);
  CHECK(f.stop() == 0);
}

TEST_CASE("a filter process given a malformed configuration says why and exits 125") {
  FilterProcess f;
  f.send(RuleMessage{RuleMessage::Kind::allow, "example.com", "test", net::PrivateRanges::refused});
  auto m = f.next();
  REQUIRE(std::holds_alternative<Failure>(m));
  CHECK(std::get<Failure>(m).step == "receive the configuration");
  CHECK(std::get<Failure>(m).message == "configuration before the settings");
  CHECK(test::wait_status(f.pid) == 125);
  f.pid = -1;
}

TEST_CASE("--network-filter without its control socket is refused with a sentence, exit 2") {
  auto out = test::run({test::pi_jail(), "--network-filter"});
  CHECK(out.status == 2);
  CHECK(out.err.find("is started by pi-jail itself, with its control socket as fd 3") != std::string::npos);
}

// --- the filter process of a real run ---

namespace {

// The lines the supervisor prints for a test build's filter probe.
std::vector<std::string> probe_lines(const std::string& err) {
  std::vector<std::string> out;
  const std::string tag = "network filter probe: ";
  for (size_t at = 0; (at = err.find(tag, at)) != std::string::npos;) {
    at += tag.size();
    out.push_back(err.substr(at, err.find('\n', at) - at));
  }
  return out;
}

// The filter process of the run whose command line holds `marker`, or -1.
pid_t filter_of_run(const std::string& marker) {
  for (pid_t pid : test::host_processes_with("pi-jail-filter --network-filter")) {
    std::string status = test::read_file("/proc/" + std::to_string(pid) + "/status");
    auto at = status.find("\nPPid:\t");
    if (at == std::string::npos) continue;
    std::string parent = test::read_file("/proc/" + std::to_string(std::stoi(status.substr(at + 7))) + "/cmdline");
    if (parent.find(marker) != std::string::npos) return pid;
  }
  return -1;
}

// The soft limit on the line of /proc/PID/limits that starts with `name`.
std::string soft_limit(const std::string& limits, const std::string& name) {
  std::istringstream in(limits);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(name + " ")) continue;
    std::istringstream rest(line.substr(name.size()));
    std::string soft;
    rest >> soft;
    return soft;
  }
  return "";
}

std::string status_field(const std::string& status, const std::string& name) {
  auto at = status.find("\n" + name + ":\t");
  if (at == std::string::npos) return "";
  at += name.size() + 3;
  return status.substr(at, status.find('\n', at) - at);
}

}  // namespace

TEST_CASE(
    "the filter process of a run, once locked down, can open no file, exec, fork, ptrace or signal the supervisor; it "
    "can grow its relay pipes") {
  test::Sandbox sb;
  test::HttpServer server;
  auto o = sb.jail({"/bin/true"}, {"--allow-net", "127.0.0.1:" + server.port(), "--test-filter-probe"});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  auto lines = probe_lines(o.err);
  CHECK(lines.size() == 10);
  for (const char* what :
       {"open /etc/passwd", "open the home directory", "open /", "execve /bin/true", "fork a process",
        "ptrace the supervisor", "kill the supervisor", "read the supervisor's memory", "inherit an environment"}) {
    CAPTURE(what);
    bool seen = false;
    for (const auto& l : lines)
      if (l.starts_with(what)) {
        seen = true;
        CHECK(l.find("succeeded") == std::string::npos);
      }
    CHECK(seen);
  }
  // What the relay needs is still allowed: a bulk transfer's larger pipe.
  bool grew = false;
  for (const auto& l : lines) grew = grew || l == "grow a relay pipe: succeeded";
  CHECK(grew);
}

TEST_CASE("the filter process runs with seccomp, no_new_privs, no capabilities and an empty environment") {
  test::Sandbox sb;
  test::HttpServer server;
  std::string report = sb.outside + "/r.json";
  test::Outcome o;
  std::thread run([&] {
    o = sb.jail({"/bin/sh", "-c", "touch started; while [ ! -e /tmp/go ]; do sleep 0.05; done"},
                {"--allow-net", "127.0.0.1:" + server.port(), "--report", report, "--timeout", "30s"});
  });
  // The command starts only once the filter said it is ready, which it
  // says after its lock-down.
  for (int i = 0; i < 400 && !test::exists(sb.ws + "/started"); ++i) ::usleep(50000);  // a guard, not a timing
  pid_t filter = filter_of_run(report);
  std::string status = filter > 0 ? test::read_file("/proc/" + std::to_string(filter) + "/status") : "";
  std::string limits = filter > 0 ? test::read_file("/proc/" + std::to_string(filter) + "/limits") : "";
  std::string environ_text;
  bool environ_read = false;
  if (filter > 0) {
    // Not dumpable: only a reader allowed to ptrace it (root) may read it.
    environ_read = ::access(("/proc/" + std::to_string(filter) + "/environ").c_str(), R_OK) == 0 && ::geteuid() == 0;
    if (environ_read) environ_text = test::read_file("/proc/" + std::to_string(filter) + "/environ");
  }
  // Let the command end: the jail's /tmp is its own, so end it by timeout
  // only as a last resort; stop it through the signal path instead.
  for (pid_t p : test::host_processes_with(test::pi_jail()))
    if (test::read_file("/proc/" + std::to_string(p) + "/cmdline").find(report) != std::string::npos)
      ::kill(p, SIGTERM);
  run.join();
  REQUIRE(filter > 0);
  CHECK(status_field(status, "Seccomp") == "2");
  CHECK(status_field(status, "NoNewPrivs") == "1");
  CHECK(status_field(status, "CapEff") == "0000000000000000");
  CHECK(status_field(status, "CapPrm") == "0000000000000000");
  CHECK(status_field(status, "CapInh") == "0000000000000000");
  CHECK(status_field(status, "CapAmb") == "0000000000000000");
  // Dropping from the bounding set needs CAP_SETPCAP, which only root's
  // filter has; an unprivileged one has no capability to gain it back
  // (no_new_privs, nothing permitted).
  if (::geteuid() == 0) CHECK(status_field(status, "CapBnd") == "0000000000000000");
  if (environ_read) CHECK(environ_text.empty());
  CAPTURE(limits);
  CHECK(soft_limit(limits, "Max core file size") == "0");
  CHECK(soft_limit(limits, "Max file size") == "0");
  CHECK(soft_limit(limits, "Max locked memory") == "0");
#ifndef PJ_SANITIZED
  // Its heap and private mappings (sanitizer builds map terabytes of
  // shadow memory: without).
  const std::string data = soft_limit(limits, "Max data size");
  CHECK(data != "unlimited");
  CHECK(!data.empty());
#endif
}

namespace {

// Whether `needle` is anywhere in the readable memory of `pid` (its
// mappings up to 64 MiB each: the heap and what the allocator mapped),
// or nullopt when its memory cannot be read.
std::optional<bool> memory_holds(pid_t pid, const std::string& needle) {
  const std::string dir = "/proc/" + std::to_string(pid);
  int mem = ::open((dir + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (mem < 0) return std::nullopt;
  std::istringstream maps(test::read_file(dir + "/maps"));
  bool found = false, read_any = false;
  for (std::string line; !found && std::getline(maps, line);) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) != 3 || perms[0] != 'r') continue;
    if (end - start > (64UL << 20)) continue;
    std::string buf(end - start, '\0');
    ssize_t n = ::pread(mem, buf.data(), buf.size(), static_cast<off_t>(start));
    if (n <= 0) continue;
    read_any = true;
    buf.resize(static_cast<size_t>(n));
    found = buf.find(needle) != std::string::npos;
  }
  ::close(mem);
  if (!read_any) return std::nullopt;
  return found;
}

}  // namespace

TEST_CASE("a credential run's filter process holds the bound secret and nothing else of the host's") {
  test::Sandbox sb;
  test::HttpServer server;
  std::string report = sb.outside + "/r.json";
  const std::string real = "sk-ant-api03-BOUNDREAL" + test::unique_token() + test::unique_token();
  const std::string ph = "sk-ant-api03-BOUNDPH" + test::unique_token() + test::unique_token();
  // In the supervisor's environment (and memory), never passed to the
  // jail nor bound: the filter, exec'd afresh, must not have it.
  const std::string host_secret = "HOSTONLYSECRET" + test::unique_token() + test::unique_token();
  test::Outcome o;
  std::thread run([&] {
    o = sb.jail({"/bin/sh", "-c", "touch started; while [ ! -e /tmp/go ]; do sleep 0.05; done"},
                {"--allow-net", "127.0.0.1:" + server.port(), "--report", report, "--timeout", "30s"}, "",
                {"PJ_TEST_BIND=TEST_KEY=" + ph + "=" + real + "@127.0.0.1:1\n", "PJ_HOST_ONLY=" + host_secret});
  });
  for (int i = 0; i < 400 && !test::exists(sb.ws + "/started"); ++i) ::usleep(50000);  // a guard, not a timing
  pid_t filter = filter_of_run(report);
  std::optional<bool> holds_real, holds_host, supervisor_holds_host;
  if (filter > 0) {
    holds_real = memory_holds(filter, real);
    holds_host = memory_holds(filter, host_secret);
    const std::string st = test::read_file("/proc/" + std::to_string(filter) + "/status");
    supervisor_holds_host = memory_holds(std::stoi(status_field(st, "PPid")), host_secret);
  }
  for (pid_t p : test::host_processes_with(test::pi_jail()))
    if (test::read_file("/proc/" + std::to_string(p) + "/cmdline").find(report) != std::string::npos)
      ::kill(p, SIGTERM);
  run.join();
  CAPTURE(o.err);
  REQUIRE(filter > 0);
  if (::geteuid() == 0) {
    // Root may read it (ptrace rights): the bound value is there (so the
    // scan reads its memory), the host's secret is not, though the
    // supervisor that started it holds it (a fork would have kept it).
    REQUIRE(holds_real.has_value());
    CHECK(*holds_real);
    CHECK_FALSE(*holds_host);
    REQUIRE(supervisor_holds_host.has_value());
    CHECK(*supervisor_holds_host);
  } else {
    // Not dumpable: the user's other processes cannot read it at all.
    CHECK_FALSE(holds_real.has_value());
    CHECK_FALSE(holds_host.has_value());
  }
}

TEST_CASE("a filter process that aborts mid-request ends the run with 125; the jail reaches nothing after it") {
  // A plain run, and one with a credential bound (its filter holds the
  // run's CA and the token exchange).
  for (bool with_credential : {false, true}) {
    CAPTURE(with_credential);
    test::Sandbox sb;
    test::HttpServer server;
    const std::string agent = sb.home + "/.pi/agent";
    std::filesystem::create_directories(agent);
    const std::string auth = "{\"note\": \"left as it was\"}\n";
    test::write_file(agent + "/auth.json", auth);
    const std::string url = "http://aborts.example.test:" + server.port() + "/";
    std::vector<std::string> env;
    if (with_credential)
      env.push_back("PJ_TEST_BIND=TEST_KEY=sk-ant-api03-PH" + test::unique_token() + "=sk-ant-api03-REAL" +
                    test::unique_token() + "@127.0.0.1:1\n");
    auto o = sb.jail({"/bin/sh", "-c",
                      "env -u NO_PROXY -u no_proxy curl -s -x http://127.0.0.1:3128 " + url +
                          "; curl -s http://127.0.0.1:" + server.port() + "/; echo still-running"},
                     {"--allow-net", "aborts.example.test:" + server.port(), "--allow-net",
                      "127.0.0.1:" + server.port(), "--test-filter-misbehave", "abort"},
                     "", env);
    CAPTURE(o.err);
    CAPTURE(o.out);
    CHECK(o.status == 125);
    CHECK(o.err.find("the network filter process was killed by signal 6 (ABRT)") != std::string::npos);
    CHECK(o.err.find("the jail was stopped") != std::string::npos);
    CHECK(server.hits() == 0);
    CHECK(test::read_file(agent + "/auth.json") == auth);
  }
}

namespace {

// A run whose filter process misbehaves as `what` once it is ready
// (--test-filter-misbehave) must end with 125 and `message`, before its
// command (which would take 20 s) could finish.
void check_misbehaving_filter_ends_run(const std::string& what, const std::string& message,
                                       const std::vector<std::string>& more = {}) {
  test::Sandbox sb;
  test::HttpServer server;
  std::vector<std::string> opts{"--allow-net", "127.0.0.1:" + server.port(), "--test-filter-misbehave", what};
  opts.insert(opts.end(), more.begin(), more.end());
  auto o = sb.jail({"/bin/sh", "-c", "sleep 20; echo ran-on"}, opts);
  CAPTURE(o.err);
  CHECK(o.status == 125);
  CHECK(o.err.find(message) != std::string::npos);
  CHECK(o.out.find("ran-on") == std::string::npos);
}

}  // namespace

TEST_CASE("a filter process that stops reading its control socket is killed: the run ends with 125, never hangs") {
  // It asks for names (localhost: answered from /etc/hosts, at once) and
  // reads no answer; the supervisor's sends then find the socket full.
  check_misbehaving_filter_ends_run("stop-reading", "the network filter process did not read its control socket");
}

TEST_CASE(
    "a filter process that asks for a socket in the jail of a run that publishes no port and serves no login "
    "callback is killed: 125") {
  // Each such socket forks the supervisor into the jail's namespaces:
  // only published ports and login callbacks need one. A profile of its
  // own, which names no login callback (the pi profile's adapter does),
  // and gives the command its shell: with an empty view the command's
  // exec failed (127) as fast as the filter's request ended the run
  // (125), and either came first.
  test::Sandbox sb;
  const std::string profile = sb.base + "/plain.toml";
  test::write_file(profile,
                   "# no login callbacks\n[filesystem]\nsystem = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\"]\n");
  check_misbehaving_filter_ends_run("jail-socket",
                                    "asked for a socket in the jail, and this run publishes no port and serves no "
                                    "login callback",
                                    {"-p", profile});
}
