#include "seatbelt/launch.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

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

}  // namespace pj::seatbelt
