// pi-jail's notes for the jail: the list of the run's network refusals (the
// same fix as the exit summary, escaped, bounded; replaced whole, removed at
// the end) and the pi guard that refuses Pi's package commands inside.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "netproxy/decisions.h"
#include "jail_notes.h"
#include "pi/profile_adapter.h"
#include "prepare.h"
#include "util/random.h"

using namespace pj;

namespace {

netproxy::Decision refusal(std::string host, int port, bool by_rule = true) {
  netproxy::Decision d;
  d.time = std::chrono::system_clock::now();
  d.protocol = netproxy::Protocol::http_connect;
  d.host = std::move(host);
  d.port = port;
  d.reason = "no rule allows it";
  d.rule_refusal = by_rule;
  return d;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t lines_not_comments(const std::string& text) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.starts_with("#")) ++n;
  return n;
}

}  // namespace

TEST_CASE("jail notes: each refused destination once, with the option the exit summary proposes") {
  netproxy::DecisionRecorder rec(-1);
  rec.add(refusal("api.example.com", 443));
  rec.add(refusal("api.example.com", 443));
  rec.add(refusal("registry.npmjs.org", 443));
  rec.add(refusal("10.0.0.1", 80, false));
  auto ok = refusal("pi.dev", 443);
  ok.allowed = true;
  rec.add(ok);
  const std::string text = supervisor::refusals_text(rec.table());
  CAPTURE(text);
  CHECK(text.starts_with("# pi-jail: the network requests this run refused so far"));
  CHECK(text.find("api.example.com:443: refused; to allow: --allow-net api.example.com:443\n"
                  "registry.npmjs.org:443: refused; to allow: --allow-net-preset npm\n"
                  "10.0.0.1:80: refused\n") != std::string::npos);
  CHECK(text.find("no rule allows it") == std::string::npos);  // the host's reasons stay out
  CHECK(text.find("pi.dev") == std::string::npos);
  CHECK(lines_not_comments(text) == 3);
}

TEST_CASE("jail notes: nothing refused yet says so") {
  CHECK(supervisor::refusals_text({}).ends_with("# (none yet)\n"));
}

TEST_CASE("jail notes: the jail's host names cannot forge a line or reach a terminal") {
  netproxy::DecisionRecorder rec(-1);
  rec.add(refusal("evil.test\nfake.test:443: to allow: --allow-net everything\x1b[2J", 443));
  const std::string text = supervisor::refusals_text(rec.table());
  CAPTURE(text);
  CHECK(lines_not_comments(text) == 1);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("evil.test\\nfake.test") != std::string::npos);
}

TEST_CASE("jail notes: a flood lists the newest destinations only, in bounded lines") {
  netproxy::DecisionRecorder rec(-1);
  for (int i = 0; i < 2000; ++i) rec.add(refusal(std::to_string(i) + std::string(16000, 'q'), 443));
  const std::string text = supervisor::refusals_text(rec.table());
  CHECK(lines_not_comments(text) == supervisor::kMaxListedRefusals);
  CHECK(text.size() < 64 * 1024);
  CHECK(text.find(fmt::format("# ... {} older destinations not listed",
                              netproxy::kMaxEntries - supervisor::kMaxListedRefusals)) != std::string::npos);
  CHECK(text.find("more refused connections past the filter's 512 distinct entries") != std::string::npos);
  CHECK(text.find("\n511qqq") != std::string::npos);  // the newest listed entry
  CHECK(text.find("\n0qqq") == std::string::npos);
}

