// Processes, privileges, lifetime and exit status of the jailed command.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.h"

using namespace pj::test;

TEST_CASE("only the jail's processes are visible, host PIDs cannot be signalled") {
  Sandbox sb;
  auto o = sb.probe({"pids"});
  // init (1) and the probe itself: nothing else exists in the namespace.
  CHECK(trim(o.out) == "1 2");
  auto k = sb.probe({"kill", std::to_string(::getpid())});
  CHECK(trim(k.out) == "ESRCH");
}

TEST_CASE("mount, umount and remounting read-write are refused") {
  Sandbox sb;
  CHECK(trim(sb.probe({"mount-tmpfs", sb.ws}).out) == "EPERM");
  CHECK(trim(sb.probe({"umount", "/proc"}).out) == "EPERM");
  CHECK(trim(sb.probe({"umount", sb.ws}).out) == "EPERM");
  CHECK(trim(sb.probe({"remount-rw", "/usr"}).out) == "EPERM");
  // The new mount API is answered by the syscall filter (ENOSYS) before
  // the kernel's capability check (EPERM) is reached.
  CHECK(trim(sb.probe({"setattr-rw", "/"}).out) == "ENOSYS");
  CHECK(trim(sb.probe({"setattr-rw", "/usr"}).out) == "ENOSYS");
}

TEST_CASE("no capabilities, no_new_privs") {
  Sandbox sb;
  auto o = sb.probe({"status"});
  for (const char* line : {"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
                           "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"}) {
    CAPTURE(line);
    CHECK(o.out.find(line) != std::string::npos);
  }
  CHECK(o.out.find("uid " + std::to_string(::getuid()) + " euid " + std::to_string(::geteuid())) != std::string::npos);
}

TEST_CASE("a setuid-root binary gains nothing") {
  std::string suid = probe_suid();
  REQUIRE_MESSAGE(!suid.empty(), "tests/run stages a setuid-root probe when it runs as root");
  Sandbox sb;
  std::string dir = std::filesystem::path(suid).parent_path().string();
  auto o = sb.jail({suid, "status"}, {"--allow-read", dir});
  CHECK(o.out.find("CapEff:\t0000000000000000") != std::string::npos);
  CHECK(o.out.find("euid " + std::to_string(::getuid()) + "\n") != std::string::npos);
}

TEST_CASE("only fds 0, 1 and 2 reach the command") {
  Sandbox sb;
  // An fd this test leaks on purpose (no O_CLOEXEC) into pi-jail.
  int leak = ::open("/dev/null", O_RDONLY);
  REQUIRE(leak > 2);
  auto o = sb.probe({"fds"});
  ::close(leak);
  CHECK(trim(o.out) == "0 1 2");
}

TEST_CASE("the environment is an allowlist") {
  Sandbox sb;
  std::vector<std::string> argv{"/usr/bin/env",
                                "-C",
                                sb.ws,
                                "AWS_SECRET_ACCESS_KEY=leak",
                                "GITHUB_TOKEN=leak",
                                "LC_TIME=C",
                                pi_jail(),
                                "-q",
                                "-w",
                                sb.ws,
                                "--allow-read",
                                probe_dir(),
                                "--",
                                "/usr/bin/env"};
  auto o = run(argv, {"HOME=" + sb.home});
  CHECK(o.status == 0);
  CHECK(o.out.find("AWS_SECRET_ACCESS_KEY") == std::string::npos);
  CHECK(o.out.find("GITHUB_TOKEN") == std::string::npos);
  CHECK(o.out.find("LC_TIME=C\n") != std::string::npos);
  CHECK(o.out.find("HOME=" + sb.home + "\n") != std::string::npos);
  CHECK(o.out.find("TMPDIR=/tmp\n") != std::string::npos);
}

TEST_CASE("the jail has its own network namespace: host loopback services are unreachable") {
  Sandbox sb;
  int listening_port = 0;
  int s = loopback_socket(SOCK_STREAM, listening_port);
  std::string port = std::to_string(listening_port);
  auto o = sb.probe({"connect", "127.0.0.1", port});
  ::close(s);
  CHECK(trim(o.out) == "ECONNREFUSED");
  auto ls = sb.probe({"ls", "/sys/class/net"});
  CHECK(trim(ls.out).empty());
}

TEST_CASE("exit status: the command's code, 128+signal, 126, 127") {
  Sandbox sb;
  CHECK(sb.jail({"/bin/sh", "-c", "exit 7"}).status == 7);
  CHECK(sb.jail({"/bin/sh", "-c", "kill -TERM $$"}).status == 128 + SIGTERM);
  CHECK(sb.jail({"/bin/sh", "-c", "kill -KILL $$"}).status == 128 + SIGKILL);

  auto missing = sb.jail({"no-such-command-" + unique_token()});
  CHECK(missing.status == 127);
  CHECK(missing.err.find("command not found") != std::string::npos);

  write_file(sb.ws + "/not-executable", "#!/bin/sh\n");
  CHECK(sb.jail({sb.ws + "/not-executable"}).status == 126);

  // A script whose interpreter does not exist: not found, before any jail.
  write_file(sb.ws + "/orphan", "#!/opt/pj-no-such-interpreter\n");
  ::chmod((sb.ws + "/orphan").c_str(), 0755);
  auto orphan = sb.jail({sb.ws + "/orphan"});
  CHECK(orphan.status == 127);
  CHECK(orphan.err.find("its interpreter /opt/pj-no-such-interpreter") != std::string::npos);
}

