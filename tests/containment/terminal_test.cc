// The jailed program on a real terminal (tmux), and its lifecycle under
// signals and timeouts.
#include <doctest/doctest.h>
#include <signal.h>
#include <dirent.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
#include <functional>
#include <fcntl.h>

#include "harness.h"
#include "job_control.h"

using namespace pj::test;

namespace {

std::string outer_shell(const Sandbox& sb) { return "env PS1='outer$ ' HOME=" + sb.home + " bash --norc --noprofile"; }

// The same scenario bare and under pi-jail: what bash shows for the bare
// program is what the jailed one must show.
std::vector<job_control::Launcher> bare_and_jailed(const Sandbox& sb) {
  return {{"bare", "", "HOME=" + sb.home, sb.ws},
          {"pi-jail", pi_jail() + " -q -w " + sb.ws + " --", "HOME=" + sb.home, sb.ws}};
}

}  // namespace

TEST_CASE("Ctrl-Z stops cat and python3 as it does without pi-jail: Stopped, listed by jobs, fg resumes it") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) {
    const std::string warm = "warm-up-" + unique_token();
    job_control::ctrl_z_then_fg(l, {"cat", warm, warm, "after-fg-line", "after-fg-line", true});
    job_control::ctrl_z_then_fg(l, {"/usr/bin/python3 -c 'print(\"ready-\" + str(6*7)); print(\"got:\" + input())'", "",
                                    "ready-42", "answer", "got:answer"});
  }
}

TEST_CASE("bg lets a jailed job run on without the terminal, and fg takes it back, as without pi-jail") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) job_control::bg_then_fg(l);
}

TEST_CASE("fg of a job running in the background (bg, or started with &) gives it the terminal: it reads a line") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) job_control::fg_of_running_job_reads(l);
}

TEST_CASE("a program that stops itself shows as Stopped; one that ignores SIGTSTP reads on after Ctrl-Z") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) {
    job_control::stops_itself(l);
    job_control::ignores_ctrl_z(l);
  }
}

TEST_CASE("a window resized while the job is stopped: after fg, and after another resize, it sees the size") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) job_control::resize_while_stopped(l);
}

TEST_CASE("a pipe out of a jailed command prints no staircase; its bytes are the bare command's") {
  Sandbox sb;
  for (const auto& l : bare_and_jailed(sb)) job_control::pipe_has_no_staircase(l);
  // ls decides on colour by whether stdout is a terminal: it is a pipe in
  // both, so the bytes are the same.
  ::mkdir((sb.ws + "/a-dir").c_str(), 0755);
  write_file(sb.ws + "/run-me", "#!/bin/sh\n");
  ::chmod((sb.ws + "/run-me").c_str(), 0755);
  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + sb.ws + " && ls --color=auto | cat > ../bare.txt && " + pi_jail() + " -q -w " + sb.ws +
         " -- ls --color=auto | cat > ../jailed.txt; echo done-$((6*7))");
  REQUIRE(t.wait_for("done-42"));
  CHECK(read_file(sb.base + "/bare.txt").find("a-dir\n") != std::string::npos);
  CHECK(read_file(sb.base + "/jailed.txt") == read_file(sb.base + "/bare.txt"));
}

