// The syscall tables: data only, no libseccomp. The compiler
// (syscall_filter.cc) and the build-time generator (filter_gen.cc) read
// them; explain prints them.
#include <sched.h>
#include <sys/personality.h>
#include <sys/socket.h>

#include <cerrno>

#include "linuxjail/syscall_filter.h"

namespace pj::linuxjail {

namespace {

using Kind = ArgTest::Kind;

constexpr ArgTest always{};
constexpr ArgTest flag(unsigned arg, std::uint64_t bits) { return {Kind::bits_set, arg, bits, {}}; }
constexpr ArgTest low32(unsigned arg, std::uint64_t value) { return {Kind::low32_equals, arg, value, {}}; }

constexpr std::uint64_t kSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
constexpr ArgTest socket_family{Kind::not_one_of, 0, 0, kSocketFamilies};
// personality(2): only the harmless persona bits (32-bit uname, 2.6-style
// uname); READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and the rest are refused.
constexpr ArgTest harmless_persona{Kind::bits_outside, 0, static_cast<std::uint64_t>(PER_LINUX32) | UNAME26, {}};

constexpr unsigned kTiocsti = 0x5412;  // asm-generic/ioctls.h
constexpr unsigned kTioclinux = 0x541C;
constexpr unsigned kNewListener = 1U << 3;  // SECCOMP_FILTER_FLAG_NEW_LISTENER

// The table. Default: allow. Every row denies, with its reason. Calls the
// filter cannot inspect, or that are newer than this table, answer ENOSYS
// so that libraries fall back to calls the table can judge.
constexpr SyscallRow kCommandTable[] = {
    // Namespaces and mounts: the jail's shape is fixed from outside.
    {"mount", EPERM, always, Gate::none, "the filesystem view is fixed by pi-jail"},
    {"umount2", EPERM, always, Gate::none, "the filesystem view is fixed by pi-jail"},
    {"pivot_root", EPERM, always, Gate::none, "the filesystem view is fixed by pi-jail"},
    {"chroot", EPERM, always, Gate::none, "the filesystem view is fixed by pi-jail"},
    {"setns", EPERM, always, Gate::none, "no joining other namespaces"},
    {"unshare", EPERM, flag(0, CLONE_NEWNS), Gate::none, "no new mount namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWCGROUP), Gate::none, "no new cgroup namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWUTS), Gate::none, "no new UTS namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWIPC), Gate::none, "no new IPC namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWUSER), Gate::nested_userns, "no nested user namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWPID), Gate::none, "no new PID namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWNET), Gate::none, "no new network namespace"},
    {"unshare", EPERM, flag(0, CLONE_NEWTIME), Gate::none, "no new time namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWNS), Gate::none, "no new mount namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWCGROUP), Gate::none, "no new cgroup namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWUTS), Gate::none, "no new UTS namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWIPC), Gate::none, "no new IPC namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWUSER), Gate::nested_userns, "no nested user namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWPID), Gate::none, "no new PID namespace"},
    {"clone", EPERM, flag(0, CLONE_NEWNET), Gate::none, "no new network namespace"},
    {"clone3", ENOSYS, always, Gate::none, "its flags live in memory the filter cannot read; libc falls back to clone"},
    {"open_tree", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"move_mount", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"fsopen", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"fsconfig", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"fsmount", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"fspick", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"mount_setattr", ENOSYS, always, Gate::none, "new mount API: no mounts inside"},
    {"io_uring_setup", ENOSYS, always, Gate::none, "io_uring runs calls the filter never sees"},
    {"io_uring_enter", ENOSYS, always, Gate::none, "io_uring runs calls the filter never sees"},
    {"io_uring_register", ENOSYS, always, Gate::none, "io_uring runs calls the filter never sees"},
    // Kernel attack surface no agent needs.
    {"add_key", EPERM, always, Gate::none, "kernel keyrings are shared outside the jail"},
    {"request_key", EPERM, always, Gate::none, "kernel keyrings are shared outside the jail"},
    {"keyctl", EPERM, always, Gate::none, "kernel keyrings are shared outside the jail"},
    {"bpf", EPERM, always, Gate::none, "eBPF is kernel attack surface"},
    {"perf_event_open", EPERM, always, Gate::none, "performance counters leak and attack the kernel"},
    {"userfaultfd", EPERM, always, Gate::none, "used to win kernel races"},
    {"init_module", EPERM, always, Gate::none, "no kernel modules"},
    {"finit_module", EPERM, always, Gate::none, "no kernel modules"},
    {"delete_module", EPERM, always, Gate::none, "no kernel modules"},
    {"kexec_load", EPERM, always, Gate::none, "no kernel replacement"},
    {"kexec_file_load", EPERM, always, Gate::none, "no kernel replacement"},
    {"reboot", EPERM, always, Gate::none, "no reboot"},
    {"swapon", EPERM, always, Gate::none, "no swap control"},
    {"swapoff", EPERM, always, Gate::none, "no swap control"},
    {"acct", EPERM, always, Gate::none, "no process accounting"},
    {"quotactl", EPERM, always, Gate::none, "no quota control"},
    {"quotactl_fd", EPERM, always, Gate::none, "no quota control"},
    {"syslog", EPERM, always, Gate::none, "the kernel log is the host's"},
    {"iopl", EPERM, always, Gate::none, "no raw I/O ports"},
    {"ioperm", EPERM, always, Gate::none, "no raw I/O ports"},
    {"open_by_handle_at", EPERM, always, Gate::none, "opens files by handle, around the mount view"},
    {"name_to_handle_at", EPERM, always, Gate::none, "file handles serve only open_by_handle_at"},
    {"settimeofday", EPERM, always, Gate::none, "the clock is the host's"},
    {"clock_settime", EPERM, always, Gate::none, "the clock is the host's"},
    {"clock_adjtime", EPERM, always, Gate::none, "the clock is the host's"},
    {"adjtimex", EPERM, always, Gate::none, "the clock is the host's"},
    {"uselib", EPERM, always, Gate::none, "obsolete"},
    {"_sysctl", EPERM, always, Gate::none, "obsolete"},
    {"lookup_dcookie", EPERM, always, Gate::none, "obsolete profiling interface"},
    {"nfsservctl", EPERM, always, Gate::none, "obsolete"},
    {"vhangup", EPERM, always, Gate::none, "terminal control is pi-jail's"},
    {"modify_ldt", EPERM, always, Gate::none, "16-bit segment emulation"},
    {"move_pages", EPERM, always, Gate::none, "NUMA page moves across processes"},
    {"migrate_pages", EPERM, always, Gate::none, "NUMA page moves across processes"},
    {"personality", EPERM, harmless_persona, Gate::none,
     "persona bits that weaken the process (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...)"},
    // Debugging other processes.
    {"ptrace", EPERM, always, Gate::debugging, "debugging other processes (operator switch)"},
    {"process_vm_readv", EPERM, always, Gate::debugging, "reading other processes' memory (operator switch)"},
    {"process_vm_writev", EPERM, always, Gate::debugging, "writing other processes' memory (operator switch)"},
    {"pidfd_getfd", EPERM, always, Gate::debugging, "stealing other processes' file descriptors (operator switch)"},
    {"kcmp", EPERM, always, Gate::debugging, "comparing other processes' kernel objects (operator switch)"},
    // Terminal injection, compared on the low 32 bits: the kernel ignores
    // the high bits of the command (CVE-2019-10063).
    {"ioctl", EPERM, low32(1, kTiocsti), Gate::none, "TIOCSTI pushes input into a terminal"},
    {"ioctl", EPERM, low32(1, kTioclinux), Gate::none, "TIOCLINUX can paste into a console"},
    // Sockets the network namespace does not isolate (AF_VSOCK reaches the
    // hypervisor, ...).
    {"socket", EAFNOSUPPORT, socket_family, Gate::none, "only unix, inet, inet6 and netlink sockets"},
    {"socketpair", EAFNOSUPPORT, socket_family, Gate::none, "only unix, inet, inet6 and netlink sockets"},
    // A notifier would let the jail answer its own children's syscalls.
    {"seccomp", EPERM, flag(1, kNewListener), Gate::none, "no user-notification listeners"},
};

constexpr std::string_view kInitAllowlist[] = {
    "rt_sigtimedwait",
    "rt_sigprocmask",
    "rt_sigreturn",
    "wait4",
    "waitid",
    "kill",
    "clock_gettime",
    "clock_nanosleep",
    "nanosleep",
    "restart_syscall",
    "close",
    "close_range",
    "exit",
    "exit_group",
    "getpid",
    "write",
#ifdef PJ_SANITIZED
    // Sanitizer builds only (tests): what the ASan/UBSan runtime calls on
    // _exit and when it reports.
    "sigaltstack",
    "mmap",
    "munmap",
    "mprotect",
    "madvise",
    "gettid",
    "tgkill",
    "sched_yield",
    "futex",
    "writev",
    "openat",
    "read",
    "pread64",
    "readlink",
    "lseek",
    "newfstatat",
    "fstat",
    "prlimit64",
    "getrlimit",
    "prctl",
    "rt_sigaction",
#endif
};

}  // namespace

std::span<const SyscallRow> command_table() { return kCommandTable; }
std::span<const std::string_view> init_allowlist() { return kInitAllowlist; }

}  // namespace pj::linuxjail
