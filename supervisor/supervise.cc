#include "supervise.h"

#include <algorithm>
#include <csignal>

#include "util/log.h"

namespace pj::supervisor {

Supervision::Supervision(JailControl& jail, const RunOptions& opts, unsigned pty_fds, Clock::time_point start)
    : jail_(jail), opts_(opts) {
  if (opts.timeout) deadline_ = start + *opts.timeout;
  if (pty_fds == 0) return;
  ends_ = relay_ends(pty_fds);
  tty_ = ends_.tty;
  if (auto mode = TerminalMode::capture(tty_)) mode_.emplace(std::move(*mode));
}

void Supervision::attach_pty(util::UniqueFd master) {
  relay_.emplace(std::move(master), ends_.in, ends_.out);
  take_terminal(mode_, ends_, *relay_);
}

// A stopped command must still end: a signal it handles stays pending
// while it is stopped (signal(7)), so SIGCONT follows, which reaches the
// command's process group. KILL after the grace ends the rest.
void Supervision::begin_termination(int sig, Clock::time_point now) {
  jail_.signal(sig);
  jail_.signal(SIGCONT);
  if (!grace_end_) grace_end_ = now + opts_.grace;
}

void Supervision::on_signal(int sig, Clock::time_point now) {
  SignalResponse r = policy_.respond(sig, relay_.has_value());
  if (r.sync_size) relay_->sync_size(tty_);
  if (r.resume) {
    take_terminal(mode_, ends_, *relay_);
    relay_->redraw();
  }
  if (r.forced) util::warn("second termination signal: killing {}", jail_.everything());
  if (r.start_grace && !stopped_by_) stopped_by_ = sig;
  if (r.start_grace)
    begin_termination(r.deliver, now);
  else if (r.deliver)
    jail_.signal(r.deliver);
}

void Supervision::on_command_stop(int sig) {
  if (follow_command_stop(mode_, relay_ ? &*relay_ : nullptr, sig)) {
    jail_.signal(SIGCONT);
    if (relay_) take_terminal(mode_, ends_, *relay_);
  }
}

void Supervision::tick(Clock::time_point now) {
  if (deadline_ && now >= *deadline_) {
    deadline_.reset();
    util::warn("--timeout reached: stopping {}", jail_.stopped());
    timed_out_ = true;
    begin_termination(SIGTERM, now);
  }
  if (grace_end_ && now >= *grace_end_) {
    grace_end_.reset();
    jail_.signal(SIGKILL);
  }
  if (relay_ && mode_ && mode_->waiting() && mode_->in_foreground())
    take_terminal(mode_, ends_, *relay_);  // `fg` of a running job
}

int Supervision::poll_timeout(Clock::time_point now, int idle) const {
  int wait_ms =
      relay_ && mode_ && mode_->waiting() ? (idle < 0 ? kForegroundPoll : std::min(idle, kForegroundPoll)) : idle;
  for (const auto& t : {deadline_, grace_end_}) {
    if (!t) continue;
    // +1: poll() may wake a little before the time asked (rounded down to ms).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*t - now).count() + 1;
    int ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 24 * 3600 * 1000));
    wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms);
  }
  return wait_ms;
}

void Supervision::add_pollfds(std::vector<pollfd>& fds) {
  if (relay_) relay_->add_pollfds(fds);
}

void Supervision::on_poll(const std::vector<pollfd>& fds) {
  if (relay_) relay_->on_poll(fds);
}

void Supervision::finish() {
  if (relay_) relay_->drain();
  if (mode_) mode_->leave();
}

RunOutcome Supervision::ended(int status) const {
  RunOutcome out = command_ended(status, timed_out_);
  out.stopped_by = stopped_by_;
  return out;
}

}  // namespace pj::supervisor