TEST_CASE("jail notes: rewritten when the table changes, removed with its owner") {
  const std::string state =
      std::filesystem::temp_directory_path() / fmt::format("pj-refusals-test-{:x}", util::random_u64());
  std::string dir;
  {
    auto made = supervisor::JailNotes::make(state, {});
    REQUIRE(made.ok());
    dir = made->dir();
    CHECK(dir.starts_with(state + "/jail-notes-"));
    struct stat st;
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK(read_all(dir + "/refusals").ends_with("# (none yet)\n"));
    REQUIRE(::stat((dir + "/refusals").c_str(), &st) == 0);
    const ino_t first = st.st_ino;
    netproxy::DecisionRecorder rec(-1);
    rec.add(refusal("blocked.example", 80));
    made->update(rec.table());
    CHECK(read_all(dir + "/refusals").find("blocked.example:80:") != std::string::npos);
    REQUIRE(::stat((dir + "/refusals").c_str(), &st) == 0);
    CHECK(st.st_ino != first);  // a new file renamed over the old one
    CHECK_FALSE(std::filesystem::exists(dir + "/refusals.new"));
  }
  CHECK_FALSE(std::filesystem::exists(dir));
  std::filesystem::remove_all(state);
}

TEST_CASE("jail notes: the Linux jail sees the directory read-only at /run/pi-jail, named in its environment") {
  const std::string state =
      std::filesystem::temp_directory_path() / fmt::format("pj-notes-test-{:x}", util::random_u64());
  {
    auto made = supervisor::JailNotes::make(state, {});
    REQUIRE(made.ok());
    runtime::Request r;
    made->show(r);
    REQUIRE(r.shown_files.size() == 1);
    CHECK(r.shown_files[0].path == "/run/pi-jail");
    CHECK(r.shown_files[0].source == made->dir());
    CHECK(r.shown_files[0].node == runtime::Node::directory);
    CHECK(r.grants.empty());
    REQUIRE(r.env_set.size() == 1);
    CHECK(r.env_set[0] == std::pair<std::string, std::string>{"PI_JAIL_REFUSALS", "/run/pi-jail/refusals"});
  }
  std::filesystem::remove_all(state);
}

TEST_CASE("jail notes: the macOS jail reads the directory at its own path, granted read-only, pi guard included") {
  const std::string state =
      std::filesystem::temp_directory_path() / fmt::format("pj-notes-test-{:x}", util::random_u64());
  {
    auto made = supervisor::JailNotes::make(state, {}, supervisor::NotesSeen::in_place);
    REQUIRE(made.ok());
    CHECK(made->jail_dir() == made->dir());
    runtime::Request r;
    made->show(r);
    CHECK(r.shown_files.empty());
    REQUIRE(r.grants.size() == 1);
    CHECK(r.grants[0].path == made->dir());
    CHECK(r.grants[0].access == runtime::Access::read_only);
    REQUIRE(r.env_set.size() == 1);
    CHECK(r.env_set[0] == std::pair<std::string, std::string>{"PI_JAIL_REFUSALS", made->dir() + "/refusals"});
    CHECK(read_all(made->dir() + "/refusals").ends_with("# (none yet)\n"));
    REQUIRE(made->add_pi_guard("/opt/pi/cli.js", r).ok());
    CHECK(r.path_guard == made->dir() + "/bin");
  }
  std::filesystem::remove_all(state);
}

