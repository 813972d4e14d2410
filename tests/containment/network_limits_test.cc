// The network filter under attack from inside a real jail: a flood of
// refusals stays bounded on the host (log, report, stderr, memory); idle
// connections and reset storms do not starve a legitimate request; a
// half-closed-then-reset tunnel and a full fd table do not make pi-jail
// spin. The attacks are Python scripts run inside the jail against its
// proxy port; the servers are on the host's loopback; names resolve
// through an /etc/hosts of the test's own (a mount namespace it creates).
// Bounds are the documented ones (README "Network").
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"

using namespace pj::test;

namespace {

// Python helpers the attack scripts share; they run inside the jail.
const std::string kPyPrelude = R"(
import os, socket, subprocess, sys, time
WS = os.getcwd()
def phase(name):
    open(os.path.join(WS, name), "w").close()
def wait_for(name):
    for _ in range(6000):
        if os.path.exists(os.path.join(WS, name)):
            return
        time.sleep(0.01)
def proxy():
    return socket.create_connection(("127.0.0.1", 3128), timeout=10)
def read_all(s):
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        out += b
    return out
def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()
def result(text):
    with open(os.path.join(WS, "result"), "a") as f:
        f.write(text + "\n")
def curl(*args):
    r = subprocess.run(["env", "-u", "NO_PROXY", "-u", "no_proxy", "curl", "-sS", "-m", "1"] + list(args),
                       capture_output=True, text=True)
    return (r.stdout + r.stderr).strip()
)";

// pi-jail running a Python script in the background, its stderr to a file:
// the test looks at its process (/proc) while the script waits.
struct Background {
  pid_t pid = -1;
  std::string err_file;
};

Background start_script(const Sandbox& sb, const std::string& script, const std::vector<std::string>& extra,
                        const std::vector<std::string>& prefix = {}) {
  write_file(sb.ws + "/attack.py", kPyPrelude + script);
  Background b;
  b.err_file = sb.outside + "/stderr";
  // sh execs pi-jail: the pid is pi-jail's.
  std::vector<std::string> argv{"/bin/sh", "-c", "cd \"$0\" && f=\"$1\" && shift && exec \"$@\" 2>\"$f\"", sb.ws};
  std::vector<std::string> cmd = prefix;
  cmd.insert(cmd.end(), {pi_jail(), "-w", sb.ws, "--allow-read", probe_dir()});
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.insert(cmd.end(), {"--", "/usr/bin/python3", "attack.py"});
  argv.push_back(b.err_file);
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  b.pid = spawn(argv, {"HOME=" + sb.home});
  return b;
}

// Wait for the script's phase file: a guard of 120 s, not a timing assertion.
bool reached(const Sandbox& sb, const std::string& name) {
  for (int i = 0; i < 1200; ++i) {
    if (exists(sb.ws + "/" + name)) return true;
    ::usleep(100000);
  }
  return false;
}

