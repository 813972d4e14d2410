// The front door: what pi-jail says and returns for command lines and
// situations a user meets first. Each case compares the exit status and
// the message.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// pi-jail ARGS... with stdout on /dev/full.
Outcome run_to_full(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$@\" >/dev/full", "sh", pi_jail()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, env);
}

}  // namespace

TEST_CASE("options before a subcommand are understood") {
  Sandbox sb;
  auto doctor = run({pi_jail(), "-q", "doctor"});
  CHECK(doctor.status == 0);
  CHECK(contains(doctor.out, "This host can build a pi-jail jail."));
  auto explain = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain"}, {"HOME=" + sb.home});
  CHECK(explain.status == 0);
  CHECK(contains(explain.out, "layers (in order"));
  auto help = run({pi_jail(), "help"});
  CHECK(help.status == 0);
  CHECK(help.out.starts_with("usage:\n"));
  // A program named like a subcommand still runs after --.
  const std::string bin = sb.base + "/bin";
  std::filesystem::create_directories(bin);
  ::chmod(bin.c_str(), 0755);
  write_file(bin + "/doctor", "#!/bin/sh\necho the program named doctor\nexit 7\n");
  ::chmod((bin + "/doctor").c_str(), 0755);
  auto program = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--", "doctor"},
                     {"HOME=" + sb.home, "PATH=" + bin + ":/usr/bin:/bin"});
  CHECK(program.status == 7);
  CHECK(program.out == "the program named doctor\n");
}

TEST_CASE("explain --unsandboxed is refused with a sentence, before anything runs") {
  Sandbox sb;
  auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "explain", "--unsandboxed"}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.out.empty());
  CHECK(o.err ==
        "pi-jail: error: --unsandboxed applies to running a command only, not to explain (explain shows the jail's "
        "policy; --unsandboxed has none)\n");
}

TEST_CASE("a write error on stdout is reported (125), never an abort") {
  Sandbox sb;
  const std::vector<std::vector<std::string>> cases = {
      {"-w", sb.ws, "explain"},
      {"-w", sb.ws, "explain", "--json"},
      {"doctor"},
      {"doctor", "--json"},
      {"help"},
      {"--help"},
      {"--version"},
      {"shell-init", "fish"},
  };
  for (const auto& args : cases) {
    CAPTURE(args.back());
    auto o = run_to_full(args, {"HOME=" + sb.home});
    CHECK(o.status == 125);
    CHECK(contains(o.err, "pi-jail: error: write to standard output: No space left on device (ENOSPC)\n"));
  }
}

TEST_CASE("a command that exists but cannot be executed exits 126, one not found 127") {
  Sandbox sb;
  const std::string bin = sb.base + "/bin";
  std::filesystem::create_directories(bin);
  ::chmod(bin.c_str(), 0755);
  const std::string name = "pj-noexec-" + unique_token();
  write_file(bin + "/" + name, "#!/bin/sh\necho ran\n");
  ::chmod((bin + "/" + name).c_str(), 0644);
  const std::string path = "PATH=" + bin + ":/usr/bin:/bin";
  auto by_name = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "--", name}, {"HOME=" + sb.home, path});
  CHECK(by_name.status == 126);
  CHECK(by_name.err == "pi-jail: error: " + name + ": found on PATH but not executable (Permission denied)\n");
  auto by_path = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "--", bin + "/" + name}, {"HOME=" + sb.home});
  CHECK(by_path.status == 126);
  CHECK(by_path.err == "pi-jail: error: " + bin + "/" + name + ": not an executable file\n");
  auto missing =
      run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "--", name + "-missing"}, {"HOME=" + sb.home, path});
  CHECK(missing.status == 127);
  CHECK(missing.err == "pi-jail: error: " + name + "-missing: command not found on PATH\n");
}

TEST_CASE("doctor inside a jail says so instead of giving the host's fixes") {
  Sandbox sb;
  const std::string bin_dir = std::filesystem::path(pi_jail()).parent_path().string();
  auto o = sb.jail({pi_jail(), "doctor"}, {"--allow-read", bin_dir});
  CHECK(o.status == 1);
  CHECK(contains(o.out, "inside a pi-jail jail: PI_JAIL=1 and no_new_privs are set"));
  CHECK(contains(o.out, "To check the host, run `pi-jail doctor` outside the jail.\n"));
  CHECK_FALSE(contains(o.out, "fix: "));
  // PI_JAIL alone (an --unsandboxed run passes the host's environment) is
  // not taken for a jail.
  auto host = run({pi_jail(), "doctor"}, {"PI_JAIL=1"});
  CHECK(host.status == 0);
  CHECK_FALSE(contains(host.out, "inside a pi-jail jail"));
}

