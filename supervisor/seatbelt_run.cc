#include "seatbelt_run.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "filter_process.h"
#include "filterlink/channel.h"
#include "filterlink/process.h"
#include "jail_notes.h"
#include "seatbelt/filter_profile.h"
#include "seatbelt/host.h"
#include "supervise.h"
#include "terminal.h"
#include "util/log.h"

namespace pj::supervisor {

using util::Error;
using util::UniqueFd;

namespace {

// The common set, and SIGCHLD: it wakes the loop when the command ends.
std::vector<int> handled_signals() {
  std::vector<int> out(std::begin(kHandledSignals), std::end(kHandledSignals));
  out.push_back(SIGCHLD);
  return out;
}

// Signals reach the loop through a pipe (macOS has no signalfd): the
// handler writes the signal's number, the loop reads it.
int g_signal_pipe = -1;

extern "C" void on_signal_write(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t w = ::write(g_signal_pipe, &b, 1);
  (void)w;
  errno = saved;
}

class SignalPipe {
public:
  static util::Result<SignalPipe> install() {
    int p[2];
    if (::pipe(p) != 0) return Error::from_errno("create the signal pipe", errno);
    SignalPipe s{UniqueFd(p[0]), UniqueFd(p[1])};
    if (!util::set_nonblocking_cloexec(p[0]) || !util::set_nonblocking_cloexec(p[1]))
      return Error::from_errno("set up the signal pipe", errno);
    g_signal_pipe = p[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal_write;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : handled_signals())
      if (::sigaction(sig, &sa, nullptr) != 0) return Error::from_errno(fmt::format("handle signal {}", sig), errno);
    ::signal(SIGPIPE, SIG_IGN);  // the network filter writes to sockets whose peers may be gone
    return s;
  }
  SignalPipe(SignalPipe&&) = default;
  ~SignalPipe() {
    if (!w_.valid()) return;
    for (int sig : handled_signals()) ::signal(sig, SIG_DFL);
    g_signal_pipe = -1;
  }
  int fd() const { return r_.get(); }
  // The signals that arrived, in order.
  std::vector<int> take() {
    std::vector<int> out;
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(r_.get(), buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < n; ++i) out.push_back(buf[i]);
    return out;
  }

private:
  SignalPipe(UniqueFd r, UniqueFd w) : r_(std::move(r)), w_(std::move(w)) {}
  UniqueFd r_, w_;
};

util::Result<UniqueFd> listen_loopback(int& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  if (!fd.valid()) return Error::from_errno("create a network filter listener", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Error::from_errno("bind a network filter listener to 127.0.0.1", errno);
  if (::listen(fd.get(), 128) != 0) return Error::from_errno("listen on 127.0.0.1 for the network filter", errno);
  socklen_t len = sizeof a;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return Error::from_errno("read a network filter listener's port", errno);
  port = ntohs(a.sin_port);
  return fd;
}

// The network filter's process under sandbox-exec. Only the end of its
// control socket says it ended (no pidfd): then it is waited for.
class SeatbeltFilterChild final : public FilterChild {
public:
  explicit SeatbeltFilterChild(seatbelt::SandboxedFilter p) : p_(std::move(p)) {}
  pid_t pid() const override { return p_.pid(); }
  int exit_fd() const override { return -1; }
  std::optional<int> wait_for(std::chrono::milliseconds wait) override { return p_.wait_for(wait); }
  void kill_and_reap() override { p_.kill_and_reap(); }
  bool reaped() const override { return p_.reaped(); }

private:
  seatbelt::SandboxedFilter p_;
};

// The filter's process: planned (its profile), started under
// sandbox-exec on one end of a stream pair, configured through the other.
util::Result<std::unique_ptr<FilterProcess>> start_filter(const FilterImage& image, const std::string& sandbox_exec,
                                                          const Listeners& listeners, const RunOptions& opts) {
  seatbelt::FilterPlanInput in{
      image.exe,           {filterlink::kNetworkFilterArg}, image.libraries, listeners.http_port, listeners.socks_port,
      outbound_ports(opts)};
  auto spec = seatbelt::plan_filter(in);
  if (!spec) return spec.take_error();
  if (util::verbosity() == util::Verbosity::verbose)
    for (const auto& p : spec->params)
      util::debug("network filter: -D {}={}  # {}", p.name, util::printable(p.value), util::printable(p.why));
  auto pair = filterlink::stream_pair();
  if (!pair) return pair.take_error();
  auto started = seatbelt::SandboxedFilter::start(*spec, sandbox_exec, (*pair)[1].get());
  if (!started) return started.take_error();
  (*pair)[1].reset();
  return FilterProcess::configure(std::make_unique<SeatbeltFilterChild>(std::move(*started)), std::move((*pair)[0]),
                                  opts);
}

// Signals go to the command's process group: no PID namespace, no init.
class GroupControl final : public JailControl {
public:
  explicit GroupControl(seatbelt::Sandboxed& cmd) : cmd_(cmd) {}
  void signal(int sig) override { (void)cmd_.signal(sig); }
  std::string_view everything() const override { return "the command's process group"; }
  std::string_view stopped() const override { return "the command"; }

private:
  seatbelt::Sandboxed& cmd_;
};

class Supervisor {
public:
  Supervisor(seatbelt::Sandboxed cmd, SignalPipe signals, std::optional<Pty> pty, FilterProcess& filter,
             const RunOptions& opts)
      : cmd_(std::move(cmd)),
        signals_(std::move(signals)),
        filter_(filter),
        opts_(opts),
        control_(cmd_),
        core_(control_, opts, pty ? pty->fds : 0U) {
    if (pty) core_.attach_pty(std::move(pty->master));
  }

  // Supervise until the command (the process group's leader) ended.
  util::Result<int> run();
  const Supervision& core() const { return core_; }
  // Why the filter ended the run (it is gone or broke the protocol), or "".
  const std::string& filter_failure() const { return filter_failure_; }

private:
  void on_filter();

  seatbelt::Sandboxed cmd_;
  SignalPipe signals_;
  FilterProcess& filter_;
  const RunOptions& opts_;
  GroupControl control_;
  Supervision core_;  // signals, --timeout, --grace, the terminal
  std::string filter_failure_;
};

// The filter process spoke, or ended. Its end, or a message it may not
// send, ends the run: the command's group is killed at once, so nothing
// runs on without its filter (whose listeners died with it).
void Supervisor::on_filter() {
  auto st = filter_.on_ready();
  if (opts_.refusals) opts_.refusals->update(filter_.decisions());
  if (st) return;
  filter_failure_ = st.error().message();
  util::error("{}; the command was stopped\n  fix: report a bug if it persists", filter_failure_);
  (void)cmd_.signal(SIGKILL);
}

util::Result<int> Supervisor::run() {
  std::vector<pollfd> fds;
  while (true) {
    auto status = cmd_.poll_exit();
    if (!status) return status.take_error();
    if (*status) break;  // the leader ended: the run is over
    if (int sig = cmd_.take_stop()) core_.on_command_stop(sig);
    auto now = Supervision::Clock::now();
    core_.tick(now);  // --timeout, --grace, `fg` of a running job
    // Sleep until a signal (SIGCHLD included), news from the keeper or
    // the filter, terminal bytes or the next deadline; at most a second,
    // in case SIGCHLD was missed, or kForegroundPoll while waiting for the
    // terminal.
    fds.clear();
    fds.push_back({signals_.fd(), POLLIN, 0});
    fds.push_back({cmd_.records_fd(), POLLIN, 0});  // the keeper says the command stopped
    const bool filter_up = filter_failure_.empty();
    fds.push_back({filter_up ? filter_.control_fd() : -1, POLLIN, 0});
    fds.push_back({filter_up ? filter_.resolver_fd() : -1, POLLIN, 0});
    core_.add_pollfds(fds);
    if (::poll(fds.data(), fds.size(), core_.poll_timeout(now, 1000)) < 0 && errno != EINTR)
      return Error::from_errno("wait for the sandboxed command", errno);
    if (fds[2].revents || fds[3].revents) on_filter();
    core_.on_poll(fds);
    if (fds[0].revents & POLLIN)
      for (int sig : signals_.take()) core_.on_signal(sig);
  }
  // No PID namespace to end with the leader: what it left in its process
  // group is killed now (a process in a session of its own is not).
  cmd_.kill_leftovers();
  core_.finish();
  return **cmd_.poll_exit();
}

}  // namespace

util::Result<std::optional<Pty>> open_pty() {
  unsigned fds = terminal_fds();
  if (fds == 0) return std::optional<Pty>();
  Pty pty;
  pty.fds = fds;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY));
  if (!pty.master.valid()) return Error::from_errno("open a pseudo-terminal for the command (posix_openpt)", errno);
  if (::fcntl(pty.master.get(), F_SETFD, FD_CLOEXEC) != 0 || ::grantpt(pty.master.get()) != 0 ||
      ::unlockpt(pty.master.get()) != 0)
    return Error::from_errno("set up the pseudo-terminal (grantpt, unlockpt)", errno);
  const char* name = ::ptsname(pty.master.get());
  if (!name) return Error::from_errno("name the pseudo-terminal (ptsname)", errno);
  pty.path = name;
  pty.terminal.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.terminal.valid()) return Error::from_errno(fmt::format("open the pseudo-terminal {}", name), errno);
  int outer = relay_ends(fds).tty;
  termios mode = pty_settings(outer);
  winsize size;
  ::tcsetattr(pty.terminal.get(), TCSANOW, &mode);
  if (::ioctl(outer, TIOCGWINSZ, &size) == 0) ::ioctl(pty.terminal.get(), TIOCSWINSZ, &size);
  return std::optional<Pty>(std::move(pty));
}

