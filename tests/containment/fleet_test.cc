// Many jails side by side: the CI fan-out case, fifty pi-jail
// runs at once in one workspace with one agent dir. Each must see only its
// own /tmp, its own network filter and write only its own report; their
// write-backs to the shared agent dir must all land, and no staging or
// lock may be left behind.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <algorithm>
#include <csignal>
#include <memory>
#include <thread>

#include "harness.h"
#include "text.h"

using namespace pj::test;

namespace {

// Sanitizer builds start each run three to five times slower: fifty of
// them took minutes to be up at once, where the release flavour checks
// the fifty. Sixteen still run side by side through the same code.
#ifdef PJ_SANITIZED
constexpr int kRuns = 16;
#else
constexpr int kRuns = 50;
#endif

// Run i: marks its /tmp, then waits (a guard, not a timing assertion) until
// every run has marked the shared workspace, so all are alive at once
// when each looks at /tmp and the network. $1 = i, $2 = its own server's
// port, $3 = the next run's port, $4 = the workspace, $5 = the agent dir,
// $6 = the name in /tmp that leads to the workspace (the view's own path),
// $7 = how many runs there are.
constexpr const char* kScript = R"SH(
set -u
echo "run-$1" > /tmp/marker
: > "$4/started/$1"
n=0
while [ "$(ls "$4/started" | wc -l)" -lt "$7" ]; do
  n=$((n + 1)); [ "$n" -lt 900 ] || { echo "barrier: only $(ls "$4/started" | wc -l) runs started"; exit 90; }
  sleep 0.1
done
echo "tmp=$(ls -A /tmp | grep -vxF "$6" | tr '\n' ' ')"
echo "marker=$(cat /tmp/marker)"
# A listener of its own on a port every run uses: each jail has its own loopback.
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8000)); s.listen(1)
c = socket.create_connection(("127.0.0.1", 8000)); a, _ = s.accept()
c.sendall(("listener-" + sys.argv[1]).encode()); c.close(); print(a.recv(64).decode())
' "$1"
echo "own=$(curl -sS "http://127.0.0.1:$2/")"
echo "proxy=$(env -u NO_PROXY -u no_proxy curl -sS -x http://127.0.0.1:3128 "http://127.0.0.1:$2/")"
echo "other=$(env -u NO_PROXY -u no_proxy curl -s -o /dev/null -w '%{http_code}' -x http://127.0.0.1:3128 "http://127.0.0.1:$3/")"
curl -s "http://127.0.0.1:$3/" >/dev/null; echo "other-direct=$?"
printf '{"fleet-%s": {"type": "api_key", "key": "k-%s"}}\n' "$1" "$1" > "$5/auth.json"
)SH";

}  // namespace