// /proc/PID/status VmHWM, in KiB (the peak resident set).
long peak_rss_kib(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// utime + stime of PID from /proc/PID/stat, in clock ticks.
long cpu_ticks(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

long file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

// pi-jail's CPU time over one second while the script holds its attack.
double cpu_seconds_over_a_second(pid_t pid) {
  long before = cpu_ticks(pid);
  ::sleep(1);
  return static_cast<double>(cpu_ticks(pid) - before) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST_CASE("a flood of 10,000 refused CONNECTs with 16,000-character names stays bounded on the host") {
  Sandbox sb;
  std::string report = sb.outside + "/report.json", log = sb.outside + "/net.jsonl";
  auto b = start_script(sb, R"(
for i in range(10000):
    s = proxy()
    s.sendall(b"CONNECT " + (str(i) + "h" * 16000).encode() + b":443 HTTP/1.1\r\n\r\n")
    read_all(s)
    s.close()
phase("flooded")
wait_for("go")
)",
                        {"--report", report, "--net-log", log});
  REQUIRE(reached(sb, "flooded"));
  long rss = peak_rss_kib(b.pid);
  write_file(sb.ws + "/go", "");
  CHECK(wait_status_guarded(b.pid) == 0);
  std::string err = read_file(b.err_file);
  CAPTURE(rss);
  CHECK(rss > 0);
#ifndef PJ_SANITIZED
  CHECK(rss < 64 * 1024);  // documented: under 64 MiB (1.58 GB before)
#else
  // The sanitizer build's pi-jail keeps freed memory in ASan's quarantine
  // (256 MiB by default): its peak says nothing of pi-jail's own bound,
  // which the release build checks, as root and as nobody.
  MESSAGE("peak RSS under ASan (not checked): " << rss << " KiB");
#endif
  CHECK(file_size(log) < 2 * 1024 * 1024);  // 100 lines, then 20 a second, each under 1 KiB
  CHECK(file_size(report) < 1024 * 1024);   // 512 entries of bounded strings
  CHECK(err.size() < 16 * 1024);            // a few lines, whatever the names
  CHECK(err.find("refused 10000 connections") != std::string::npos);
  auto v = validate_report(report);
  CAPTURE(v.out);
  CAPTURE(v.err);
  CHECK(v.status == 0);
  std::string text = read_file(report);
  CHECK(text.find("\"refused\": ") != std::string::npos);
}

TEST_CASE("refusals are summarised once per destination, ending with the exact rule to add") {
  Sandbox sb;
  auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c",
                "for i in 1 2 3 4 5 6; do env -u NO_PROXY -u no_proxy curl -s -o /dev/null -p -x "
                "http://127.0.0.1:3128 https://example.org/; done; true"},
               {"HOME=" + sb.home});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.err.find("example.org:443 refused 6\u00d7") != std::string::npos);
  CHECK(o.err.find("example.org:443 refused 1") == std::string::npos);  // one line, not six
  CHECK(o.err.find("--allow-net example.org:443") != std::string::npos);
  CHECK(o.err.find("[network] allow = [\"example.org:443\"]") != std::string::npos);
}

TEST_CASE("300 idle connections to the proxy port: a CONNECT and a forward still get through") {
  Sandbox sb;
  HttpServer server("served");
  std::string url = "http://127.0.0.1:" + server.port() + "/";
  auto b = start_script(sb, "URL = '" + url + "'\n" + R"(
idle = [proxy() for _ in range(300)]
time.sleep(0.3)
result("connect=" + curl("-p", "-x", "http://127.0.0.1:3128", URL))
result("forward=" + curl(URL))
)",
                        {"--allow-net", "127.0.0.1:" + server.port()});
  CHECK(wait_status_guarded(b.pid) == 0);
  CAPTURE(read_file(b.err_file));
  CHECK(read_file(sb.ws + "/result") == "connect=served\nforward=served\n");
}

TEST_CASE("a storm of reset CONNECTs to an allowed name: a legitimate CONNECT still gets through") {
  Sandbox sb;
  HttpServer server("served");
  // A long /etc/hosts makes each look-up of the storm's name slow (it is
  // the last line); the legitimate name is the first.
  std::string hosts = sb.base + "/hosts";
  {
    std::ofstream h(hosts);
    h << "127.0.0.1 localhost\n";
    for (int i = 0; i < 50000; ++i) h << "10.9." << (i / 250) << '.' << (i % 250) << " h" << i << ".pjtest.example\n";
    h << "127.0.0.1 slow.pjtest.example\n";
  }
  write_file(sb.ws + "/attack.py", kPyPrelude + "URL = 'http://localhost:" + server.port() + "/'\n" + R"(
for batch in range(100):
    conns = [proxy() for _ in range(100)]
    for s in conns:
        s.sendall(b"CONNECT slow.pjtest.example:9 HTTP/1.1\r\n\r\n")
    time.sleep(0.01)
    for s in conns:
        reset(s)
result("connect=" + curl("-p", "-x", "http://127.0.0.1:3128", URL))
)");
  std::string cmd =
      "mount --bind \"$0\" /etc/hosts && cd \"$2\" && exec \"$1\" -q -w \"$2\" --allow-net "
      "slow.pjtest.example:9 --allow-net \"localhost:$3\" -- /usr/bin/python3 attack.py";
  std::vector<std::string> argv{"/usr/bin/unshare"};
  if (::getuid() != 0) argv.push_back("-Ur");
  argv.insert(argv.end(), {"-m", "/bin/sh", "-c", cmd, hosts, pi_jail(), sb.ws, server.port()});
  auto o = run(argv, {"HOME=" + sb.home});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(read_file(sb.ws + "/result") == "connect=served\n");
}

