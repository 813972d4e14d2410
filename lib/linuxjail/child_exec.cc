// The command's process: every privilege dropped, Landlock, the syscall
// filter, execve. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>

#include "linuxjail/sys.h"

namespace pj::linuxjail::in_child {

// The command's last steps: its own process group in init's session (the
// foreground group of the jail's PTY, as a shell runs a job), only fds
// 0-2, no privilege of any kind, Landlock, then the syscall filter and
// execve. Exec failures exit 127 (not found) or 126.
//
// Why a group and not a session of its own: a process group whose
// parents are all outside its session is orphaned, and the kernel drops
// SIGTSTP, SIGTTIN and SIGTTOU sent to it (kernel/signal.c), so Ctrl-Z
// and a program's own `kill(0, SIGTSTP)` would do nothing. Init, the
// parent, is in the same session: the stops take effect.
[[noreturn]] void exec_command(const ChildPlan& p, int slave, int ruleset) {
  if (::setpgid(0, 0) != 0) fail(Stage::new_session, errno);
  if (slave >= 0) {
    // Take the foreground before exec, so the first read of the terminal
    // is not a background read (SIGTTIN). tcsetpgrp from a background
    // group raises SIGTTOU unless it is blocked; the mask is cleared below.
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    if (::sigprocmask(SIG_BLOCK, &ttou, nullptr) != 0) fail(Stage::signal_mask, errno);
    pid_t self = ::getpid();
    if (::ioctl(slave, TIOCSPGRP, &self) != 0) fail(Stage::terminal, errno);
    for (int fd = 0; fd < 3; ++fd)
      if ((p.pty_fds & (1U << fd)) && ::dup2(slave, fd) < 0) fail(Stage::terminal, errno);
    if (slave > 2) ::close(slave);
  }
  if (::chdir(p.cwd) != 0) fail(Stage::workdir, errno);
  if (sys::close_range_cloexec(3) != 0) fail(Stage::close_fds, errno);
  rlimit no_core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0) fail(Stage::resource_limits, errno);
  constexpr unsigned kSecbits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                                SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::cap_set_secbits(kSecbits) != 0) fail(Stage::securebits, errno);
  // The kernel's capabilities are numbered 0..CAP_LAST_CAP without a gap,
  // and PR_CAPBSET_DROP fails with EINVAL exactly past the last
  // (security/commoncap.c cap_valid()): drop until then. Any other error
  // fails the run.
  for (cap_value_t c = 0;; ++c) {
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0) continue;
    if (errno != EINVAL || c == 0) fail(Stage::capabilities, errno);
    break;
  }
  // One call, not libcap's cap_reset_ambient() (which asks about each
  // capability first).
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) fail(Stage::capabilities, errno);
  if (::cap_set_proc(p.empty_caps) != 0) fail(Stage::capabilities, errno);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(Stage::no_new_privs, errno);
  landlock_enforce(ruleset);  // built by init (child_landlock.cc)
  // Last: from here on the table in syscall_table.cc rules every call.
  if (p.command_filter_enforced && ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &p.command_filter) != 0)
    fail(Stage::seccomp, errno);
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail(Stage::signal_mask, errno);
  ::execve(p.exec_path, p.argv, p.envp);
  int err = errno;
  report(Stage::exec, err, -1);
  ::_exit(err == ENOENT || err == ENOTDIR || err == ELOOP ? 127 : 126);
}

}  // namespace pj::linuxjail::in_child
