// Starting the Seatbelt jail: the command runs under /usr/bin/sandbox-exec
// with the planned profile and parameters, in a new session (the given
// terminal its controlling terminal) as its foreground process group.
//
// POSIX only, so it compiles and its wiring is tested on Linux with a
// stand-in for sandbox-exec; only a Mac shows what Seatbelt enforces.
// macOS has no PID namespace: what the command leaves behind in its
// process group is killed at the end, but a process that made its own
// session escapes that (it stays inside the sandbox, which it inherited
// and cannot drop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "seatbelt/plan.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::seatbelt {

inline constexpr const char* kSandboxExec = "/usr/bin/sandbox-exec";

struct LaunchOptions {
  std::string sandbox_exec = kSandboxExec;  // tests substitute a stand-in
  int tty = -1;                             // the PTY's terminal side (the controlling terminal), or -1
  unsigned tty_fds = 7;                     // which of fds 0-2 (bit N: fd N) become `tty`; the rest are inherited
};

// A running sandboxed command; owns the process (killed with its group,
// and reaped, if still there on destruction). The process pi-jail starts
// is a keeper (launch.cc): it leads the command's session, and the
// command runs in its own process group, the PTY's foreground.
class Sandboxed {
public:
  static util::Result<Sandboxed> start(const SeatbeltSpec& spec, const LaunchOptions& opts);
  Sandboxed(Sandboxed&& o) noexcept
      : pid_(o.pid_),
        command_(o.command_),
        records_(std::move(o.records_)),
        status_(o.status_),
        stop_signal_(o.stop_signal_) {
    o.pid_ = -1;
  }
  Sandboxed& operator=(Sandboxed&&) = delete;
  ~Sandboxed();

  // The keeper: the session's leader; its exit status is the command's.
  pid_t pid() const { return pid_; }
  // The command (sandbox-exec, then what it runs): its process group's leader.
  pid_t command() const { return command_; }
  // Signal the command's whole process group (and the command itself).
  util::Status signal(int sig) const;
  // Non-blocking: the exit code (N, or 128+N for signal N) once it ended.
  util::Result<std::optional<int>> poll_exit();
  // Readable when the keeper has news (the command stopped): then call
  // poll_exit() and take_stop().
  int records_fd() const { return records_.get(); }
  // The signal that stopped the command (SIGTSTP, SIGTTIN, SIGTTOU,
  // SIGSTOP) since the last call, or 0; noticed by poll_exit().
  int take_stop() { return std::exchange(stop_signal_, 0); }
  // After the command ended: end whatever is left in its process group.
  void kill_leftovers() const;

private:
  explicit Sandboxed(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  pid_t command_ = -1;
  util::UniqueFd records_;  // the keeper's reports
  std::optional<int> status_;
  int stop_signal_ = 0;
};

// The network filter's process under sandbox-exec with its own profile
// (filter_profile.h): in a session of its own (a signal to pi-jail's
// process group, a terminal's Ctrl-C, never reaches it), /dev/null as
// fds 0-2, the control socket as fd 3 and no other descriptor, the
// spec's empty environment. Owns the process: killed and reaped on
// destruction unless reaped already. macOS has no PR_SET_PDEATHSIG: the
// filter ends when its control socket does (the supervisor gone).
class SandboxedFilter {
public:
  static util::Result<SandboxedFilter> start(const SeatbeltSpec& spec, const std::string& sandbox_exec, int control);
  SandboxedFilter(SandboxedFilter&& o) noexcept : pid_(std::exchange(o.pid_, -1)) {}
  SandboxedFilter& operator=(SandboxedFilter&&) = delete;
  ~SandboxedFilter() { kill_and_reap(); }

  pid_t pid() const { return pid_; }
  // Its wait status once it ended (then reaped), waiting at most `wait`;
  // nullopt while it runs.
  std::optional<int> wait_for(std::chrono::milliseconds wait);
  void kill_and_reap();
  bool reaped() const { return pid_ < 0; }

private:
  explicit SandboxedFilter(pid_t pid) : pid_(pid) {}
  pid_t pid_;  // -1 once reaped
};

}  // namespace pj::seatbelt
