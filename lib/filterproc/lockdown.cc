#include "filterproc/lockdown.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>

#include "filterproc/lockdown_common.h"
#include "linuxjail/landlock.h"
#include "linuxjail/sys.h"
#include "netproxy/relay.h"
#include "util/startup_pages.h"

namespace pj::filterproc {

namespace {

// The allowlist: what the relay's loop (epoll, splice, sockets), the
// allocator, the clock and abort() need, found by tracing the network
// tests (strace -f -c of the filter process). A row's reason is its
// comment. Everything else fails with EPERM: files (open, stat, exec),
// processes (fork, ptrace, kill, process_vm_*), namespaces, mounts.
const std::vector<std::string> kAllowed = {
    // the relay: readiness, bytes, pipes between sockets
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "poll",
    "ppoll",
    "read",
    "write",
    "readv",
    "writev",
    "splice",
    "pipe2",
    "close",
    "eventfd2",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    // sockets: accept from the jail's listeners, connect out (socket() is
    // checked below), the control socket's records
    "accept4",
    "accept",
    "connect",
    "shutdown",
    "setsockopt",
    "getsockopt",
    "getsockname",
    "getpeername",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    // memory, time, randomness, its own identity
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    "futex",
    "clock_gettime",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "getrandom",
    "getpid",
    "gettid",
    "sched_yield",
    "restart_syscall",
    // signals to itself (abort()), and ending
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigaction",
    "exit",
    "exit_group",
    // threads of the credential filter, one per intercepted connection
    // (clone only with CLONE_THREAD, below)
    "set_robust_list",
    "rseq",
#ifdef PJ_SANITIZED
    // Sanitizer builds only (tests): what the ASan/UBSan runtime calls on
    // exit and when it reports, as the jail's init allows it.
    "sigaltstack",
    "pread64",
    "readlink",
    "lseek",
    "newfstatat",
    "fstat",
    "prlimit64",
    "getrlimit",
    "prctl",
    // and in each new thread (a failure there is a fatal sanitizer error)
    "sched_getaffinity",
#endif
};

// Landlock and capabilities are per thread: a second thread would keep
// what this one gives up.
util::Status check_single_threaded() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return stage_failed("count threads: /proc/self/task", errno);
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  if (n != 1) return util::Error::invalid(fmt::format("lock down (threads): the filter has {} threads, not 1", n));
  return {};
}

util::Status set_limits(const LockdownLimits& l) {
  if (auto st = set_posix_limits(l); !st) return st;
  // RLIMIT_NPROC counts the real uid's threads host-wide: left alone.
  return set_limit(RLIMIT_MEMLOCK, 0, "RLIMIT_MEMLOCK");
}

util::Status drop_capabilities() {
  for (unsigned long cap = 0; cap <= 63; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM)
      return stage_failed("drop the bounding set", errno);
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return stage_failed("clear the ambient set", errno);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) return stage_failed("capset", errno);
  // Without CAP_SETPCAP the bounding set could not be dropped (EPERM
  // above): then it must already be empty of what matters, which the
  // empty permitted set guarantees for this process and its execs (none).
  return {};
}

// landlock_ruleset_attr as of ABI 6 (the installed headers predate its
// net and scoped fields).
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
constexpr std::uint64_t kNetBindTcp = 1ULL << 0;  // ABI 4

util::Status landlock_nothing() {
  const int abi = linuxjail::sys::landlock_abi();
  if (abi < 1) return {};  // no Landlock: the seccomp allowlist alone keeps files shut
  RulesetAttr attr{linuxjail::landlock_handled_fs(abi), abi >= 4 ? kNetBindTcp : 0, linuxjail::landlock_scopes(abi)};
  const size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(std::uint64_t) : sizeof(std::uint64_t);
  int fd = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0U));
  if (fd < 0) return stage_failed("Landlock ruleset", errno);
  long rc = ::syscall(SYS_landlock_restrict_self, fd, 0U);
  int err = errno;
  ::close(fd);
  if (rc != 0) return stage_failed("Landlock restrict_self", err);
  return {};
}

