// The supervision core both backends share: what a signal to pi-jail
// does (SignalPolicy), --timeout and --grace, the command's stops and
// continues, and the outer terminal (TerminalMode, PtyRelay). A backend
// gives only what differs: how a signal reaches the command (JailControl)
// and its own wait loop, which feeds this core what it saw (a signal, a
// stop, terminal bytes, the time) and asks it how long to sleep.
#pragma once

#include <poll.h>

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

#include "run.h"
#include "terminal.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

// What the core asks of a backend.
class JailControl {
public:
  virtual ~JailControl() = default;
  // Send `sig` to the command (Linux: the jail's init passes it to the
  // command's process group; Seatbelt: the command's process group).
  virtual void signal(int sig) = 0;
  // What a forced kill ends ("the whole jail") and what --timeout stops
  // ("the jail"), for the warnings.
  virtual std::string_view everything() const = 0;
  virtual std::string_view stopped() const = 0;
};

class Supervision {
public:
  using Clock = std::chrono::steady_clock;

  // `pty_fds`: which of fds 0-2 are terminals (terminal_fds()); 0 when
  // the command's streams pass through. --timeout counts from `start`.
  Supervision(JailControl& jail, const RunOptions& opts, unsigned pty_fds, Clock::time_point start = Clock::now());
  Supervision(const Supervision&) = delete;
  Supervision& operator=(const Supervision&) = delete;

  // The command's PTY master: from now on bytes are relayed and the outer
  // terminal is taken (when pi-jail is in the foreground).
  void attach_pty(util::UniqueFd master);
  bool on_pty() const { return relay_.has_value(); }

  // A signal pi-jail got (SignalPolicy decides).
  void on_signal(int sig, Clock::time_point now = Clock::now());
  // The command stopped by `sig` (SIGTSTP, SIGTTIN, SIGTTOU, SIGSTOP).
  void on_command_stop(int sig);
  // What is due at `now`: --timeout (TERM, then KILL after --grace), the
  // grace's KILL, the terminal after `fg` of a running job.
  void tick(Clock::time_point now = Clock::now());
  // How long the backend's poll() may sleep: until the next deadline, at
  // most kForegroundPoll while waiting for the terminal, else `idle`
  // (-1: no limit).
  int poll_timeout(Clock::time_point now, int idle) const;

  // The relay's fds in the backend's poll().
  void add_pollfds(std::vector<pollfd>& fds);
  void on_poll(const std::vector<pollfd>& fds);

  // The command ended: what it still wrote is shown and the outer
  // terminal's settings come back.
  void finish();

  bool timed_out() const { return timed_out_; }
  int stopped_by() const { return stopped_by_; }
  // How the run ended when the command ended with `status` (N, or 128+N).
  RunOutcome ended(int status) const;

private:
  void begin_termination(int sig, Clock::time_point now);

  JailControl& jail_;
  const RunOptions& opts_;
  RelayEnds ends_;
  int tty_ = -1;
  std::optional<TerminalMode> mode_;  // set when the command is on a PTY: one of fds 0-2 is a terminal
  std::optional<PtyRelay> relay_;
  std::optional<Clock::time_point> deadline_, grace_end_;
  SignalPolicy policy_;
  bool timed_out_ = false;
  int stopped_by_ = 0;  // RunOutcome::stopped_by
};

}  // namespace pj::supervisor
