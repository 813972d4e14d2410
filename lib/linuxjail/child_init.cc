// PID 1 of the jail. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>

#include "linuxjail/sys.h"

namespace pj::linuxjail::in_child {

namespace {

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

// Overwrite `len` bytes at `at` with `name` and NULs.
void blank(char* at, size_t len, const char* name) {
  size_t i = 0;
  for (; name && name[i] && i + 1 < len; ++i) at[i] = name[i];
  for (; i < len; ++i) at[i] = 0;
}

// Init is a clone of pi-jail: its memory holds what pi-jail held before
// the clone (the host's whole environment, credentials read for the
// network filter, the command line). The command runs as the same user
// but cannot read /proc/1/mem or /proc/1/environ, nor ptrace init: init
// holds capabilities in the jail's user namespace that the command
// lacks (security/commoncap.c cap_ptrace_access_check; the containment
// tests check the refusal). Init stays dumpable, so that the host's user
// can still inspect it. /proc/1/cmdline is readable by anyone: init's
// copies of pi-jail's argument and environment strings are blanked,
// before the command exists, so no process of the jail ever sees them.
void make_private(const ChildPlan& p) {
  blank(p.own.args, p.own.args_len, "pi-jail-init");
  blank(p.own.env, p.own.env_len, nullptr);
}

}  // namespace

// PID 1 of the jail: forward signals to the command, reap everything, and
// when the command exits end the rest (TERM, grace, KILL) and exit with
// the command's status. Signals reach a PID-namespace init only when it
// handles them or has them blocked (kernel/signal.c sig_ignored()): the
// set stays blocked and is taken with sigwaitinfo.
[[noreturn]] void run_init(const ChildPlan& p, int ruleset) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP})
    sigaddset(&set, s);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) fail(Stage::signal_mask, errno);
  if (::setsid() < 0) fail(Stage::new_session, errno);
  make_private(p);

  // Init leads the session and holds the PTY as its controlling terminal;
  // the command's group is the terminal's foreground (exec_command).
  const int slave = p.pty ? open_terminal(p) : -1;
  if (slave >= 0 && ::ioctl(slave, TIOCSCTTY, 0) != 0) fail(Stage::terminal, errno);
  // vfork(2): the command's process borrows init's memory until its
  // execve(2), and init waits until then. Copying init's page tables (a
  // clone of pi-jail's) for a process that replaces them at once, and
  // tearing the copy down at its exec, cost 0.26 ms a run (tests/bench).
  // What exec_command() does before the exec is system calls on the
  // child's own task (credentials, filters, limits, its copy of the fd
  // table) and exits with _exit(2); no signal handler is installed in init
  // (pi-jail installs none before the clone), so none runs on the shared
  // stack.
  const pid_t child = ::vfork();
  if (child < 0) fail(Stage::fork_command, errno);
  if (child == 0) exec_command(p, slave, ruleset);
  if (ruleset >= 0) ::close(ruleset);
  // Both sides set the group (as shells do); the command set it first.
  ::setpgid(child, child);
  if (slave >= 0) {
    ::close(slave);
    // The command has the PTY where pi-jail had the outer terminal; init
    // keeps no copy of it (supervisor/terminal.h: the jail never holds
    // the outer terminal; pi-jail closed what it inherited above 2). A
    // bit of pty_fds says the fd was a terminal when the streams were
    // chosen, and pi-jail replaces none of 0-2: no socket of init's is there.
    for (int fd = 0; fd < 3; ++fd)
      if (p.pty_fds & (1U << fd)) ::close(fd);
  }
  // Init's own filter, allowing only what the loop below calls; loaded
  // while the sync fd is still open, so a failure is reported (init's exit
  // takes the command with it: the PID namespace ends).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(Stage::init_seccomp, errno);
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &p.init_filter) != 0) fail(Stage::init_seccomp, errno);
  ::close(p.sync_fd);

  int code = -1;
  while (code < 0) {
    siginfo_t si;
    int sig = ::sigwaitinfo(&set, &si);
    if (sig < 0) continue;
    if (sig == SIGCONT || sig == SIGTSTP) {
      // Resume, or stop, the command's whole process group, as a terminal
      // does (SIGTSTP reaches pi-jail when its own terminal is not raw).
      ::kill(-static_cast<pid_t>(child), sig);
      ::kill(static_cast<pid_t>(child), sig);  // it may have left its group
      continue;
    }
    if (sig != SIGCHLD) {
      ::kill(static_cast<pid_t>(child), sig);
      continue;
    }
    int status;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
      if (pid != child) continue;
      if (WIFSTOPPED(status)) {
        // The command stopped: tell the supervisor which signal stopped
        // it; on a terminal it gives the terminal back and stops the same way.
        char note[2] = {kControlStopped, static_cast<char>(WSTOPSIG(status))};
        ssize_t n = ::write(p.control_fd, note, sizeof note);
        (void)n;
      } else {
        code = exit_code(status);
      }
    }
  }

  // The command is gone: everything else in the namespace goes too.
  ::kill(-1, SIGTERM);
  ::kill(-1, SIGCONT);
  timespec deadline;
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += p.grace_ms / 1000;
  deadline.tv_nsec += (p.grace_ms % 1000) * 1000000L;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  while (true) {
    pid_t r;
    while ((r = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (r < 0 && errno == ECHILD) break;  // nothing of the jail is left
    timespec now;
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    long left_ns = (deadline.tv_sec - now.tv_sec) * 1000000000L + (deadline.tv_nsec - now.tv_nsec);
    if (left_ns <= 0) {
      ::kill(-1, SIGKILL);
      while (::waitpid(-1, nullptr, 0) > 0) {
      }
      break;
    }
    timespec wait{left_ns / 1000000000L, left_ns % 1000000000L};
    ::sigtimedwait(&chld, nullptr, &wait);
  }
  // Nothing of the jail runs any more: drop what init shared with pi-jail
  // since the clone, then say so (kControlEnded).
  const unsigned control = static_cast<unsigned>(p.control_fd);
  if (control > 3) (void)sys::close_range(3, control - 1);
  (void)sys::close_range(control + 1, ~0U);
  const char ended = kControlEnded;
  ssize_t n = ::write(p.control_fd, &ended, 1);
  (void)n;
  ::_exit(code);
}

}  // namespace pj::linuxjail::in_child