TEST_CASE(
    "fifty runs at once in one workspace and agent dir: each its own /tmp, filter and report; all write-backs land") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent";
  std::filesystem::create_directories(agent);
  write_file(agent + "/auth.json", "{}\n");
  // Each run adds a provider entry: a login, which the operator lets
  // write back unattended (no run here has a terminal to ask on).
  std::filesystem::create_directories(sb.home + "/.config/pi-jail");
  write_file(sb.home + "/.config/pi-jail/policy.toml", "[credentials]\nlogins = \"write-back\"\n");
  std::filesystem::create_directories(sb.ws + "/started");
  // One host service per run; run i may reach only its own.
  std::vector<std::unique_ptr<HttpServer>> servers;
  for (int i = 0; i < kRuns; ++i) servers.push_back(std::make_unique<HttpServer>("served-" + std::to_string(i)));
  auto port = [&](int i) { return servers[static_cast<size_t>(i % kRuns)]->port(); };

  std::vector<Outcome> outcomes(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i)
    threads.emplace_back([&, i] {
      outcomes[static_cast<size_t>(i)] = run({pi_jail(),
                                              "-q",
                                              "-w",
                                              sb.ws,
                                              "--report",
                                              sb.outside + "/report-" + std::to_string(i) + ".json",
                                              "--allow-net",
                                              "127.0.0.1:" + port(i),
                                              "--",
                                              "/bin/sh",
                                              "-c",
                                              kScript,
                                              "fleet",
                                              std::to_string(i),
                                              port(i),
                                              port(i + 1),
                                              sb.ws,
                                              agent,
                                              std::filesystem::path(sb.base).filename().string(),
                                              std::to_string(kRuns)},
                                             {"HOME=" + sb.home}, std::chrono::seconds(300));
      // A run that ended before its marker (a setup failure) counts for
      // the barrier: the others go on, and its own error is what the
      // checks below show (not the others killed by the harness's timeout).
      const std::string n = std::to_string(i);
      if (!exists(sb.ws + "/started/" + n)) write_file(sb.ws + "/started/ended-early-" + n, "");
    });
  for (auto& t : threads) t.join();

  for (int i = 0; i < kRuns; ++i) {
    const Outcome& o = outcomes[static_cast<size_t>(i)];
    const std::string n = std::to_string(i);
    CAPTURE(i);
    CAPTURE(o.out);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(o.out.find("tmp=marker \n") != std::string::npos);  // nothing of the other runs
    CHECK(o.out.find("marker=run-" + n + "\n") != std::string::npos);
    CHECK(o.out.find("\nlistener-" + n + "\n") != std::string::npos);
    CHECK(o.out.find("own=served-" + n + "\n") != std::string::npos);
    CHECK(o.out.find("proxy=served-" + n + "\n") != std::string::npos);
    CHECK(o.out.find("other=403\n") != std::string::npos);
    CHECK(o.out.find("other-direct=7\n") != std::string::npos);  // nothing forwarded: refused inside
    CHECK(o.err.find("not written back") == std::string::npos);
    CHECK(o.err.find("is kept") == std::string::npos);

    // Its report: its own allowance and its own refusal, nobody else's port.
    const std::string report = sb.outside + "/report-" + n + ".json";
    const std::string text = read_file(report);
    CHECK(text.find("\"ending\": \"exited\"") != std::string::npos);
    CHECK(text.find("\"port\": " + port(i) + ",") != std::string::npos);
    CHECK(text.find("\"reason\": \"allowed by 127.0.0.1:" + port(i) + " (--allow-net)\"") != std::string::npos);
    CHECK(text.find("\"reason\": \"no rule allows 127.0.0.1:" + port(i + 1) + "\"") != std::string::npos);
    for (int j = 0; j < kRuns; ++j) {
      if (j == i || j == (i + 1) % kRuns) continue;
      CHECK_MESSAGE(text.find("\"port\": " + port(j) + ",") == std::string::npos, "a decision of run " << j);
      CHECK_MESSAGE(text.find("127.0.0.1:" + port(j)) == std::string::npos, "the rule of run " << j);
    }
    auto v = validate_report(report);
    CHECK_MESSAGE(v.status == 0, v.out << v.err);
  }
  for (int i = 0; i < kRuns; ++i)
    CHECK(servers[static_cast<size_t>(i)]->hits() == 2);  // forward + proxy, from run i only

  // Every run's addition reached the host's auth.json under Pi's lock.
  const std::string auth = read_file(agent + "/auth.json");
  CAPTURE(auth);
  for (int i = 0; i < kRuns; ++i) CHECK(count(auth, "\"fleet-" + std::to_string(i) + "\"") == 1);
  // Nothing left: no lock or temporary file in the agent dir, no run's staging.
  for (const auto& e : std::filesystem::directory_iterator(agent)) {
    const std::string name = e.path().filename().string();
    CHECK_MESSAGE((name == "auth.json" || name == "sessions"), "left in the agent dir: " << name);
  }
  const std::string runs = sb.home + "/.local/state/pi-jail/runs";
  REQUIRE(exists(runs));
  for (const auto& e : std::filesystem::directory_iterator(runs)) CHECK_MESSAGE(false, "left in runs/: " << e.path());
}

TEST_CASE("fifty runs SIGKILLed at once: their jails die with them and the next run leaves no staging or placeholder") {
  Sandbox sb;
  std::filesystem::create_directories(sb.home + "/.pi/agent");
  std::filesystem::create_directories(sb.ws + "/started");
  REQUIRE(run({"/usr/bin/git", "init", "-q", sb.ws}, {"HOME=" + sb.home}).status == 0);
  const std::string sleep = "/bin/sleep 1000." + std::to_string(::getpid());  // this test's own
  std::vector<pid_t> pids;
  for (int i = 0; i < kRuns; ++i)
    pids.push_back(spawn({pi_jail(), "-q", "-w", sb.ws, "--", "/bin/sh", "-c", ": > \"$0/started/$1\"; exec " + sleep,
                          sb.ws, std::to_string(i)},
                         {"HOME=" + sb.home}));
  // Every jail is running its command (a guard, not a timing assertion).
  const bool all_started =
      eventually([&] { return std::distance(std::filesystem::directory_iterator(sb.ws + "/started"), {}) == kRuns; });
  const bool all_sleeping = eventually([&] { return host_processes_with(sleep).size() == kRuns; });
  for (pid_t p : pids) ::kill(p, SIGKILL);
  for (pid_t p : pids) CHECK(wait_status(p) == 128 + SIGKILL);
  REQUIRE(all_started);
  REQUIRE(all_sleeping);
  // The jails' init dies with its supervisor, and the command with it.
  CHECK(eventually([&] { return host_processes_with(sleep).empty(); }));

  auto next = run({pi_jail(), "-q", "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(next.status == 0);
  const std::string runs = sb.home + "/.local/state/pi-jail/runs";
  for (const auto& e : std::filesystem::directory_iterator(runs)) CHECK_MESSAGE(false, "left in runs/: " << e.path());
  std::vector<std::string> ws_left;
  for (const auto& e : std::filesystem::directory_iterator(sb.ws)) ws_left.push_back(e.path().filename().string());
  std::sort(ws_left.begin(), ws_left.end());
  CHECK(ws_left == std::vector<std::string>{".git", "started"});  // no placeholder survives in the workspace
  CHECK_FALSE(exists(sb.ws + "/.git/commondir"));
  auto status = run({"/usr/bin/git", "-C", sb.ws, "status", "--porcelain", "--ignored"}, {"HOME=" + sb.home});
  CHECK(trim(status.out) == "?? started/");
}