namespace {

// Runs `script` with sh(1) and `args`: exit status and stdout+stderr.
std::pair<int, std::string> run_script(const std::string& script, const std::string& args) {
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("pj-guard-test-{:x}", util::random_u64());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/pi") << script;
  std::string out;
  FILE* p = ::popen(("sh " + dir + "/pi " + args + " 2>&1").c_str(), "r");
  char buf[512];
  for (size_t n; p && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = p ? ::pclose(p) : -1;
  std::filesystem::remove_all(dir);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("the pi guard refuses Pi's package commands with the sentence, and runs Pi for anything else") {
  const std::string script = supervisor::pi_guard_script("/bin/echo");
  CHECK(script.starts_with("#!/bin/sh\n"));
  for (const char* command : {"install", "remove", "uninstall", "update"}) {
    CAPTURE(command);
    auto [status, out] = run_script(script, std::string(command) + " -l npm:left-pad");
    CHECK(status == 125);
    CHECK(out == "pi-jail: " + pi::package_refusal(command) + "\n");
  }
  auto [status, out] = run_script(script, "-p 'install it' --model m");
  CHECK(status == 0);
  CHECK(out == "-p install it --model m\n");
  auto [list_status, list] = run_script(script, "list");
  CHECK(list_status == 0);
  CHECK(list == "list\n");
}

TEST_CASE("the pi guard runs Pi at a path with quotes and spaces as one word") {
  const std::string dir =
      std::filesystem::temp_directory_path() / fmt::format("pj guard 'q' $(x) {:x}", util::random_u64());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/pi") << "#!/bin/sh\necho real \"$@\"\n";
  std::filesystem::permissions(dir + "/pi", std::filesystem::perms::owner_all);
  auto [status, out] = run_script(supervisor::pi_guard_script(dir + "/pi"), "-c");
  std::filesystem::remove_all(dir);
  CHECK(status == 0);
  CHECK(out == "real -c\n");
}

TEST_CASE("the pi guard is bin/pi of the jail's notes, first on PATH inside, removed with them") {
  const std::string state =
      std::filesystem::temp_directory_path() / fmt::format("pj-notes-test-{:x}", util::random_u64());
  std::string dir;
  {
    auto made = supervisor::JailNotes::make(state, {});
    REQUIRE(made.ok());
    dir = made->dir();
    runtime::Request r;
    r.path_first = "/opt/node/bin";
    r.host_env = {"PATH=/usr/bin:/bin"};
    REQUIRE(made->add_pi_guard("/opt/pi/cli.js", r).ok());
    CHECK(read_all(dir + "/bin/pi") == supervisor::pi_guard_script("/opt/pi/cli.js"));
    CHECK((std::filesystem::status(dir + "/bin/pi").permissions() & std::filesystem::perms::owner_exec) !=
          std::filesystem::perms::none);
    r.env_pass = {"PATH"};
    auto env = runtime::jail_env(r, "/tmp", std::nullopt);
    CHECK(std::find(env.begin(), env.end(), "PATH=/run/pi-jail/bin:/opt/node/bin:/usr/bin:/bin") != env.end());
  }
  CHECK_FALSE(std::filesystem::exists(dir));
  std::filesystem::remove_all(state);
}

TEST_CASE("jail notes: a run killed with SIGKILL leaves its directory, and the next run removes it, never a live one") {
  const std::string state =
      std::filesystem::temp_directory_path() / fmt::format("pj-notes-test-{:x}", util::random_u64());
  std::string live_dir, killed_dir;
  {
    auto live = supervisor::JailNotes::make(state, {});
    REQUIRE(live.ok());
    live_dir = live->dir();
    // A child makes its notes and the guard, then dies without cleaning up.
    int out[2];
    REQUIRE(::pipe(out) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      auto notes = supervisor::JailNotes::make(state, {});
      runtime::Request r;
      if (!notes.ok() || !notes->add_pi_guard("/opt/pi/cli.js", r).ok()) ::_exit(1);
      (void)!::write(out[1], notes->dir().data(), notes->dir().size());
      ::kill(::getpid(), SIGKILL);
    }
    ::close(out[1]);
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    ::close(out[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(n > 0);
    killed_dir.assign(buf, static_cast<size_t>(n));
    REQUIRE(std::filesystem::exists(killed_dir + "/bin/pi"));
    CHECK(std::filesystem::exists(live_dir));

    auto next = supervisor::JailNotes::make(state, {});
    REQUIRE(next.ok());
    CHECK_FALSE(std::filesystem::exists(killed_dir));
    CHECK(std::filesystem::exists(live_dir + "/refusals"));  // still held by its run
  }
  CHECK_FALSE(std::filesystem::exists(live_dir));
  std::filesystem::remove_all(state);
}