TEST_CASE("tunnels half-closed then reset before a silent upstream: pi-jail does not spin") {
  Sandbox sb;
  HttpServer silent("", true);
  auto b = start_script(sb, "PORT = " + silent.port() + "\n" + R"(
held = []
for _ in range(20):
    s = proxy()
    s.sendall(("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % PORT).encode())
    s.recv(100)
    s.shutdown(socket.SHUT_WR)
    held.append(s)
time.sleep(0.2)
for s in held:
    reset(s)
time.sleep(0.2)
phase("ready")
wait_for("go")
)",
                        {"--allow-net", "127.0.0.1:" + silent.port()});
  REQUIRE(reached(sb, "ready"));
  double cpu = cpu_seconds_over_a_second(b.pid);
  write_file(sb.ws + "/go", "");
  CHECK(wait_status_guarded(b.pid) == 0);
  CAPTURE(cpu);
  CHECK(cpu < 0.2);  // the spin took a whole core
}

TEST_CASE("more connections than pi-jail has fds: accepting pauses instead of spinning, and resumes") {
  Sandbox sb;
  HttpServer server("served");
  // 256 fds for pi-jail (its hard limit too: raising to it gains nothing).
  // Three processes (each has its own 256) hold 330 idle connections:
  // pi-jail's fd table fills, and the rest wait in the listen backlog.
  auto b = start_script(sb, "URL = 'http://127.0.0.1:" + server.port() + "/'\n" + R"(
kids = []
for k in range(3):
    pid = os.fork()
    if pid == 0:
        held = [proxy() for _ in range(110)]
        phase("held%d" % k)
        wait_for("go")
        os._exit(0)
    kids.append(pid)
for k in range(3):
    wait_for("held%d" % k)
time.sleep(0.5)
phase("ready")
for pid in kids:
    os.waitpid(pid, 0)
time.sleep(0.5)
result("connect=" + curl("-p", "-x", "http://127.0.0.1:3128", URL))
)",
                        {"--allow-net", "127.0.0.1:" + server.port()}, {"/usr/bin/prlimit", "--nofile=256:256", "--"});
  REQUIRE(reached(sb, "ready"));
  double cpu = cpu_seconds_over_a_second(b.pid);
  write_file(sb.ws + "/go", "");
  CHECK(wait_status_guarded(b.pid) == 0);
  CAPTURE(cpu);
  CAPTURE(read_file(b.err_file));
  CHECK(cpu < 0.2);  // EMFILE on accept spun at a whole core
  CHECK(read_file(sb.ws + "/result") == "connect=served\n");
}

TEST_CASE("a silent request and an idle tunnel are cut at their timeouts (shortened by a test switch)") {
  Sandbox sb;
  HttpServer silent("", true);
  auto b = start_script(sb, "PORT = " + silent.port() + "\n" + R"(
s = proxy()
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n" % PORT)  # never finished
result("handshake=" + read_all(s).decode().split(" ")[1])  # the status code
t = proxy()
t.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % PORT)
t.recv(100)
result("idle=" + repr(read_all(t)))
)",
                        {"--allow-net", "127.0.0.1:" + silent.port(), "--test-net-timeouts", "300ms,500ms"});
  CHECK(wait_status_guarded(b.pid) == 0);
  CAPTURE(read_file(b.err_file));
  CHECK(read_file(sb.ws + "/result") == "handshake=504\nidle=b''\n");
}

TEST_CASE("a client that resets mid-download does not kill pi-jail (SIGPIPE from splice)") {
  Sandbox sb;
  HttpServer big(std::string(16 << 20, 'b'));
  auto b = start_script(sb, "PORT = " + big.port() + "\n" + R"(
for _ in range(5):
    s = proxy()
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % PORT)
    s.recv(100)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(1000)
    time.sleep(0.05)
    reset(s)
time.sleep(0.3)
result("alive")
)",
                        {"--allow-net", "127.0.0.1:" + big.port()});
  CHECK(wait_status_guarded(b.pid) == 0);  // 141 (SIGPIPE) before
  CHECK(read_file(sb.ws + "/result") == "alive\n");
}
