// The seccomp filter and Landlock, seen from inside real jails. Each call
// is chosen so that the filter's answer differs from what the kernel
// would say without it (no capability, bad pointer, ...).
#include <doctest/doctest.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>

#include <csignal>
#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

std::string nr(const char* name) {
  int n = seccomp_syscall_resolve_name(name);
  REQUIRE(n >= 0);
  return std::to_string(n);
}

std::string num(unsigned long long v) { return std::to_string(v); }

}  // namespace

TEST_CASE("denied system calls fail with the table's errno inside a real jail") {
  Sandbox sb;
  struct Case {
    const char* syscall;
    std::vector<std::string> args;
    const char* want;
  } cases[] = {
      {"unshare", {num(CLONE_NEWUSER)}, "EPERM"},
      {"unshare", {num(CLONE_NEWNET)}, "EPERM"},
      {"clone", {num(CLONE_NEWUSER | SIGCHLD)}, "EPERM"},
      {"clone3", {"0", "0"}, "ENOSYS"},
      {"open_tree", {"-100", "0", "0"}, "ENOSYS"},
      {"fsopen", {"0", "0"}, "ENOSYS"},
      {"mount_setattr", {"-1", "0", "0", "0", "0"}, "ENOSYS"},
      {"io_uring_setup", {"1", "0"}, "ENOSYS"},
      {"setns", {"-1", "0"}, "EPERM"},
      {"chroot", {"0"}, "EPERM"},
      {"keyctl",
       {num(KEYCTL_GET_KEYRING_ID), num(static_cast<unsigned long long>(KEY_SPEC_SESSION_KEYRING)), "0"},
       "EPERM"},
      {"add_key", {"0", "0", "0", "0", "0"}, "EPERM"},
      {"bpf", {"0", "0", "0"}, "EPERM"},
      {"perf_event_open", {"0", "0", "0", "0", "0"}, "EPERM"},
      {"name_to_handle_at", {"-100", "0", "0", "0", "0"}, "EPERM"},
      {"ptrace", {num(PTRACE_TRACEME)}, "EPERM"},
      {"process_vm_readv", {"1", "0", "0", "0", "0", "0"}, "EPERM"},
      {"kcmp", {"1", "1", "0", "0", "0"}, "EPERM"},
      {"personality", {num(READ_IMPLIES_EXEC)}, "EPERM"},
      {"ioctl", {"0", num(TIOCSTI), "0"}, "EPERM"},
      {"ioctl", {"0", num(0xffffffff00000000ULL | TIOCSTI), "0"}, "EPERM"},
      {"ioctl", {"0", num(TIOCLINUX), "0"}, "EPERM"},
      {"socket", {num(AF_PACKET), num(SOCK_RAW), "0"}, "EAFNOSUPPORT"},
      {"socket", {num(AF_VSOCK), num(SOCK_STREAM), "0"}, "EAFNOSUPPORT"},
      {"seccomp", {num(SECCOMP_SET_MODE_FILTER), num(SECCOMP_FILTER_FLAG_NEW_LISTENER), "0"}, "EPERM"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.syscall);
    CAPTURE(c.args.size() > 1 ? c.args[1] : std::string());
    std::vector<std::string> args{"syscall", nr(c.syscall)};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto o = sb.probe(args);
    CHECK(trim(o.out) == c.want);
  }
  // Allowed calls still work: a unix socket, an inet socket, personality query.
  CHECK(trim(sb.probe({"syscall", nr("socket"), num(AF_UNIX), num(SOCK_STREAM), "0"}).out) == "ok");
  CHECK(trim(sb.probe({"syscall", nr("socket"), num(AF_INET6), num(SOCK_DGRAM), "0"}).out) == "ok");
  CHECK(trim(sb.probe({"syscall", nr("personality"), "0"}).out) == "ok");
}

