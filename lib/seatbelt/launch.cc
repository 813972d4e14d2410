#include "seatbelt/launch.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace pj::seatbelt {

using util::Error;

namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// What the keeper tells the supervisor on the launch pipe.
struct Record {
  char kind;  // kFailed (value: errno), kRunning (value: the command's pid), kStopped (value: the signal)
  int value;
};
constexpr char kFailed = 'F', kRunning = 'R', kStopped = 'S';

// Between fork and exec: async-signal-safe calls only; a failure is the
// errno written to `report` (close-on-exec: EOF means exec happened).
[[noreturn]] void run_command(char* const* argv, char* const* envp, const char* cwd, int tty, unsigned tty_fds,
                              int report) {
  auto fail = [&](int err) {
    ssize_t w = ::write(report, &err, sizeof err);
    (void)w;
    ::_exit(125);
  };
  if (::setpgid(0, 0) != 0) fail(errno);
  if (tty >= 0) {
    // The foreground of the PTY before exec, so its first read is not a
    // background read; SIGTTOU is blocked for that call only.
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, nullptr);
    if (::tcsetpgrp(tty, ::getpid()) != 0) fail(errno);
    for (int fd = 0; fd < 3; ++fd)
      if ((tty_fds & (1U << fd)) && ::dup2(tty, fd) < 0) fail(errno);
  }
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);  // the keeper ignores some
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::chdir(cwd) != 0) fail(errno);
  // Only 0-2 (and the report pipe, close-on-exec) go on.
  long max = ::sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max > 0 ? max : 1024); ++fd)
    if (fd != report) ::close(fd);
  ::execve(argv[0], argv, envp);
  fail(errno);
  ::_exit(125);
}

void send(int fd, char kind, int value) {
  Record r{kind, value};
  ssize_t w = ::write(fd, &r, sizeof r);
  (void)w;
}

// The keeper: leads the command's session and holds the PTY as its
// controlling terminal; the command runs in a process group of its own,
// the PTY's foreground. A group whose parents are all outside its session
// is orphaned and the kernel drops SIGTSTP, SIGTTIN and SIGTTOU sent to
// it (Ctrl-Z would do nothing); the keeper is the parent in the same
// session that lets them act, as a shell is. It waits for the command,
// tells the supervisor when and by which signal it stopped, and ends as
// the command ended. It never stops itself and ignores the signals that
// would end it early (a command that moved into its process group gets
// them from pi-jail by pid as well). macOS has no PID namespace and no
// init: this is it. Async-signal-safe calls only.
[[noreturn]] void keeper(char* const* argv, char* const* envp, const char* cwd, int tty, unsigned tty_fds, int report) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH, SIGPIPE})
    ::signal(s, SIG_IGN);
  rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  if (::setsid() < 0) {
    send(report, kFailed, errno);
    ::_exit(125);
  }
  if (tty >= 0 && ::ioctl(tty, TIOCSCTTY, 0) != 0) {
    send(report, kFailed, errno);
    ::_exit(125);
  }
  int exec_pipe[2];
  if (::pipe(exec_pipe) != 0 || ::fcntl(exec_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      ::fcntl(exec_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    send(report, kFailed, errno);
    ::_exit(125);
  }
  pid_t cmd = ::fork();
  if (cmd < 0) {
    send(report, kFailed, errno);
    ::_exit(125);
  }
  if (cmd == 0) run_command(argv, envp, cwd, tty, tty_fds, exec_pipe[1]);
  ::setpgid(cmd, cmd);  // both sides set it, as shells do: it exists before anyone signals it
  ::close(exec_pipe[1]);
  int err = 0;
  ssize_t n;
  do n = ::read(exec_pipe[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  if (n == sizeof err) {
    int st;
    ::waitpid(cmd, &st, 0);
    send(report, kFailed, err);
    ::_exit(125);
  }
  send(report, kRunning, cmd);
  // The keeper holds nothing of the run but the report pipe.
  int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd)
    if (null >= 0) ::dup2(null, fd);
  long max = ::sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max > 0 ? max : 1024); ++fd)
    if (fd != report) ::close(fd);
  while (true) {
    int st;
    pid_t r = ::waitpid(cmd, &st, WUNTRACED);
    if (r < 0) {
      if (errno == EINTR) continue;
      ::_exit(125);
    }
    if (WIFSTOPPED(st)) {
      send(report, kStopped, WSTOPSIG(st));  // the supervisor gives the terminal back; SIGCONT comes from it
      continue;
    }
    if (WIFEXITED(st)) ::_exit(WEXITSTATUS(st));
    // Ended by a signal: end by the same one (its default action).
    int sig = WTERMSIG(st);
    ::signal(sig, SIG_DFL);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);
  }
}

}  // namespace

util::Result<Sandboxed> Sandboxed::start(const SeatbeltSpec& spec, const LaunchOptions& opts) {
  std::vector<std::string> args = sandbox_exec_args(spec, opts.sandbox_exec);
  std::vector<std::string> env = spec.env;
  std::string cwd = spec.cwd;
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  int p[2];
  if (::pipe(p) != 0) return Error::from_errno("create the launch pipe", errno);
  util::UniqueFd r(p[0]), w(p[1]);
  if (::fcntl(p[0], F_SETFD, FD_CLOEXEC) != 0 || ::fcntl(p[1], F_SETFD, FD_CLOEXEC) != 0)
    return Error::from_errno("set close-on-exec on the launch pipe", errno);
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork the sandboxed command", errno);
  if (pid == 0) keeper(argv.data(), envp.data(), cwd.c_str(), opts.tty, opts.tty_fds, w.get());
  Sandboxed out(pid);
  w.reset();
  Record rec{};
  ssize_t n;
  do n = ::read(r.get(), &rec, sizeof rec);
  while (n < 0 && errno == EINTR);
  if (n != sizeof rec || rec.kind != kRunning) {
    int status;
    ::waitpid(pid, &status, 0);
    out.pid_ = -1;
    int err = n == sizeof rec && rec.kind == kFailed ? rec.value : EPROTO;
    return Error::from_errno(fmt::format("start {} (the Seatbelt launcher) in {}", opts.sandbox_exec, cwd), err);
  }
  out.command_ = rec.value;
  if (::fcntl(r.get(), F_SETFL, ::fcntl(r.get(), F_GETFL) | O_NONBLOCK) != 0)
    return Error::from_errno("set up the launch pipe", errno);
  out.records_ = std::move(r);
  return out;
}