util::Result<Listeners> open_listeners() {
  Listeners l;
  auto http = listen_loopback(l.http_port);
  if (!http) return std::move(http.take_error()).context("network filter (HTTP proxy)");
  auto socks = listen_loopback(l.socks_port);
  if (!socks) return std::move(socks.take_error()).context("network filter (SOCKS5 proxy)");
  l.http = std::move(*http);
  l.socks = std::move(*socks);
  return l;
}

util::Result<FilterImage> filter_image() {
  auto exe = seatbelt::own_executable();
  if (!exe) return exe.take_error();
  return FilterImage{std::move(*exe), seatbelt::loaded_libraries()};
}

std::vector<int> outbound_ports(const RunOptions& opts) {
  std::set<int> ports;
  for (const auto& r : opts.rules.allows())
    if (r.port != 0)
      ports.insert(r.port);
    else
      ports.insert({80, 443});
  if (opts.interceptor)
    for (const auto& b : *opts.interceptor->bindings())
      for (const auto& h : b.hosts) ports.insert(h.port);
  if (opts.upstream_proxy) ports.insert(opts.upstream_proxy->url.port);
  for (const auto& [host_port, to] : opts.proxy_limits.test_resolve) ports.insert(to.second);
  return {ports.begin(), ports.end()};
}