TEST_CASE("a shell in the jail gets a real terminal: size, resize, Ctrl-C, job control, suspend") {
  Sandbox sb;
  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + sb.ws + " && stty -a > " + sb.ws + "/../before && " + pi_jail() + " -q -- bash --norc --noprofile");
  t.type("echo in-jail-$PI_JAIL; stty size; tty");
  REQUIRE(t.wait_for("in-jail-1"));
  CHECK(t.wait_for("30 100"));
  CHECK(t.wait_for("/dev/pts/0"));

  t.resize(120, 40);
  t.type("stty size");
  CHECK(t.wait_for("40 120"));

  const std::string first = "1000." + unique_token();
  t.type("sleep " + first);
  REQUIRE(eventually([&] { return !host_processes_with("sleep " + first).empty(); }));
  t.send({"C-c"});
  t.type("echo interrupted-$?");
  CHECK(t.wait_for("interrupted-130"));

  const std::string second = "1001." + unique_token();
  t.type("sleep " + second);
  REQUIRE(eventually([&] { return !host_processes_with("sleep " + second).empty(); }));
  t.send({"C-z"});
  CHECK(t.wait_for("Stopped                 sleep " + second));
  t.type("fg");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  t.send({"C-c"});
  CHECK(eventually([&] { return host_processes_with("sleep " + second).empty(); }));
  t.type("echo job-control-done-$((6*7))");
  CHECK(t.wait_for("job-control-done-42"));

  // The whole program suspends: the outer shell takes over, then fg.
  // Input typed while pi-jail still holds the terminal is flushed when it
  // lets go (by design): wait for the outer shell before typing.
  t.type("suspend");
  REQUIRE(t.wait_for("Stopped                 " + pi_jail()));
  t.type("echo outer-[$PI_JAIL]");
  CHECK(t.wait_for("outer-[]"));
  t.type("fg");
  t.type("echo back-[$PI_JAIL]");
  CHECK(t.wait_for("back-[1]"));

  t.resize(100, 30);
  t.type("exit");
  REQUIRE(eventually([&] { return host_processes_with(pi_jail() + " -q -- bash").empty(); }));
  t.type("stty -a > " + sb.ws + "/../after; cmp " + sb.ws + "/../before " + sb.ws +
         "/../after && echo STTY-SAME-$((6*7))");
  CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), t.screen());
}

