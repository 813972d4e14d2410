#include "run.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "linuxjail/host.h"
#include "linuxjail/launch.h"
#include "util/log.h"

namespace pj::supervisor {

using linuxjail::Jail;
using linuxjail::Stage;
using linuxjail::SyncRecord;

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  return set;
}

bool terminating(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

void explain_failure(const SyncRecord& rec, const linuxjail::JailSpec& spec) {
  std::string step(linuxjail::stage_name(rec.stage));
  if (rec.op >= 0 && static_cast<size_t>(rec.op) < spec.mounts.size())
    step = fmt::format("{} ({}; {})", step, linuxjail::describe(spec.mounts[static_cast<size_t>(rec.op)]),
                       spec.mounts[static_cast<size_t>(rec.op)].why);
  if (rec.stage == Stage::exec) {
    util::error("cannot execute {} inside the jail: {} ({})\n  fix: {}", spec.exec_path, std::strerror(rec.err),
                util::errno_name(rec.err), linuxjail::stage_fix(rec.stage, rec.err));
    return;
  }
  util::error("jail setup failed, nothing was run\n  step: {}\n  error: {} ({})\n  fix: {}", step,
              std::strerror(rec.err), util::errno_name(rec.err), linuxjail::stage_fix(rec.stage, rec.err));
}

}  // namespace

void block_forwarded_signals() {
  sigset_t set = forwarded_set();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

int run_jailed(const linuxjail::JailSpec& spec) {
  auto launched = Jail::launch(spec);
  if (!launched) {
    const util::Error& e = launched.error();
    util::error("cannot build the jail, nothing was run\n  step: {}\n  fix: {}", e.message(),
                e.err() ? linuxjail::namespace_fix(e.err()) : "report a bug");
    return 125;
  }
  Jail& jail = *launched;

  sigset_t set = forwarded_set();
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    util::error("create a signalfd: {}", std::strerror(errno));
    return 125;
  }
  std::optional<SyncRecord> failure;
  int terminations = 0;
  while (true) {
    pollfd fds[3] = {{jail.pidfd(), POLLIN, 0}, {sfd, POLLIN, 0}, {jail.sync_fd(), POLLIN, 0}};
    nfds_t n = jail.sync_fd() >= 0 ? 3 : 2;
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      util::error("poll: {}", std::strerror(errno));
      return 125;
    }
    if (n == 3 && fds[2].revents) {
      auto rec = jail.read_sync();
      if (!rec) util::error("{}", rec.error().message());
      else if (*rec && !failure) failure = **rec;
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) == sizeof si) {
        int sig = static_cast<int>(si.ssi_signo);
        if (terminating(sig) && ++terminations >= 2) {
          util::warn("second termination signal: killing the whole jail");
          (void)jail.signal(SIGKILL);
        } else {
          (void)jail.signal(sig);
        }
      }
    }
    if (fds[0].revents & POLLIN) break;
  }
  ::close(sfd);
  while (jail.sync_fd() >= 0 && !failure) {
    auto rec = jail.read_sync();
    if (!rec || !*rec) break;
    failure = **rec;
  }
  auto code = jail.reap();
  if (!code) {
    util::error("{}", code.error().message());
    return 125;
  }
  if (failure) {
    explain_failure(*failure, spec);
    if (failure->stage != Stage::exec) return 125;
  }
  return *code;
}

void exec_unsandboxed(const std::string& path, const std::vector<std::string>& argv) {
  util::emit("WARNING",
             "--unsandboxed: running the command with NO isolation. It can read and change every file "
             "you can, use your credentials and reach the whole network.");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv(path.c_str(), args.data());
  int err = errno;
  util::error("cannot execute {}: {}", path, std::strerror(err));
  ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace pj::supervisor