Sandboxed::~Sandboxed() {
  if (pid_ <= 0) return;
  if (!status_) {
    kill_leftovers();
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

util::Status Sandboxed::signal(int sig) const {
  if (pid_ <= 0 || status_) return {};
  // The group, and the command by pid: it may have left its group.
  if (::kill(-command_, sig) != 0 && errno != ESRCH)
    return Error::from_errno(fmt::format("signal {} to the sandboxed command", sig), errno);
  ::kill(command_, sig);
  return {};
}

util::Result<std::optional<int>> Sandboxed::poll_exit() {
  if (status_) return status_;
  Record rec{};
  while (::read(records_.get(), &rec, sizeof rec) == sizeof rec)
    if (rec.kind == kStopped)
      stop_signal_ = rec.value == SIGTSTP || rec.value == SIGTTIN || rec.value == SIGTTOU ? rec.value : SIGSTOP;
  int st;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r < 0) return Error::from_errno("wait for the sandboxed command", errno);
  if (r == 0) return std::optional<int>();
  status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
  return status_;
}

void Sandboxed::kill_leftovers() const {
  // The groups outlive their leaders; ESRCH when empty. The keeper's
  // group holds what moved there.
  if (command_ > 0) {
    ::kill(-command_, SIGKILL);
    ::kill(command_, SIGKILL);
  }
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

namespace {

// posix_spawn's attributes and file actions, destroyed with this.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  bool attr_ok = false, actions_ok = false;
  ~SpawnSetup() {
    if (attr_ok) ::posix_spawnattr_destroy(&attr);
    if (actions_ok) ::posix_spawn_file_actions_destroy(&actions);
  }
};

// Signals as a new program expects them (pi-jail blocks and handles some);
// its own session; /dev/null as 0-2, `control` as 3, nothing else.
int prepare_spawn(SpawnSetup& s, int devnull, int control) {
  if (int rc = ::posix_spawnattr_init(&s.attr); rc != 0) return rc;
  s.attr_ok = true;
  if (int rc = ::posix_spawn_file_actions_init(&s.actions); rc != 0) return rc;
  s.actions_ok = true;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
  flags |= POSIX_SPAWN_SETSID;
#else
  flags |= POSIX_SPAWN_SETPGROUP;  // a process group of its own, at least
#endif
#ifdef POSIX_SPAWN_CLOEXEC_DEFAULT
  flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;  // macOS: only what the file actions name is inherited
#endif
  if (int rc = ::posix_spawnattr_setflags(&s.attr, flags); rc != 0) return rc;
  if (int rc = ::posix_spawnattr_setsigmask(&s.attr, &none); rc != 0) return rc;
  if (int rc = ::posix_spawnattr_setsigdefault(&s.attr, &all); rc != 0) return rc;
  for (int fd = 0; fd <= 2; ++fd)
    if (int rc = ::posix_spawn_file_actions_adddup2(&s.actions, devnull, fd); rc != 0) return rc;
  if (int rc = ::posix_spawn_file_actions_adddup2(&s.actions, control, 3); rc != 0) return rc;
#if !defined(POSIX_SPAWN_CLOEXEC_DEFAULT) && defined(__GLIBC__)
  if (int rc = ::posix_spawn_file_actions_addclosefrom_np(&s.actions, 4); rc != 0) return rc;
#endif
  return 0;
}

}  // namespace

util::Result<SandboxedFilter> SandboxedFilter::start(const SeatbeltSpec& spec, const std::string& sandbox_exec,
                                                     int control) {
  // Above 3 both, so that placing them at 0-3 cannot overwrite one another
  // (and a dup2 of 3 onto itself would keep it close-on-exec).
  util::UniqueFd opened(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!opened.valid()) return Error::from_errno("open /dev/null for the network filter", errno);
  util::UniqueFd devnull(::fcntl(opened.get(), F_DUPFD_CLOEXEC, 10));
  if (!devnull.valid()) return Error::from_errno("place /dev/null for the network filter", errno);
  util::UniqueFd sock(::fcntl(control, F_DUPFD_CLOEXEC, 10));
  if (!sock.valid()) return Error::from_errno("place the network filter's control socket", errno);
  SpawnSetup setup;
  if (int rc = prepare_spawn(setup, devnull.get(), sock.get()); rc != 0)
    return Error::from_errno("set up the network filter's start (posix_spawn)", rc);
  std::vector<std::string> args = sandbox_exec_args(spec, sandbox_exec);
  std::vector<std::string> env = spec.env;
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  pid_t pid = -1;
  if (int rc = ::posix_spawn(&pid, sandbox_exec.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
      rc != 0)
    return Error::from_errno(fmt::format("start {} (the Seatbelt launcher) for the network filter", sandbox_exec), rc);
  return SandboxedFilter(pid);
}

std::optional<int> SandboxedFilter::wait_for(std::chrono::milliseconds wait) {
  if (pid_ < 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return st;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void SandboxedFilter::kill_and_reap() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);  // not reaped yet: the pid is still its
  int st;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace pj::seatbelt
