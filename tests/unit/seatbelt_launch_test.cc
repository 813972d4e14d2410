// The Seatbelt launcher's wiring, on Linux, with a stand-in for
// /usr/bin/sandbox-exec that records its arguments and runs the command.
// This shows the arguments, environment, session and exit codes; it
// cannot show containment, which only macOS enforces.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "seatbelt/launch.h"

using namespace pj;
using namespace pj::seatbelt;
using namespace std::chrono_literals;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct StandIn {
  std::string dir, exe;
  StandIn() {
    char tmpl[] = "/tmp/pj-sbx.XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    dir = tmpl;
    exe = dir + "/sandbox-exec";
    std::ofstream(exe) << "#!/bin/sh\nprintf '%s\\0' \"$@\" > " << dir
                       << "/args\nwhile [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec \"$@\"\n";
    ::chmod(exe.c_str(), 0755);
  }
  ~StandIn() { std::system(("rm -rf " + dir).c_str()); }
};

SeatbeltSpec spec_running(const std::string& script, const std::string& cwd) {
  SeatbeltSpec s;
  s.profile = "(version 1)\n(deny default)\n(allow file-read* (subpath (param \"ROOT_0\")))\n";
  s.params = {{"ROOT_0", "/a path/with \"quotes\"\nand a newline", "test"}};
  s.exec_path = "/bin/sh";
  s.argv = {"sh", "-c", script};
  s.env = {"PATH=/usr/bin:/bin", "PI_JAIL=1", "HOME=" + cwd};
  s.cwd = cwd;
  return s;
}

int wait_exit(Sandboxed& s) {
  for (int i = 0; i < 1000; ++i) {
    auto r = s.poll_exit();
    REQUIRE(r.ok());
    if (*r) return **r;
    std::this_thread::sleep_for(10ms);
  }
  FAIL("the command did not end");
  return -1;
}

}  // namespace

TEST_CASE("Seatbelt launcher: sandbox-exec gets the profile and parameters; the command its env and cwd") {
  StandIn si;
  ::setenv("PJ_TEST_HOST_SECRET", "leak", 1);
  auto spec =
      spec_running("env > \"$HOME/env\"; pwd > \"$HOME/pwd\"; cut -d' ' -f6 /proc/$$/stat > \"$HOME/sid\"", si.dir);
  auto s = Sandboxed::start(spec, {si.exe, -1});
  REQUIRE_MESSAGE(s.ok(), s.error().message());
  CHECK(wait_exit(*s) == 0);
  std::string args = slurp(si.dir + "/args");
  std::string want;
  auto expected = sandbox_exec_args(spec, si.exe);
  for (size_t i = 1; i < expected.size(); ++i) want += expected[i] + std::string(1, '\0');
  CHECK(args == want);  // -p PROFILE -D ROOT_0=<odd path, intact> -- /bin/sh -c ...
  std::string env = slurp(si.dir + "/env");
  CHECK(env.find("PI_JAIL=1\n") != std::string::npos);
  CHECK(env.find("PJ_TEST_HOST_SECRET") == std::string::npos);
  CHECK(slurp(si.dir + "/pwd") == si.dir + "\n");
  CHECK(slurp(si.dir + "/sid") == std::to_string(s->pid()) + "\n");  // a new session
  ::unsetenv("PJ_TEST_HOST_SECRET");
}

TEST_CASE("Seatbelt launcher: exit codes, signals to the group, and leftovers killed") {
  StandIn si;
  {
    auto s = Sandboxed::start(spec_running("exit 7", si.dir), {si.exe, -1});
    REQUIRE(s.ok());
    CHECK(wait_exit(*s) == 7);
  }
  {
    auto s = Sandboxed::start(spec_running("sleep 30", si.dir), {si.exe, -1});
    REQUIRE(s.ok());
    std::this_thread::sleep_for(100ms);
    REQUIRE(s->signal(SIGTERM).ok());
    CHECK(wait_exit(*s) == 128 + SIGTERM);
  }
  {
    auto s = Sandboxed::start(spec_running("sleep 30 & echo $! > \"$HOME/bg\"", si.dir), {si.exe, -1});
    REQUIRE(s.ok());
    CHECK(wait_exit(*s) == 0);
    pid_t bg = std::atoi(slurp(si.dir + "/bg").c_str());
    REQUIRE(bg > 0);
    CHECK(::kill(bg, 0) == 0);  // outlived the command...
    s->kill_leftovers();
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      std::string stat = slurp("/proc/" + std::to_string(bg) + "/stat");
      gone = stat.empty() || stat.find(") Z") != std::string::npos;
      std::this_thread::sleep_for(10ms);
    }
    CHECK(gone);  // ...until pi-jail ended the group
  }
}

TEST_CASE("Seatbelt launcher: a missing sandbox-exec or working directory is an error naming it") {
  StandIn si;
  auto missing = Sandboxed::start(spec_running("true", si.dir), {si.dir + "/nope", -1});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find(si.dir + "/nope (the Seatbelt launcher)") != std::string::npos);
  CHECK(missing.error().err() == ENOENT);
  auto nocwd = Sandboxed::start(spec_running("true", si.dir + "/gone"), {si.exe, -1});
  REQUIRE_FALSE(nocwd.ok());
  CHECK(nocwd.error().err() == ENOENT);
}