namespace {

std::string link_target(const std::string& link) {
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// The fds of process `pid` that are a terminal: /dev/tty itself (it
// cannot be opened from here: the test has no controlling terminal), or
// what opens as one. Fails the test when the fds cannot be looked at.
std::vector<std::string> terminals_held(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE_MESSAGE(d != nullptr, dir, ": ", std::strerror(errno));
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  REQUIRE_MESSAGE(!names.empty(), dir, " lists nothing");
  std::vector<std::string> held;
  for (const auto& n : names) {
    const std::string link = dir + "/" + n;
    struct stat st;
    if (::stat(link.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    if (st.st_rdev == makedev(5, 2)) continue;  // a PTY master (/dev/ptmx): opening it makes a new PTY
    bool terminal = st.st_rdev == makedev(5, 0);
    if (!terminal) {
      const int fd = ::open(link.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      terminal = fd >= 0 && ::isatty(fd);
      if (fd >= 0) ::close(fd);
    }
    if (terminal) held.push_back(n + " -> " + link_target(link));
  }
  return held;
}

// A terminal's identity: its filesystem (each devpts numbers from 0) and device.
std::pair<dev_t, dev_t> device_of(const std::string& link) {
  struct stat st;
  REQUIRE_MESSAGE(::stat(link.c_str(), &st) == 0, link, ": ", std::strerror(errno));
  return {st.st_dev, st.st_rdev};
}

}  // namespace

TEST_CASE("while the command runs, the jail's init holds no terminal: not the outer one, not one pi-jail inherited") {
  Sandbox sb;
  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  const std::string token = "1002." + unique_token();
  // 3</dev/tty: a terminal pi-jail inherits above fd 2, as an IDE might leave it.
  t.type("cd " + sb.ws + " && " + pi_jail() + " -q -w " + sb.ws + " -- sleep " + token + " 3</dev/tty");
  REQUIRE(eventually([&] { return !host_processes_with("sleep " + token).empty(); }));
  // pi-jail, and its children: the jail's init, a clone whose copy of
  // the command line is blanked, and the network filter's own process,
  // which holds no terminal either (its fds 0-2 are /dev/null).
  const auto found = host_processes_with(pi_jail() + " -q -w " + sb.ws + " -- sleep " + token);
  REQUIRE(found.size() == 1);
  auto children_of = [](pid_t p) {
    return trim(read_file("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children"));
  };
  const pid_t supervisor = found[0];
  const std::string children = children_of(supervisor);
  REQUIRE(!children.empty());
  pid_t init = 0;
  std::istringstream each(children);
  for (std::string child; each >> child;) {
    const std::string cmdline = read_file("/proc/" + child + "/cmdline");
    if (cmdline.find("pi-jail-init") == 0) {
      REQUIRE(init == 0);
      init = std::stoi(child);
    } else {
      CHECK(cmdline.find("pi-jail-filter") == 0);
      // Not dumpable: only root may list its descriptors.
      if (::access(("/proc/" + child + "/fd").c_str(), R_OK) == 0) CHECK(terminals_held(std::stoi(child)).empty());
    }
  }
  REQUIRE(init > 0);
  // Controls: pi-jail holds the outer terminal (fds 0-2; 3 is closed at
  // its start), the command has its own PTY, and both are seen as terminals here.
  auto terminal_fds = [](const std::vector<std::string>& held) {
    std::string fds;
    for (const auto& h : held) fds += h.substr(0, h.find(' ')) + " ";
    return fds;
  };
  CHECK(terminal_fds(terminals_held(supervisor)) == "0 1 2 ");
  const auto command = host_processes_with("sleep " + token);
  REQUIRE(command.size() == 1);
  CHECK(terminal_fds(terminals_held(command[0])) == "0 1 2 ");
  CHECK(device_of("/proc/" + std::to_string(command[0]) + "/fd/0") !=
        device_of("/proc/" + std::to_string(supervisor) + "/fd/0"));
  // Init lets go of them once the command runs (eventually: the command
  // shows at its exec, init closes after its vfork returns).
  std::vector<std::string> held;
  CHECK_MESSAGE(eventually([&] {
                  held = terminals_held(init);
                  return held.empty();
                }),
                joined(held));
  t.send({"C-c"});
  CHECK(eventually([&] { return host_processes_with("sleep " + token).empty(); }));
}

TEST_CASE("TIOCSTI from inside cannot put a byte into the outer shell, even without the syscall filter") {
  Sandbox sb;
  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + sb.ws);

  // Control: the same probe outside any jail does inject into the shell,
  // so this test can see an injection when there is one.
  std::string direct = sb.ws + "/injected-direct";
  t.type(probe() + " tiocsti 'touch " + direct + "\n'");
  CHECK(eventually([&] { return exists(direct); }));

  std::string jailed = sb.ws + "/injected-jail";
  t.type(pi_jail() + " -q --unsafe-test-no-seccomp --allow-read " + probe_dir() + " -- " + probe() +
         " tiocsti 'touch " + jailed + "\n'; echo jail-exited-$((6*7))");
  REQUIRE(t.wait_for("jail-exited-42"));
  CHECK(t.screen().find("fd0 ok") != std::string::npos);  // it did inject, into its own PTY
  t.type("echo settled-$((6*7))");
  REQUIRE(t.wait_for("settled-42"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(exists(jailed));

  // With the filter (the default), the call itself is refused.
  t.type(pi_jail() + " -q --allow-read " + probe_dir() + " -- " + probe() + " tiocsti x; echo filtered-done-$((6*7))");
  REQUIRE(t.wait_for("filtered-done-42"));
  CHECK(t.screen().find("fd0 EPERM") != std::string::npos);
}

TEST_CASE("with only stderr on the terminal the jail gets its own PTY there, never the real terminal") {
  Sandbox sb;
  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  // The outer terminal: its settings, and its filesystem (the host's devpts).
  t.type("cd " + sb.ws + " && stty -a > ../before && stat -L -c %d $(tty) > ../outer-dev");
  // Inside: what fd 2 is, then try to turn echo off and read a typed line
  // from it (--foreground: head stays in the terminal's foreground group).
  std::string script =
      "stat -L -c %d /proc/self/fd/2 > inner-dev; readlink /proc/self/fd/2 > inner-name; "
      "stty -echo <&2 2>/dev/null; touch ready; timeout --foreground 3 head -n 1 <&2 > got; "
      "echo inner-done";
  t.type(pi_jail() + " -q -w " + sb.ws + " -- /bin/sh -c '" + script +
         "' </dev/null >../out.txt; echo jail-exited-$((6*7))");
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  // Typed while the jail reads fd 2: it stays for the outer shell.
  t.type("echo typed-$((6*7))");
  REQUIRE(t.wait_for("jail-exited-42"));
  CHECK(read_file(sb.base + "/out.txt") == "inner-done\n");
  CHECK(read_file(sb.ws + "/got").empty());
  CHECK(trim(read_file(sb.ws + "/inner-name")) == "/dev/pts/0");
  CHECK(trim(read_file(sb.ws + "/inner-dev")) != trim(read_file(sb.base + "/outer-dev")));
  CHECK(t.wait_for("typed-42"));
  t.type("stty -a > ../after; cmp ../before ../after && echo STTY-SAME-$((6*7))");
  CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), t.screen());
}

TEST_CASE("output floods through a PTY and a pipe lose nothing") {
  Sandbox sb;
  auto piped = sb.jail({"/usr/bin/head", "-c", "20000000", "/dev/zero"});
  CHECK(piped.status == 0);
  CHECK(piped.out.size() == 20000000);

  Tmux t(outer_shell(sb), 100, 30);
  REQUIRE(t.wait_for("outer$"));
  std::string typescript = sb.ws + "/typescript";
  t.type("script -qec '" + pi_jail() + " -q -w " + sb.ws + " -- seq 1 200000' " + typescript +
         " >/dev/null; echo flood-done-$((6*7))");
  REQUIRE(t.wait_for("flood-done-42"));
  std::string text = read_file(typescript);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  CHECK(lines >= 200000);
  CHECK(text.find("\n199999\r\n200000\r\n") != std::string::npos);
}

TEST_CASE("SIGTERM reaches the command first; after the grace nothing is left") {
  Sandbox sb;
  std::string marker = "1000." + unique_token();
  std::string cleanup = sb.ws + "/cleaned-up";
  pid_t pid = spawn({pi_jail(), "-q", "-w", sb.ws, "--grace", "3s", "--", "/bin/sh", "-c",
                     "trap 'echo yes > " + cleanup + "; exit 3' TERM; sleep " + marker + " & wait"},
                    {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return !host_processes_with("sleep " + marker).empty(); }));
  ::kill(pid, SIGTERM);
  CHECK(wait_status(pid) == 3);
  CHECK(read_file(cleanup) == "yes\n");
  CHECK(host_processes_with("sleep " + marker).empty());

  // A command that ignores TERM is killed when the grace ends.
  std::string stubborn = "1000." + unique_token();
  pid = spawn(
      {pi_jail(), "-q", "-w", sb.ws, "--grace", "300ms", "--", "/bin/sh", "-c", "trap '' TERM; sleep " + stubborn},
      {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return !host_processes_with("sleep " + stubborn).empty(); }));
  ::kill(pid, SIGTERM);
  CHECK(wait_status(pid) == 128 + SIGKILL);
  CHECK(host_processes_with("sleep " + stubborn).empty());
}

TEST_CASE("--timeout ends the jail, exits 124 and leaves nothing") {
  Sandbox sb;
  std::string marker = "1000." + unique_token();
  auto o = run({pi_jail(), "-w", sb.ws, "--timeout", "500ms", "--grace", "300ms", "--", "/bin/sh", "-c",
                "trap '' TERM; setsid sleep " + marker + " & sleep " + marker},
               {"HOME=" + sb.home});
  CHECK(o.status == 124);
  CHECK(o.err.find("--timeout reached") != std::string::npos);
  CHECK(host_processes_with("sleep " + marker).empty());

  auto quick = run({pi_jail(), "-w", sb.ws, "--timeout", "1h", "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(quick.status == 0);
  auto bad = run({pi_jail(), "-w", sb.ws, "--timeout", "soon", "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(bad.status == 125);
  CHECK(bad.err.find("not a duration") != std::string::npos);
}
