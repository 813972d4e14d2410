// Linux: the network filter process started as a clone of the supervisor
// with a pidfd, exec'd afresh from the supervisor's own inode
// (filter_process.h).
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "filter_process.h"
#include "filterlink/process.h"
#include "linuxjail/sys.h"

namespace pj::supervisor {

namespace {

// Between fork and exec only async-signal-safe calls (single system
// calls): the descriptors the filter gets are moved high first so that
// placing them at 0-4 cannot overwrite one another; the O_PATH fd of the
// executable is close-on-exec at 4, which execveat(2) permits for a
// binary (not for a script, which pi-jail is not).
[[noreturn]] void exec_filter(int exe, int sock, int devnull) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // A session of its own: a terminal's Ctrl-C or a signal to pi-jail's
  // process group reaches the supervisor (which passes it to the jail),
  // never the filter, whose end would end the run.
  if (::setsid() < 0) ::_exit(127);
  // The filter never outlives the supervisor's thread that made it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ::_exit(127);
  int hi_exe = ::fcntl(exe, F_DUPFD_CLOEXEC, 100), hi_sock = ::fcntl(sock, F_DUPFD_CLOEXEC, 100),
      hi_null = ::fcntl(devnull, F_DUPFD_CLOEXEC, 100);
  if (hi_exe < 0 || hi_sock < 0 || hi_null < 0) ::_exit(127);
  for (int fd = 0; fd <= 2; ++fd)
    if (::dup2(hi_null, fd) != fd) ::_exit(127);
  using filterlink::kFilterControlFd, filterlink::kNetworkFilterArg, filterlink::kNetworkFilterName;
  if (::dup3(hi_sock, kFilterControlFd, 0) != kFilterControlFd) ::_exit(127);
  if (::dup3(hi_exe, kFilterControlFd + 1, O_CLOEXEC) != kFilterControlFd + 1) ::_exit(127);
  if (linuxjail::sys::close_range(kFilterControlFd + 2, ~0U) != 0) ::_exit(127);
  char* const argv[] = {const_cast<char*>(kNetworkFilterName), const_cast<char*>(kNetworkFilterArg), nullptr};
  char* const envp[] = {nullptr};
  ::syscall(SYS_execveat, kFilterControlFd + 1, "", argv, envp, AT_EMPTY_PATH);
  ::_exit(127);
}

// The clone, held by its pidfd: readable once it exited, and waited for
// and signalled without any doubt about which process it names.
class PidfdChild final : public FilterChild {
public:
  PidfdChild(pid_t pid, util::UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  ~PidfdChild() override { kill_and_reap(); }
  pid_t pid() const override { return pid_; }
  int exit_fd() const override { return pidfd_.get(); }
  bool reaped() const override { return reaped_; }

  std::optional<int> wait_for(std::chrono::milliseconds wait) override {
    if (reaped_) return std::nullopt;
    pollfd p{pidfd_.get(), POLLIN, 0};
    while (::poll(&p, 1, static_cast<int>(wait.count())) < 0 && errno == EINTR) {
    }
    if (!(p.revents & POLLIN)) return std::nullopt;
    siginfo_t si{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, WEXITED);
    reaped_ = true;
    return si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : (si.si_status & 0x7f);
  }

  void kill_and_reap() override {
    if (reaped_ || !pidfd_.valid()) return;
    (void)linuxjail::sys::pidfd_send_signal(pidfd_.get(), SIGKILL);
    siginfo_t si{};
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, WEXITED) < 0 &&
           errno == EINTR) {
    }
    reaped_ = true;
  }

private:
  pid_t pid_;
  util::UniqueFd pidfd_;
  bool reaped_ = false;
};

}  // namespace

util::Result<std::unique_ptr<FilterProcess>> FilterProcess::start(const RunOptions& opts) {
  // /proc/self/exe names the running executable's inode even if its path
  // was replaced since (an upgrade during the run): the filter is the
  // same program as this supervisor.
  util::UniqueFd exe(::open("/proc/self/exe", O_PATH | O_CLOEXEC));
  if (!exe.valid()) return util::Error::from_errno("open /proc/self/exe (the filter is pi-jail itself)", errno);
  util::UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull.valid()) return util::Error::from_errno("open /dev/null", errno);
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return util::Error::from_errno("make the filter's control socket", errno);
  util::UniqueFd ours(sp[0]), theirs(sp[1]);
  int pidfd = -1;
  long pid = linuxjail::sys::clone_process(SIGCHLD | CLONE_PIDFD, &pidfd);
  if (pid < 0) return util::Error::from_errno("fork the network filter process", errno);
  if (pid == 0) exec_filter(exe.get(), theirs.get(), devnull.get());
  theirs.reset();
  return configure(std::make_unique<PidfdChild>(static_cast<pid_t>(pid), util::UniqueFd(pidfd)), std::move(ours), opts);
}

}  // namespace pj::supervisor