RunOutcome run_sandboxed(const seatbelt::SeatbeltSpec& spec, const std::string& sandbox_exec, std::optional<Pty> pty,
                         Listeners listeners, const FilterImage& image, const RunOptions& opts) {
  auto fail = [](const util::Error& e, std::string_view fix) { return setup_failed(e.message(), fix); };
#ifdef PJ_TEST_SWITCHES
  // --test-fail-network-filter: a start that fails, as a filter that
  // cannot start would (nothing else is started).
  if (opts.test_fail_network_filter) {
    auto failed = start_network_filter(opts);
    util::Error e = failed ? util::Error::invalid("the failing filter started") : failed.take_error();
    return fail(std::move(e).context("start the network filter"), "report a bug");
  }
#endif
  auto filter = start_filter(image, sandbox_exec, listeners, opts);
  if (!filter)
    return fail(std::move(filter.take_error()).context("start the network filter"),
                "report a bug; pi-jail doctor checks sandbox-exec");
  for (auto [fd, kind] : {std::pair{&listeners.http, netproxy::ListenerKind::http},
                          std::pair{&listeners.socks, netproxy::ListenerKind::socks}})
    if (auto st = (*filter)->add_listener(std::move(*fd), kind, std::nullopt); !st)
      return fail(std::move(st.take_error()).context("start the network filter"), "report a bug");
  auto signals = SignalPipe::install();
  if (!signals) return fail(signals.error(), "report a bug");

  seatbelt::LaunchOptions launch{sandbox_exec, pty ? pty->terminal.get() : -1, pty ? pty->fds : 0U};
  auto cmd = seatbelt::Sandboxed::start(spec, launch);
  if (pty) pty->terminal.reset();  // the command holds it now
  if (!cmd)
    return fail(cmd.error(), cmd.error().err() == ENOENT
                                 ? "pi-jail's macOS jail needs /usr/bin/sandbox-exec, part of macOS (pi-jail doctor)"
                                 : "see pi-jail doctor");
  Supervisor sup(std::move(*cmd), std::move(*signals), std::move(pty), **filter, opts);
  auto code = sup.run();
  (*filter)->shutdown();
  RunOutcome out;  // setup_failed, 125
  out.decisions = (*filter)->decisions();
  if (!code || !sup.filter_failure().empty()) {
    if (!code) util::error("{}", code.error().message());
    out.failure = code ? sup.filter_failure() : code.error().message();
    return out;
  }
  RunOutcome ended = sup.core().ended(*code);
  ended.decisions = std::move(out.decisions);
  return ended;
}

}  // namespace pj::supervisor