TEST_CASE("a program outside the view is shown alone, never its neighbours") {
  Sandbox sb;
  std::filesystem::copy_file(probe(), sb.outside + "/probe-copy");
  auto ran = sb.jail({sb.outside + "/probe-copy", "read", sb.outside + "/secret"});
  CHECK(ran.status == 1);
  CHECK(trim(ran.out) == "ENOENT");
}

TEST_CASE("nothing survives the command: setsid and background jobs are ended") {
  Sandbox sb;
  std::string marker = "1000." + unique_token();
  auto o = sb.jail(
      {"/bin/sh", "-c", "setsid sh -c 'sleep " + marker + " &' ; nohup sleep " + marker + " >/dev/null 2>&1 & exit 0"});
  CHECK(o.status == 0);
  CHECK(host_processes_with("sleep " + marker).empty());
}

TEST_CASE("SIGKILL of the supervisor leaves nothing of the jail") {
  Sandbox sb;
  std::string marker = "1000." + unique_token();
  pid_t pid =
      spawn({pi_jail(), "-q", "-w", sb.ws, "--", "/bin/sh", "-c", "setsid sleep " + marker + " & sleep " + marker},
            {"HOME=" + sb.home});
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    started = host_processes_with("sleep " + marker).size() >= 2;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  REQUIRE(started);
  ::kill(pid, SIGKILL);
  wait_status(pid);
  bool gone = false;
  for (int i = 0; i < 40 && !gone; ++i) {
    gone = host_processes_with("sleep " + marker).empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK_MESSAGE(gone, "jail processes outlived a SIGKILLed supervisor by more than a second");
}

TEST_CASE("fail closed: no user namespaces means nothing runs (exit 125); --unsandboxed is explicit") {
  Sandbox sb;
  std::string flag = sb.ws + "/ran";
  // Inside a user namespace of our own, forbid further user namespaces.
  auto o = run(
      {"/usr/bin/unshare", "-Ur", "/bin/sh", "-c",
       "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" -w \"$1\" -- /bin/sh -c 'touch \"$1\"' sh \"$2\"",
       pi_jail(), sb.ws, flag},
      {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(o.err.find("pi-jail: error: jail setup failed, nothing was run\n  step: ") !=
        std::string::npos);  // the one wording
  CHECK(o.err.find("max_user_namespaces") != std::string::npos);
  CHECK_FALSE(exists(flag));

  auto u = run({"/usr/bin/unshare", "-Ur", "/bin/sh", "-c",
                "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" --unsandboxed -w \"$1\" -- /bin/sh -c "
                "'touch \"$1\"' sh \"$2\"",
                pi_jail(), sb.ws, flag},
               {"HOME=" + sb.home});
  CHECK(u.status == 0);
  CHECK(u.err.find("NO isolation") != std::string::npos);
  CHECK(exists(flag));
}

TEST_CASE("a workspace that contains $HOME is refused") {
  Sandbox sb;
  auto o = run({pi_jail(), "-w", sb.base, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("contains your home directory") != std::string::npos);
}

namespace {

// pi-jail [opts...] -- /bin/sh -c SCRIPT started in the background with
// no terminal at all (stdin /dev/null, output to /dev/null), whatever the
// test runner's own streams are.
pid_t spawn_without_terminal(const Sandbox& sb, const std::vector<std::string>& opts, const std::string& script) {
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$@\" >/dev/null 2>&1", "sh", pi_jail(), "-q", "-w", sb.ws};
  argv.insert(argv.end(), opts.begin(), opts.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  return spawn(argv, {"HOME=" + sb.home});
}

}  // namespace

TEST_CASE("a command that stops itself with no terminal stops neither pi-jail nor --timeout") {
  Sandbox sb;
  std::string report = sb.base + "/report.json";
  // The command handles TERM, so only SIGCONT after the TERM lets it run
  // its handler (exit 3); otherwise the KILL after the 30 s grace ends it.
  auto o = run({pi_jail(), "-q", "-w", sb.ws, "--timeout", "2s", "--grace", "30s", "--report", report, "--", "/bin/sh",
                "-c", "trap 'exit 3' TERM; kill -STOP $$; echo after"},
               {"HOME=" + sb.home});
  CHECK(o.status == 124);
  CHECK(o.out.empty());
  CHECK(read_file(report).find("\"command_status\": 3") != std::string::npos);
}

TEST_CASE("with no terminal a stopped command waits for pi-jail: SIGCONT resumes it, SIGTERM ends it") {
  Sandbox sb;
  for (int sig : {SIGCONT, SIGTERM}) {
    CAPTURE(sig);
    std::string marker = "stop-" + unique_token();
    std::string after = sb.ws + "/" + marker;
    pid_t pid = spawn_without_terminal(sb, {"--grace", "30s"},
                                       ": " + marker + "; trap 'exit 3' TERM; kill -STOP $$; touch " + after);
    REQUIRE(eventually([&] {
      auto cmd = host_processes_with("/bin/sh -c : " + marker);
      return cmd.size() == 1 && process_state(cmd[0]) == 'T';
    }));
    // Time for pi-jail to see the stop, as it would if it were to stop too.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(process_state(pid) != 'T');
    ::kill(pid, sig);
    int status = wait_status_guarded(pid);
    if (sig == SIGCONT) {
      CHECK(status == 0);
      CHECK(exists(after));
    } else {
      CHECK(status == 3);  // its TERM handler ran: TERM reached a stopped command
      CHECK_FALSE(exists(after));
    }
  }
}
