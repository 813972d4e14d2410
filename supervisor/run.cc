#include "run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/escape.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::supervisor {

SignalResponse SignalPolicy::respond(int sig, bool on_pty) {
  SignalResponse r;
  switch (sig) {
    case SIGINT:
    case SIGTERM:
    case SIGHUP:
    case SIGQUIT:
      r.forced = ++terminations_ >= 2;
      r.deliver = r.forced ? SIGKILL : sig;
      r.start_grace = !r.forced;
      return r;
    case SIGCONT:
      r.resume = on_pty;
      r.deliver = SIGCONT;
      return r;
    case SIGTSTP:  // from pi-jail's terminal when it is not raw, or `kill -TSTP`: the command's group stops
      r.deliver = SIGTSTP;
      return r;
    case SIGWINCH:
      if (on_pty) r.sync_size = true;  // the kernel tells the PTY's foreground group
      else r.deliver = SIGWINCH;
      return r;
    case SIGCHLD: return r;  // the backend's loop looks at the command's status
    default: r.deliver = sig; return r;
  }
}

RunOutcome command_ended(int status, bool timed_out) {
  RunOutcome out;
  out.command_status = out.exit_code = status;
  out.ending = status > 128 ? RunOutcome::Ending::signaled : RunOutcome::Ending::exited;
  if (timed_out) {
    out.ending = RunOutcome::Ending::timed_out;
    out.exit_code = 124;
  }
  return out;
}

util::Result<RunOptions> run_options(const cli::Invocation& inv, const netproxy::Rules& rules) {
  RunOptions opts;
  opts.timeout = inv.timeout;
  opts.grace = inv.grace;
  opts.rules = rules;
  opts.test_fail_network_filter = inv.test_fail_network_filter;
  auto log = open_net_log(inv.net_log);
  if (!log) return log.take_error();
  opts.net_log = std::move(*log);
  return opts;
}

util::Result<std::unique_ptr<netproxy::Proxy>> test_failed_filter() {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return util::Error::invalid("failing on purpose (--test-fail-network-filter)");
}

std::string state_dir() {
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  return state && *state == '/' ? std::string(state) + "/pi-jail"
         : home && *home == '/' ? std::string(home) + "/.local/state/pi-jail"
                                : "";
}

util::Result<util::UniqueFd> open_net_log(const std::optional<std::string>& path) {
  if (path) {
    auto fd = util::open_output_file(*path, util::OutputMode::append, 0600);
    if (!fd) return std::move(fd.take_error()).context("--net-log");
    return fd;
  }
  const std::string dir = state_dir();
  if (dir.empty()) return util::UniqueFd();
  (void)util::make_private_dir(dir);  // a failure shows in the open below
  std::string file = dir + "/network.jsonl";
  auto fd = util::open_output_file(file, util::OutputMode::append, 0600);
  if (!fd) {
    util::warn("cannot open the network log: {}; decisions go to --report and stderr only", fd.error().message());
    return util::UniqueFd();
  }
  return std::move(*fd);
}

void summarise_refusals(const std::vector<netproxy::Decision>& decisions) {
  size_t refused = 0;
  for (const auto& d : decisions) refused += !d.allowed;
  if (refused == 0) return;
  util::warn("the network filter refused {} connection{}:", refused, refused == 1 ? "" : "s");
  for (const auto& d : decisions)
    if (!d.allowed)  // host and reason carry the bytes the jail asked for
      util::warn("  {} {}:{}: {}", d.protocol, util::printable(d.host), d.port, util::printable(d.reason));
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
