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

// Between fork and exec: async-signal-safe calls only; a failure is the
// errno written to `report` (close-on-exec: EOF means exec happened).
[[noreturn]] void child(char* const* argv, char* const* envp, const char* cwd, int tty, unsigned tty_fds,
                        int report) {
  auto fail = [&](int err) {
    ssize_t w = ::write(report, &err, sizeof err);
    (void)w;
    ::_exit(125);
  };
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  if (::setsid() < 0) fail(errno);
  if (tty >= 0) {
    if (::ioctl(tty, TIOCSCTTY, 0) != 0) fail(errno);
    for (int fd = 0; fd < 3; ++fd)
      if ((tty_fds & (1U << fd)) && ::dup2(tty, fd) < 0) fail(errno);
  }
  rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  if (::chdir(cwd) != 0) fail(errno);
  // Only 0-2 (and the report pipe, close-on-exec) go on.
  long max = ::sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max > 0 ? max : 1024); ++fd)
    if (fd != report) ::close(fd);
  ::execve(argv[0], argv, envp);
  fail(errno);
  ::_exit(125);
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
  if (pid == 0) child(argv.data(), envp.data(), cwd.c_str(), opts.tty, opts.tty_fds, w.get());
  Sandboxed out(pid);
  w.reset();
  int err = 0;
  ssize_t n;
  do n = ::read(r.get(), &err, sizeof err);
  while (n < 0 && errno == EINTR);
  if (n == sizeof err) {
    int status;
    ::waitpid(pid, &status, 0);
    out.pid_ = -1;
    return Error::from_errno(fmt::format("start {} (the Seatbelt launcher) in {}", opts.sandbox_exec, cwd), err);
  }
  return out;
}

Sandboxed::~Sandboxed() {
  if (pid_ <= 0) return;
  if (!status_) {
    ::kill(-pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

util::Status Sandboxed::signal(int sig) const {
  if (pid_ <= 0 || status_) return {};
  if (::kill(-pid_, sig) != 0 && errno != ESRCH)
    return Error::from_errno(fmt::format("signal {} to the sandboxed command", sig), errno);
  return {};
}

util::Result<std::optional<int>> Sandboxed::poll_exit() {
  if (status_) return status_;
  int st;
  pid_t r;
  while (true) {
    r = ::waitpid(pid_, &st, WNOHANG | WUNTRACED);
    if (r < 0) return Error::from_errno("wait for the sandboxed command", errno);
    if (r == 0) return std::optional<int>();
    if (!WIFSTOPPED(st)) break;
    stopped_ = true;
  }
  status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
  return status_;
}

void Sandboxed::kill_leftovers() const {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);  // the group outlives its leader; ESRCH when empty
}

}  // namespace pj::seatbelt