util::Status seccomp_allowlist() {
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (!ctx) return stage_failed("seccomp_init", ENOMEM);
  auto fail = [&ctx](const std::string& what, int rc) {
    ::seccomp_release(ctx);
    return util::Error::from_errno("lock down (seccomp: " + what + ")", -rc);
  };
  for (const auto& name : kAllowed) {
    int nr = ::seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0); rc != 0) return fail(name, rc);
  }
  // Sockets: only the families it connects out with.
  // An argument test, built without libseccomp's SCMP_A0 macro (a C
  // compound literal, which clang refuses in C++).
  auto first_arg_is = [](scmp_datum_t v) { return scmp_arg_cmp{0, SCMP_CMP_EQ, v, 0}; };
  auto second_arg_is = [](scmp_datum_t v) { return scmp_arg_cmp{1, SCMP_CMP_EQ, v, 0}; };
  for (int family : {AF_INET, AF_INET6})
    if (int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                    first_arg_is(static_cast<scmp_datum_t>(family)));
        rc != 0)
      return fail("socket", rc);
  // fcntl: descriptor flags, and the size of the relay's own pipes. F_SETOWN
  // with F_SETSIG would have the kernel signal any process of the user for it.
  for (int cmd : {F_GETFL, F_SETFL, F_GETFD, F_SETFD, F_DUPFD_CLOEXEC, F_SETPIPE_SZ})
    if (int rc =
            ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, second_arg_is(static_cast<scmp_datum_t>(cmd)));
        rc != 0)
      return fail("fcntl", rc);
  // Threads, never processes: clone with exactly the flags glibc's
  // pthread_create passes (the flags are its first argument on x86-64 and
  // arm64). clone3 passes its flags in memory, which seccomp cannot read:
  // ENOSYS, and glibc falls back to clone.
  constexpr scmp_datum_t kThreadFlags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SYSVSEM | CLONE_SIGHAND |
                                        CLONE_THREAD | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  if (int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, first_arg_is(kThreadFlags)); rc != 0)
    return fail("clone", rc);
  if (int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc != 0) return fail("clone3", rc);
  // Signals: only to itself (abort() raises SIGABRT with tgkill).
  if (int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                                  first_arg_is(static_cast<scmp_datum_t>(::getpid())));
      rc != 0)
    return fail("tgkill", rc);
  if (int rc = ::seccomp_load(ctx); rc != 0) return fail("load", rc);
  ::seccomp_release(ctx);
  return {};
}

}  // namespace

const std::vector<std::string>& filter_allowed_syscalls() { return kAllowed; }

void release_startup() {
  // One malloc arena for every thread from here on: glibc gives each
  // worker thread an arena of its own otherwise (mallopt(3)), whose pages
  // stay with it; the workers' TLS buffers come from the one heap instead.
  ::mallopt(M_ARENA_MAX, 1);
  util::drop_startup_pages();
}

void before_tls() { util::map_code_by_page(); }

#ifdef PJ_TEST_SWITCHES
filterlink::ProbeResult probe_lockdown(const std::string& home) {
  Probe p;
  probe_posix(p, home);
  p.attempt("open /", opens("/", O_PATH));
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  char* const envp[] = {nullptr};
  p.attempt("execve /bin/true", ::execve("/bin/true", argv, envp) == 0);
  const pid_t supervisor = ::getppid();
  p.attempt("ptrace the supervisor", ::ptrace(PTRACE_ATTACH, supervisor, nullptr, nullptr) == 0);
  char buf[8];
  iovec local{buf, sizeof buf}, remote{reinterpret_cast<void*>(0x400000), sizeof buf};
  p.attempt("read the supervisor's memory", ::process_vm_readv(supervisor, &local, 1, &remote, 1, 0) >= 0);
  // What it must still do: grow a relay's pipe for a bulk transfer.
  int fds[2];
  const bool piped = ::pipe2(fds, O_CLOEXEC) == 0;
  // As the relay asks for it (relay.h).
  p.attempt("grow a relay pipe",
            piped && netproxy::grow_pipe(fds[1], netproxy::kBulkPipeSize, netproxy::kPipeSize) > netproxy::kPipeSize);
  if (piped) ::close(fds[0]), ::close(fds[1]);
  return std::move(p.result);
}
#endif

util::Status lock_down(const LockdownLimits& limits) {
  if (auto st = check_single_threaded(); !st) return st;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return stage_failed("no_new_privs", errno);
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return stage_failed("not dumpable", errno);
  if (auto st = set_limits(limits); !st) return st;
  if (auto st = drop_capabilities(); !st) return st;
  if (auto st = landlock_nothing(); !st) return st;
  return seccomp_allowlist();
}

}  // namespace pj::filterproc
