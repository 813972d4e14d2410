// What every backend's run shares: its options, how it ended, the network
// decision log, and --unsandboxed.
#pragma once

#include <chrono>
#include <cstdint>
#include <csignal>
#include <memory>
#include <utility>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "credentials/interceptor.h"
#include "credentials/bindings.h"
#include "netproxy/proxy.h"
#include "netproxy/upstream.h"
#include "policy/policy.h"
#include "runtime/request.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::credentials {
class OAuthExchange;
}
namespace pj::sshagent {
class AgentProxy;  // sshagent/proxy.h
}

namespace pj::supervisor {

class JailNotes;  // jail_notes.h

// A published port's listener on the host's loopback (a port in use
// stops the run: 125).
struct PublishedPort {
  util::UniqueFd fd;
  policy::PublishSpec spec;
  std::string why;  // the operator's entry: "--publish", "file:line:column"
};

struct RunOptions {
  std::optional<std::chrono::milliseconds> timeout;  // --timeout
  std::chrono::milliseconds grace{5000};             // --grace: TERM -> KILL
  netproxy::Rules rules;                             // the network filter's
  util::UniqueFd net_log;                            // JSON lines of decisions (may be unset)
#ifdef PJ_TEST_SWITCHES
  bool test_fail_network_filter = false;  // the filter fails to start
  bool test_filter_probe = false;         // the filter process tries what its lock-down forbids
  std::string test_filter_misbehave;      // what the filter process does wrong once ready (cli.h)
#endif
  netproxy::ProxyLimits proxy_limits;  // defaults; tests shorten the timeouts
  // Published ports: bound by the supervisor once the jail is built and
  // before its command starts (never inherited by the jail's init).
  std::vector<runtime::Request::Published> publish;
  // The profile's login callback ports: served on the host's loopback
  // while the jail listens on one (Linux: supervisor/login_callbacks.h).
  std::vector<runtime::Request::LoginCallback> login_callbacks;
  std::shared_ptr<credentials::Interceptor> interceptor;  // credentials bound to hosts (may be null)
  // The policy's upstream proxy, its name resolved (may be null: out directly).
  std::shared_ptr<const netproxy::UpstreamProxy> upstream_proxy;
  // The run's token exchange, when its filter runs in a process of its
  // own: what it sends that process, and what takes its reports (may be null).
  std::shared_ptr<credentials::OAuthExchange> exchange;
  // The run's placeholders, looked for on host loopback ports no binding covers.
  std::vector<netproxy::Watched> watched;
  std::shared_ptr<JailNotes> refusals;              // the jail's list of refusals, kept up to date (may be null)
  std::shared_ptr<sshagent::AgentProxy> ssh_agent;  // --allow-ssh: started once the jail is cloned (may be null)
};

// The credential filter for this run, or null when nothing is bound:
// from PJ_TEST_BIND/--test-upstream-ca (test builds), and `intercept` (the
// supervisor's credential table; may be empty). Starts making the run's
// CA, which this process hands to the filter process (it loads no trust
// store and makes no TLS context: Interceptor::to_hand_over).
util::Result<std::shared_ptr<credentials::Interceptor>> make_interceptor(const cli::InterceptorInput& inv,
                                                                         credentials::Intercept intercept = {});

// The file the jail trusts: the host's system CAs (the first of
// runtime::kCaBundlePaths present) then the run's CA, written 0644 in
// pi-jail's state directory `dir`, which no jail sees; removed on
// destruction, or by the next run when this one was killed (the file is
// locked while its run lives). begin() writes the system's part, so that the jail's view
// can name the file while the run's CA is still being made; finish() adds
// the CA, before anything in the jail runs.
class CaBundleFile {
public:
  static util::Result<CaBundleFile> begin(const std::string& dir);
  util::Status finish(const std::string& ca_pem);
  // begin() and finish() at once.
  static util::Result<CaBundleFile> write(const std::string& dir, const std::string& ca_pem);
  CaBundleFile(CaBundleFile&& o) noexcept
      : path_(std::exchange(o.path_, {})), fd_(std::move(o.fd_)), finished_(o.finished_) {}
  CaBundleFile& operator=(CaBundleFile&&) = delete;
  ~CaBundleFile();
  const std::string& path() const { return path_; }

private:
  explicit CaBundleFile(std::string p) : path_(std::move(p)) {}
  std::string path_;
  // Open, and locked, for the run: the next run removes a bundle nobody
  // holds (its run was killed).
  util::UniqueFd fd_;
  bool finished_ = false;
};

// Listen on the host's loopback for every published port: an error names
// the port and the fix (in use, no IPv6 loopback).
util::Result<std::vector<PublishedPort>> bind_published(const std::vector<runtime::Request::Published>& ports);
// A non-blocking listening socket on the host's 127.0.0.1 (::1 when
// `v6`, IPv6 only) at `port`, SO_REUSEADDR (a port left in TIME_WAIT, or
// held by a connection a closed listener of it accepted, binds again).
// An error's what() names the call that failed ("socket", "bind",
// "listen"), its err() the errno.
util::Result<util::UniqueFd> listen_on_host_loopback(bool v6, int port);

// The options of a run: --timeout, --grace, the policy's network rules,
// its upstream proxy (its name resolved here: an error names it and the
// key that set it), and the network decision log opened (see open_net_log).
util::Result<RunOptions> run_options(const cli::RunInput& inv, const netproxy::Rules& rules,
                                     const std::optional<policy::Policy::UpstreamProxy>& upstream = std::nullopt);

// The run's resource limits and what it used (the report's "resources",
// the -v summary). Unmeasured values stay empty.
struct ResourceUse {
  struct Limit {
    std::string name;         // "memory", "pids", "cpus", "scratch"
    std::string value;        // "512M", "4096", "1.5"
    std::string source;       // "--memory", "policy.toml:3:10", "default"
    std::string enforced_by;  // "cgroup v1 /sys/fs/...", "RLIMIT_NPROC in the jail's user namespace", ...
  };
  std::vector<Limit> limits;
  std::optional<std::uint64_t> memory_peak_bytes;
  std::string memory_peak_from;  // "cgroup", "largest process (getrusage)"
  std::optional<std::uint64_t> cpu_ms;
  std::string cpu_from;                         // "cgroup", "getrusage"
  std::optional<std::uint64_t> processes_peak;  // cgroup pids.peak, when the kernel has it
  std::optional<std::uint64_t> scratch_bytes;   // left in scratch at the end
  std::optional<std::uint64_t> oom_kills;       // the memory cgroup's count
};

// A login callback port the host's loopback served during the run
// (login_callbacks.h): the report lists it among the published ports,
// marked as a login callback, once per host address.
struct ServedLoginCallback {
  std::string host_address;  // "127.0.0.1" or "::1"
  std::uint16_t port = 0;    // the same on the host and in the jail
  std::string why;           // "profile pi: login callback 53692 (Anthropic (Claude Pro/Max))"
};

// How the run ended, for the exit status and the report.
struct RunOutcome {
  enum class Ending { exited, signaled, timed_out, setup_failed, not_executed };
  Ending ending = Ending::setup_failed;
  int exit_code = 125;                // what pi-jail exits with
  int command_status = -1;            // the command's code or 128+N, when it ran
  std::string failure;                // the setup step and error, when it failed
  int stopped_by = 0;                 // the first termination signal pi-jail got (passed on), or 0
  netproxy::DecisionTable decisions;  // the network filter's, aggregated
  ResourceUse resources;
  std::string discarded;                             // what the run left in scratch places (scratch_audit.h), or ""
  std::vector<ServedLoginCallback> login_callbacks;  // served during the run (Linux)
};

// A step of pi-jail's set-up failed: the one wording of every such
// failure, on every backend, on stderr:
//   pi-jail: error: jail setup failed, nothing was run
//     step: <the step, its error>
//     fix: <what to do>          (when there is one)
// `jail_stopped`: the jail had been started and was killed for it
// ("jail setup failed, the jail was stopped").
void say_setup_failed(std::string_view step, std::string_view fix, bool jail_stopped = false);
// say_setup_failed(), and the run's outcome: setup_failed, 125, the
// report's "failure" the step.
RunOutcome setup_failed(std::string step, std::string_view fix = {});
// say_setup_failed(), and the error that ends the run (125, its message
// the step), said already: for a step whose caller returns it.
util::Error said_setup_failure(std::string step, std::string_view fix = {});
// The request cannot be served as asked (an option for the other
// backend, a view the planner refuses): its message said as it is, which
// names the input and the fix, and the error that ends the run (125),
// said already.
util::Error request_refused(std::string why);
// The outcome of a run an error ended before the command ran, without a
// word: the exit status its kind says (125, 126, 127, 128+N), the
// report's "failure" its message; not_executed when the command was not
// found or cannot be executed, setup_failed otherwise.
RunOutcome ended_by(const util::Error& e);

// With -v: one line of what the run used (and an OOM kill always).
void summarise_resources(const ResourceUse& r);

// The signals pi-jail handles while a command runs (each backend adds
// what it needs to learn that the command ended).
inline constexpr int kHandledSignals[] = {SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGUSR1,
                                          SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP};

// What a signal to pi-jail does, the same on every backend: the first
// termination signal (INT, TERM, HUP, QUIT) is passed on and KILL follows
// after --grace; a second kills at once; SIGCONT (back from a suspend)
// puts the terminal back in raw mode and resumes the command; SIGWINCH
// resizes the command's PTY; anything else is passed on.
struct SignalResponse {
  int deliver = 0;           // the signal to send the command; 0: none
  bool start_grace = false;  // arm the grace period (KILL when it ends)
  bool forced = false;       // a second termination signal: `deliver` is SIGKILL
  bool resume = false;       // take the outer terminal again (fg or bg) and redraw (take_terminal)
  bool sync_size = false;    // copy the outer terminal's size to the PTY
};
class SignalPolicy {
public:
  SignalResponse respond(int sig, bool on_pty);

private:
  int terminations_ = 0;
};

// How a run ended when the command ran to its end with `status` (N, or
// 128+N for signal N); --timeout having stopped it makes it 124.
RunOutcome command_ended(int status, bool timed_out);

// --test-fail-network-filter (test builds): the filter's start fails, as
// a slow one would, after 300 ms: time enough for a command started too
// early to show.
#ifdef PJ_TEST_SWITCHES
util::Result<std::unique_ptr<netproxy::Proxy>> test_failed_filter();
#endif

// Start the run's network filter, the one way every backend does: its
// rules, decision log, limits and credential filter from `opts`, or
// test_failed_filter() under --test-fail-network-filter. Inline: only the
// executables, which link a filter loop, call it.
inline util::Result<std::unique_ptr<netproxy::Proxy>> start_network_filter(const RunOptions& opts) {
#ifdef PJ_TEST_SWITCHES
  if (opts.test_fail_network_filter) return test_failed_filter();
#endif
  auto proxy = netproxy::Proxy::start(opts.rules, opts.net_log.get(), opts.proxy_limits, opts.interceptor);
  if (proxy) (*proxy)->watch_placeholders(opts.watched);
  if (proxy && opts.upstream_proxy) (*proxy)->use_upstream_proxy(opts.upstream_proxy);
  return proxy;
}

// pi-jail's own state directory, which no jail sees (profiles/builtin.toml
// masks it): $XDG_STATE_HOME/pi-jail, else ~/.local/state/pi-jail; empty
// when neither is an absolute path.
std::string state_dir();

// The network decision log: FILE when given (failure is an error), else
// $XDG_STATE_HOME/pi-jail/network.jsonl (~/.local/state/...), which the
// jail cannot see; if that cannot be opened, a warning and no file.
util::Result<util::UniqueFd> open_net_log(const std::optional<std::string>& path);

// The end-of-run lines about refused connections: one per destination
// (most refused first, at most kSummaryLines), "pypi.org:443 refused 6x",
// then the fix for those an allow rule would let through. Host names and
// reasons come from the jail: shown through util::printable, bounded.
inline constexpr size_t kSummaryLines = 10;
// A refused host of a preset (--allow-net-preset) is proposed as the
// preset. `hints`: what the summary knows of the run besides.
struct SummaryHints {
  // Pi runs without fd and rg within reach: it tries github.com for them,
  // and the fix (installing them) was said at start.
  bool pi_downloads_tools = false;
};
std::vector<std::string> refusal_summary(const netproxy::DecisionTable& decisions, const SummaryHints& hints = {});
// The option that would allow refused `d`, as the summary proposes it
// ("--allow-net-preset npm", "--allow-net host:port" with the host
// escaped), or "" when no allow rule would (a private address, a malformed
// request, Pi's own download of fd and rg).
std::string allow_flag(const netproxy::Decision& d, const SummaryHints& hints = {});
// The placeholders that went to a host loopback port no binding covers
// (Decision::unbound_credential): one line each, and the [credentials]
// bind line that sends the real value there instead. Empty when none.
std::vector<std::string> unsubstituted_summary(const netproxy::DecisionTable& decisions);

// Unless --quiet: refusal_summary() and unsubstituted_summary() on stderr.
void summarise_refusals(const netproxy::DecisionTable& decisions, const SummaryHints& hints = {});

// --unsandboxed: announce loudly, then exec the command in place.
[[noreturn]] void exec_unsandboxed(const std::string& path, const std::vector<std::string>& argv);

}  // namespace pj::supervisor