TEST_CASE("a workspace the caller cannot write ends before anything runs, naming the fix") {
  Sandbox sb;
  const std::string ws = sb.base + "/theirs";
  std::filesystem::create_directories(ws);
  if (::getuid() == 0) {
    // Root in CI on another user's checkout: no capabilities in the jail.
    REQUIRE(::chown(ws.c_str(), 65534, 65534) == 0);
    ::chmod(ws.c_str(), 0755);
  } else {
    ::chmod(ws.c_str(), 0555);
  }
  auto o = run({"/usr/bin/env", "-C", ws, pi_jail(), "-q", "-w", ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  const std::string uid = std::to_string(::getuid());
  CHECK(o.err.starts_with("pi-jail: error: workspace " + ws + " is not writable by you (uid " + uid +
                          ") inside the jail: it belongs to uid "));
  CHECK(contains(o.err, "; run pi-jail as the workspace's owner, make it yours (chown -R " + uid + " " + ws +
                            "), or pass -w a directory you can write\n"));
  CHECK_FALSE(exists(ws + "/.pi"));  // no placeholder was made: nothing ran
  ::chmod(ws.c_str(), 0755);
}

TEST_CASE(
    "a grant of /, of the host's /proc, /dev or /etc, and a missing --allow-write path end with 125 and the fix") {
  Sandbox sb;
  struct Case {
    std::vector<std::string> extra;
    std::string line;
  } cases[] = {
      {{"--allow-read", "/"},
       "  --allow-read: read \"/\": this grant covers / (the whole host); name the directories the command needs "
       "instead\n"},
      {{"--allow-write", "/"},
       "  --allow-write: write \"/\": this grant covers / (the whole host); name the directories the command needs "
       "instead\n"},
      {{"--allow-read", "/proc"},
       "  --allow-read: read \"/proc\": the jail has its own /proc, showing its own processes; the host's would show "
       "every host process: leave it out\n"},
      {{"--allow-read", "/proc/self"},
       "  --allow-read: read \"/proc/self\": the jail has its own /proc, showing its own processes; the host's would "
       "show every host process: leave it out\n"},
      {{"--allow-read", "/dev"},
       "  --allow-read: read \"/dev\": the jail builds its own /dev (null, zero, full, random, urandom, tty, its own "
       "pts and shm); grant single device files instead (e.g. /dev/kvm)\n"},
      {{"--allow-read", "/etc"},
       "  --allow-read: read \"/etc\": the jail shows a chosen set of /etc files and makes some itself; grant the "
       "files or directories the command needs instead (e.g. /etc/ssl)\n"},
      {{"--allow-write", sb.outside + "/missing"},
       "  --allow-write: " + sb.outside + "/missing does not exist; create it first (mkdir -p " + sb.outside +
           "/missing) or leave the option out\n"},
      {{"--allow-read", sb.outside + "/missing"},
       "  --allow-read: " + sb.outside + "/missing does not exist; create it first (mkdir -p " + sb.outside +
           "/missing) or leave the option out\n"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    auto o = sb.jail({"/bin/true"}, c.extra);
    CHECK(o.status == 125);
    CHECK(o.err == "pi-jail: error: the policy has problems; nothing was run:\n" + c.line);
  }
}

TEST_CASE("without the system's CA certificates a pi run stops (125) naming the package, and doctor says so") {
  Sandbox sb;
  // In a mount namespace of the test's own (in a user namespace, so as uid
  // 65534 too) whose /etc/ssl/certs is empty: Debian's other bundle paths
  // are absent anyway.
  auto without_bundle = [&](const std::string& command) {
    return run({"/usr/bin/unshare", "-Urm", "/bin/sh", "-c",
                "mount -t tmpfs none /etc/ssl/certs && for p in /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; "
                "do [ ! -e $p ] || exit 99; done && cd " +
                    sb.ws + " && exec " + pi_jail() + " " + command},
               {"HOME=" + sb.home});
  };
  auto o = without_bundle("-q -w " + sb.ws + " -- /bin/true");
  CAPTURE(o.err);
  CHECK(o.status == 125);
  CHECK(contains(o.err, "step: write the jail's CA bundle: no system CA bundle"));
  CHECK(contains(o.err, "install ca-certificates"));
  auto doctor = without_bundle("doctor");
  CAPTURE(doctor.out);
  CHECK(doctor.status == 1);
  CHECK(contains(doctor.out, "the system's CA certificates"));
  CHECK(contains(doctor.out, "apt-get install ca-certificates"));
  CHECK_FALSE(contains(doctor.out, "This host can build a pi-jail jail."));
  // The README's troubleshooting quotes the message.
  CHECK(contains(read_file(data_dir() + "/README.md"),
                 "`  step: write the jail's CA bundle: no system CA bundle (/etc/ssl/certs/ca-certificates.crt, ...) "
                 "to add the run's CA to; install ca-certificates`"));
  CHECK(contains(o.err,
                 "  step: write the jail's CA bundle: no system CA bundle (/etc/ssl/certs/ca-certificates.crt, ...) "
                 "to add the run's CA to; install ca-certificates\n"));
  // And here, with them, doctor names the bundle.
  auto here = run({pi_jail(), "doctor"});
  CHECK(contains(here.out, "/etc/ssl/certs/ca-certificates.crt"));
}