TEST_CASE("an operator's hardening switches load the filter that lifts their rows, and only theirs") {
  // pi-jail carries one built-in program per combination of the switches:
  // each combination must get its own.
  Sandbox sb;
  struct Variant {
    const char* hardening;
    const char* ptrace;  // ptrace(PTRACE_TRACEME)
    const char* userns;  // unshare(CLONE_NEWUSER)
  } variants[] = {
      {"", "EPERM", "EPERM"},
      {"unsafe_allow_ptrace = true\n", "ok", "EPERM"},
      {"unsafe_nested_user_namespaces = true\n", "EPERM", "ok"},
      {"unsafe_allow_ptrace = true\nunsafe_nested_user_namespaces = true\n", "ok", "ok"},
  };
  for (const auto& v : variants) {
    CAPTURE(v.hardening);
    const std::string config = sb.outside + "/operator.toml";
    write_file(config, std::string("[hardening]\n") + v.hardening);
    const std::vector<std::string> cfg{"--config", config};
    CHECK(trim(sb.probe({"syscall", nr("ptrace"), num(PTRACE_TRACEME)}, cfg).out) == v.ptrace);
    CHECK(trim(sb.probe({"syscall", nr("unshare"), num(CLONE_NEWUSER)}, cfg).out) == v.userns);
    // The rows no switch lifts hold in every variant.
    CHECK(trim(sb.probe({"syscall", nr("unshare"), num(CLONE_NEWNET)}, cfg).out) == "EPERM");
    CHECK(trim(sb.probe({"syscall", nr("socket"), num(AF_VSOCK), num(SOCK_STREAM), "0"}, cfg).out) == "EAFNOSUPPORT");
  }
}

TEST_CASE("the i386 and x32 entry points kill the process") {
  Sandbox sb;
  // A kernel without IA-32 emulation (ia32_emulation=0, or a host that
  // runs 64-bit user code only) has no i386 entry point at all: int $0x80
  // faults (SIGSEGV) before any filter sees it, outside the jail as
  // inside. Elsewhere the jail's filter kills it (SIGSYS). Either way the
  // call never runs: no "ok" line.
  const int outside = run({probe(), "int80"}).status;
  const int expected = outside == 128 + SIGSEGV ? 128 + SIGSEGV : 128 + SIGSYS;
  CAPTURE(outside);
  auto i386 = sb.probe({"int80"});
  CHECK(i386.status == expected);
  CHECK(i386.out.empty());
  auto x32 = sb.probe({"x32"});
  CHECK(x32.status == 128 + SIGSYS);
}

TEST_CASE("unshare -U fails inside the jail") {
  Sandbox sb;
  auto o = sb.jail({"/usr/bin/unshare", "-U", "/bin/true"});
  CHECK(o.status != 0);
  CHECK(o.err.find("Operation not permitted") != std::string::npos);
}

TEST_CASE("Landlock holds on its own where the mount is writable") {
  Sandbox sb;
  auto plain = sb.probe({"write", "/tmp/x"});
  CHECK(trim(plain.out) == "ok");
  auto narrowed = sb.probe({"write", "/tmp/x"}, {"--test-landlock-read-only", "/tmp"});
  CHECK(trim(narrowed.out) == "EACCES");
  // Landlock rights add up along a path: the workspace lies under the
  // writable /tmp here, so narrowing it alone is refused, not ignored.
  auto ws = sb.probe({"write", sb.ws + "/y"}, {"--test-landlock-read-only", sb.ws});
  CHECK(ws.status == 125);
  CHECK(ws.err.find("covers it") != std::string::npos);
  CHECK_FALSE(exists(sb.ws + "/y"));
  auto status = sb.probe({"status"});
  CHECK(status.out.find("Seccomp:\t2") != std::string::npos);
}

TEST_CASE("real workloads still work inside") {
  Sandbox sb;
  const std::string script = R"SH(set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@e
git init -q . && echo x > a && git add a && git commit -qm a && git log --oneline | wc -l
printf '#include <stdio.h>\nint main(void){puts("c-ok");return 0;}\n' > t.c
gcc t.c -o t && ./t && gcc t.c -o /tmp/t && /tmp/t
/usr/bin/python3 -c '
import multiprocessing as mp
def sq(x): return x * x
if __name__ == "__main__":
    with mp.Pool(2) as p: print("py", sum(p.map(sq, range(10))))
'
node -e '
const { execSync } = require("child_process");
const { Worker } = require("worker_threads");
console.log(execSync("echo node-child").toString().trim());
new Worker("require(\"worker_threads\").parentPort.postMessage(42)", { eval: true }).on("message", (m) => console.log("worker", m));
'
npm --version >/dev/null && echo npm-ok
script -qec 'tty' /dev/null
)SH";
  auto o = sb.jail({"/bin/bash", "-c", script});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  for (const char* line :
       {"1\n", "c-ok\nc-ok\n", "py 285\n", "node-child\n", "worker 42\n", "npm-ok\n", "/dev/pts/0"}) {
    CAPTURE(line);
    CHECK(o.out.find(line) != std::string::npos);
  }
}
