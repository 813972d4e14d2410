// Resource limits: a fork bomb stops at the process limit, a
// memory limit kills at its size or, where it cannot be enforced, stops
// the run before anything runs; the report says what the run used.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.h"

using namespace pj::test;

namespace {

// A cgroup directory of one v1 controller ("memory", "cpu") for one test,
// made by root in the test's own cgroup of that hierarchy (as on hosts
// with the hybrid layout) or given by tests/run for the unprivileged run
// (PJ_TEST_MEMORY_CGROUP, PJ_TEST_CPU_CGROUP: chowned to that user).
// Empty when neither.
struct TestCgroup {
  std::string path;
  bool made = false;
  TestCgroup(const std::string& controller, const char* env) {
    if (const char* given = std::getenv(env); given && *given) {
      path = given;
      return;
    }
    if (::geteuid() != 0) return;
    std::istringstream in(read_file("/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line)) {
      auto a = line.find(':'), b = line.find(':', a + 1);
      std::string names = "," + line.substr(a + 1, b - a - 1) + ",";
      if (names.find("," + controller + ",") == std::string::npos) continue;
      std::string rel = line.substr(b + 1);
      path = "/sys/fs/cgroup/" + controller + (rel == "/" ? std::string() : rel) + "/pj-test-" + unique_token();
      made = ::mkdir(path.c_str(), 0755) == 0;
      if (!made) path.clear();
    }
  }
  ~TestCgroup() {
    if (made) ::rmdir(path.c_str());
  }
};

struct MemoryCgroup : TestCgroup {
  MemoryCgroup() : TestCgroup("memory", "PJ_TEST_MEMORY_CGROUP") {}
};

std::string field_line(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return "";
  return json.substr(at, json.find('\n', at) - at);
}

}  // namespace

TEST_CASE("a fork bomb inside stops at the process limit; the host sees at most that many; the run ends cleanly") {
  Sandbox sb;
  const std::string flag = sb.ws + "/bomb.out", done = sb.ws + "/done", report = sb.outside + "/report.json";
  const int limit = 64;
  pid_t pid = spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--allow-read", probe_dir(), "--pids",
                     std::to_string(limit), "--report", report, "--", probe(), "forkbomb", flag, done},
                    {"HOME=" + sb.home});
  const bool held = eventually([&] { return exists(flag); });
  // While the bomb holds: every process it made on the host carries the
  // probe's command line (fork keeps it).
  const auto bombs = host_processes_with(probe() + " forkbomb");
  write_file(done, "");
  const int status = wait_status_guarded(pid);
  REQUIRE(held);
  CHECK(read_file(flag) == "limit EAGAIN raise EPERM\n");
  CAPTURE(bombs.size());
  CHECK(bombs.size() >= 2);
  CHECK(bombs.size() < static_cast<size_t>(limit));  // the jail's init is one of the limit
  CHECK(status == 0);
  CHECK(host_processes_with(probe() + " forkbomb").empty());
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(text.find("\"name\": \"pids\"") != std::string::npos);
  CHECK(text.find("\"value\": \"64\"") != std::string::npos);
  CHECK(text.find(::geteuid() == 0 ? "cgroup v" : "RLIMIT_NPROC in the jail's user namespace") != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("every run has a process limit: the default (4096) is in the report") {
  Sandbox sb;
  const std::string report = sb.outside + "/report.json";
  auto o = sb.jail({"/bin/true"}, {"--report", report});
  CHECK(o.status == 0);
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(text.find("\"value\": \"4096\",\n        \"source\": \"default\"") != std::string::npos);
  CHECK(field_line(text, "scratch_bytes").find("null") == std::string::npos);
  CHECK(field_line(text, "cpu_ms").find("null") == std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("a memory limit no delegated cgroup can enforce: 125 before anything runs, with the fix") {
  Sandbox sb;
  const std::string marker = sb.ws + "/ran";
  auto o = sb.jail({"/bin/sh", "-c", "echo > " + marker}, {"--memory", "64M"});
  CAPTURE(o.err);
  CHECK(o.status == 125);
  CHECK(o.err.find("cannot enforce --memory/[limits] memory 64M (--memory)") != std::string::npos);
  CHECK(o.err.find("no cgroup with the memory controller is delegated to pi-jail ([limits] cgroup is not set)") !=
        std::string::npos);
  CHECK(o.err.find("fix: give [limits] cgroup a directory you can write") != std::string::npos);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(!exists(marker));
  // The same for --cpus.
  auto c = sb.jail({"/bin/sh", "-c", "echo > " + marker}, {"--cpus", "0.5"});
  CHECK(c.status == 125);
  CHECK(c.err.find("no cgroup with the cpu controller") != std::string::npos);
  CHECK(!exists(marker));
}

TEST_CASE("a project may only lower the limits: asking for more is refused with file:line") {
  Sandbox sb;
  ::mkdir((sb.ws + "/.pi").c_str(), 0755);
  write_file(sb.ws + "/.pi/jail.toml", "[limits]\npids = 100000\n");
  const std::string report = sb.outside + "/report.json";
  auto o = sb.jail({"/bin/true"}, {"--report", report});
  CHECK(o.status == 0);
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(text.find("/.pi/jail.toml:2:8\",\n      \"what\": \"limits.pids 100000\"") != std::string::npos);
  CHECK(text.find("\"value\": \"4096\"") != std::string::npos);
  write_file(sb.ws + "/.pi/jail.toml", "[limits]\npids = 32\n");
  auto lower = sb.jail({"/bin/true"}, {"--report", report});
  CHECK(lower.status == 0);
  CHECK(read_file(report).find("\"value\": \"32\"") != std::string::npos);
}

TEST_CASE("a memory limit in a delegated cgroup: allocating beyond it kills the jail's process, the report says so") {
  MemoryCgroup cg;
  // tests/run gives the unprivileged run a directory; root makes its own.
  REQUIRE_MESSAGE(!cg.path.empty(), "no memory cgroup: run as root, or set PJ_TEST_MEMORY_CGROUP (tests/run does)");
  Sandbox sb;
  const std::string config = sb.base + "/operator.toml", report = sb.outside + "/report.json";
  write_file(config, "[limits]\ncgroup = [\"" + cg.path + "\"]\n");
  auto fits = sb.probe({"alloc", "16"}, {"--config", config, "--memory", "64M"});
  CAPTURE(fits.err);
  CHECK(fits.out == "ok\n");
  CHECK(fits.status == 0);
  auto o = sb.probe({"alloc", "512"}, {"--config", config, "--memory", "64M", "--report", report});
  CAPTURE(o.err);
  CHECK(o.out.empty());
  CHECK(o.status == 128 + SIGKILL);
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(field_line(text, "oom_kills") != "\"oom_kills\": 0");
  CHECK(field_line(text, "oom_kills").find("null") == std::string::npos);
  CHECK(text.find("\"memory_peak_from\": \"cgroup\"") != std::string::npos);
  CHECK(text.find("\"enforced_by\": \"cgroup v") != std::string::npos);
  CHECK(validate_report(report).status == 0);
  // The run's own cgroup is gone; the delegated one stays.
  CHECK(exists(cg.path));
  CHECK(read_file(cg.path + "/cgroup.procs").empty());
}

TEST_CASE("a run cgroup left by a pi-jail killed with SIGKILL is removed by the next run") {
  MemoryCgroup cg;
  REQUIRE_MESSAGE(!cg.path.empty(), "no memory cgroup: run as root, or set PJ_TEST_MEMORY_CGROUP (tests/run does)");
  Sandbox sb;
  const std::string config = sb.base + "/operator.toml";
  write_file(config, "[limits]\ncgroup = [\"" + cg.path + "\"]\n");
  pid_t pid = spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--config", config, "--memory", "256M",
                     "--", "/bin/sleep", "60"},
                    {"HOME=" + sb.home});
  const std::string prefix = "pi-jail-" + std::to_string(pid) + "-";
  std::string left;
  const bool joined = eventually([&] {
    for (const auto& e : std::filesystem::directory_iterator(cg.path))
      if (e.path().filename().string().starts_with(prefix) && !read_file(e.path().string() + "/cgroup.procs").empty()) {
        left = e.path().string();
        return true;
      }
    return false;
  });
  ::kill(pid, SIGKILL);
  wait_status(pid);
  REQUIRE(joined);
  // The jail dies with its supervisor (PR_SET_PDEATHSIG); its cgroup stays.
  CHECK(eventually([&] { return read_file(left + "/cgroup.procs").empty(); }));
  CHECK(exists(left));
  auto next = sb.jail({"/bin/true"}, {"--config", config, "--memory", "256M"});
  CAPTURE(next.err);
  CHECK(next.status == 0);
  CHECK_FALSE(exists(left));
}

TEST_CASE("a CPU limit in a delegated cgroup: a busy loop gets at most its share of CPU time") {
  TestCgroup cg("cpu", "PJ_TEST_CPU_CGROUP");
  REQUIRE_MESSAGE(!cg.path.empty(), "no cpu cgroup: run as root, or set PJ_TEST_CPU_CGROUP (tests/run does)");
  Sandbox sb;
  const std::string config = sb.base + "/operator.toml", report = sb.outside + "/report.json";
  write_file(config, "[limits]\ncgroup = [\"" + cg.path + "\"]\n");
  // 0.01 CPU for about 2 s of wall time (--timeout, not an assertion): the
  // CFS quota allows 1 ms of every 100 ms, some 25 ms in all; the bound
  // leaves ten times that. Unlimited, the loop takes the better part of a
  // CPU (even on this busy 2-core host: ~470 ms of the 2 s).
  auto o = sb.jail({"/bin/sh", "-c", "while :; do :; done"},
                   {"--config", config, "--cpus", "0.01", "--timeout", "2s", "--grace", "100ms", "--report", report});
  CAPTURE(o.err);
  CHECK(o.status == 124);
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(text.find("\"name\": \"cpus\",\n        \"value\": \"0.01\"") != std::string::npos);
  CHECK(text.find("\"enforced_by\": \"cgroup v") != std::string::npos);
  auto line = field_line(text, "cpu_ms");
  REQUIRE(line.starts_with("\"cpu_ms\": "));
  CHECK(std::stoull(line.substr(10)) < 250);
  CHECK(validate_report(report).status == 0);
}
