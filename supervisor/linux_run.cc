#include "linux_run.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "linuxjail/host.h"
#include "linuxjail/child.h"
#include "linuxjail/jail_socket.h"
#include "linuxjail/launch.h"
#include "linuxjail/view.h"
#include "filter_process.h"
#include "jail_notes.h"
#include "login_callbacks.h"
#include "ssh_access.h"
#include "scratch_audit.h"
#include "supervise.h"
#include "terminal.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/startup_pages.h"

namespace pj::supervisor {

using linuxjail::Jail;
using linuxjail::Stage;
using linuxjail::SyncRecord;
using Ending = RunOutcome::Ending;

namespace {

sigset_t handled_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kHandledSignals) sigaddset(&set, s);
  return set;
}

std::string describe_failure(const SyncRecord& rec, const linuxjail::JailSpec& spec) {
  std::string step(linuxjail::stage_name(rec.stage));
  if (rec.op >= 0 && static_cast<size_t>(rec.op) < spec.mounts.size())
    step = fmt::format("{} ({}; {})", step, linuxjail::describe(spec.mounts[static_cast<size_t>(rec.op)]),
                       spec.mounts[static_cast<size_t>(rec.op)].why);
  return fmt::format("{}: {} ({})", step, std::strerror(rec.err), util::errno_name(rec.err));
}

void report_failure(const SyncRecord& rec, const linuxjail::JailSpec& spec) {
  if (rec.stage == Stage::exec) {
    util::error("cannot execute {} inside the jail: {} ({})\n  fix: {}", spec.exec_path, std::strerror(rec.err),
                util::errno_name(rec.err), linuxjail::stage_fix(rec.stage, rec.err));
    return;
  }
  say_setup_failed(describe_failure(rec, spec), linuxjail::stage_fix(rec.stage, rec.err));
}

// Signals reach the jail through its init, which passes them on to the
// command's process group.
class InitControl final : public JailControl {
public:
  explicit InitControl(Jail& jail) : jail_(jail) {}
  void signal(int sig) override { (void)jail_.signal(sig); }
  std::string_view everything() const override { return "the whole jail"; }
  std::string_view stopped() const override { return "the jail"; }

private:
  Jail& jail_;
};

// Everything one supervised run owns; torn down in reverse order.
class Supervisor {
public:
  Supervisor(const linuxjail::JailSpec& spec, const RunOptions& opts, Jail jail, util::UniqueFd sfd,
             const std::function<void()>& once_ended)
      : spec_(spec),
        opts_(opts),
        jail_(std::move(jail)),
        sfd_(std::move(sfd)),
        once_ended_(once_ended),
        control_(jail_),
        core_(control_, opts, spec.terminal.streams == linuxjail::Streams::pty ? spec.terminal.pty_fds : 0U) {}

  RunOutcome run();

private:
  void on_control();
  void on_listeners(std::vector<util::UniqueFd> fds);
  void prepare_proxy();
  void start_proxy(std::vector<util::UniqueFd> fds);
  util::Status add_listener(util::UniqueFd fd, netproxy::ListenerKind kind,
                            std::optional<netproxy::Rules::Forward> target);
  void on_filter();
  void abort_jail(std::string why);  // "fix: report a bug": for what cannot be the caller's doing

  const linuxjail::JailSpec& spec_;
  const RunOptions& opts_;
  Jail jail_;
  util::UniqueFd sfd_;
  const std::function<void()>& once_ended_;
  bool ended_ = false;           // init said kControlEnded
  bool init_gone_ = false;       // its pidfd said it exited
  bool filter_gone_ = false;     // the filter process ended or broke the protocol
  bool mapped_by_page_ = false;  // util::map_code_by_page(), at the filter's first message
  InitControl control_;
  Supervision core_;                       // signals, --timeout, --grace, the terminal
  std::vector<util::UniqueFd> listeners_;  // as they arrive, in batches
  // The network filter: a process of its own (filter_), or, while
  // credentials are bound to hosts (their token exchange is not yet
  // carried over to that process), the relay in this one (proxy_).
  std::unique_ptr<netproxy::Proxy> proxy_;
  std::unique_ptr<FilterProcess> filter_;
  std::unique_ptr<LoginCallbacks> logins_;  // the program's login callbacks, served while the jail listens
  bool serving_ = false;                    // the listeners were handed to the filter
  std::optional<SyncRecord> failure_;
  std::string supervisor_failure_;  // set by abort_jail()
  // O_PATH fd of the root of the jail's scratch tmpfs (kControlScratch):
  // it keeps the tmpfs readable after the jail's mount namespace is gone,
  // for the end-of-run survey.
  util::UniqueFd scratch_;
  std::string survey_scratch();
};

// What the run left in its scratch places (/tmp, /var/tmp, /dev/shm):
// their directories in the scratch tmpfs, reached from its root
// (scratch_). The jail never saw that root (init detached it once the
// places were bound), so the names in it are still the ones init made.
std::string Supervisor::survey_scratch() {
  std::vector<util::UniqueFd> held;
  std::vector<std::pair<std::string, int>> dirs;
  for (const auto& place : linuxjail::view::scratch_places()) {
    if (!scratch_.valid()) break;  // init never got as far as making them
    const std::string dir(place.dir);
    util::UniqueFd fd(::openat(scratch_.get(), dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) continue;
    dirs.emplace_back(std::string(place.path), fd.get());
    held.push_back(std::move(fd));
  }
  return scratch::discarded_line(scratch::survey(dirs));
}

// The supervisor's own part of the setup failed: kill the whole jail and
// end the run as a setup failure (125), naming the step.
void Supervisor::abort_jail(std::string why) {
  say_setup_failed(why, "report a bug if it persists", true);
  if (supervisor_failure_.empty()) supervisor_failure_ = std::move(why);
  (void)jail_.signal(SIGKILL);
}

// The listeners come in batches of at most linuxjail::kFdBatch.
void Supervisor::on_listeners(std::vector<util::UniqueFd> fds) {
  for (auto& fd : fds) listeners_.push_back(std::move(fd));
  if (serving_ || listeners_.size() > spec_.listeners.size())
    return abort_jail(
        fmt::format("the jail sent {} listeners, {} were planned", listeners_.size(), spec_.listeners.size()));
  if (listeners_.size() == spec_.listeners.size()) start_proxy(std::move(listeners_));
}

bool is_listening(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
}

// The network filter, started while init builds the jail's filesystem
// (init then waits for it with the listeners: start_proxy()).
void Supervisor::prepare_proxy() {
  // --test-fail-network-filter (test builds): start_network_filter() fails
  // after a delay, as a filter that cannot start would. Every other run
  // uses the filter process.
  bool in_process = false;
#ifdef PJ_TEST_SWITCHES
  in_process = opts_.test_fail_network_filter;
#endif
  if (in_process) {
    auto proxy = start_network_filter(opts_);
    if (!proxy) return abort_jail("start the network filter: " + proxy.error().message());
    proxy_ = std::move(*proxy);
    return;
  }
  auto filter = FilterProcess::start(opts_);
  if (!filter) return abort_jail(filter.error().message());
  filter_ = std::move(*filter);
}

util::Status Supervisor::add_listener(util::UniqueFd fd, netproxy::ListenerKind kind,
                                      std::optional<netproxy::Rules::Forward> target) {
  return filter_ ? filter_->add_listener(std::move(fd), kind, std::move(target))
                 : proxy_->add_listener(std::move(fd), kind, std::move(target));
}

// The filter process spoke, or ended. Its end, or a message it may not
// send, ends the run: the jail is killed at once, so nothing of it runs
// without its filter (its listeners die with the filter, and no other
// way out of its network namespace exists).
void Supervisor::on_filter() {
  auto st = filter_->on_ready();
  if (st) return;
  const std::string why = st.error().message();
  util::error("{}; the jail was stopped\n  fix: report a bug if it persists", why);
  if (supervisor_failure_.empty()) supervisor_failure_ = why;
  (void)jail_.signal(SIGKILL);
  filter_gone_ = true;
}

void Supervisor::start_proxy(std::vector<util::UniqueFd> fds) {
  serving_ = true;
  if (!proxy_ && !filter_) return;  // prepare_proxy() failed: the jail is being killed
  auto forwards = opts_.rules.forwards();
  for (size_t i = 0; i < fds.size(); ++i) {
    const auto& l = spec_.listeners[i];
    using K = linuxjail::ListenSpec::Kind;
    if (!is_listening(fds[i].get())) {
      // linuxjail open_listener(): the jail has no IPv6, so no ::1 to serve (or to squat).
      if (l.address == runtime::Loopback::v6) continue;
      return abort_jail(
          fmt::format("the jail's listener {}:{} is not listening", runtime::loopback_address(l.address), l.port));
    }
    std::optional<netproxy::Rules::Forward> target;
    if (l.kind == K::forward)
      for (const auto& f : forwards)
        if (f.addr.v6 == (l.address == runtime::Loopback::v6) && f.port == l.port) target = f;
    // An SSH host: checked (and connected to) by the rules as that host.
    if (l.kind == K::ssh)
      target = netproxy::Rules::Forward{*net::parse_ip("127.0.0.1"), l.target_port, l.target_host,
                                        fmt::format("ssh {}:{}", l.target_host, l.target_port)};
    auto kind = l.kind == K::http_proxy    ? netproxy::ListenerKind::http
                : l.kind == K::socks_proxy ? netproxy::ListenerKind::socks
                                           : netproxy::ListenerKind::forward;
    if (auto st = add_listener(std::move(fds[i]), kind, target); !st) {
      return abort_jail("start the network filter: " + st.error().message());
    }
  }
  // Published ports: the host's loopback to the jail's own 127.0.0.1,
  // through sockets made in the jail's network namespace.
  auto jail_sockets = [pidfd = jail_.pidfd()](int family) { return linuxjail::jail_tcp_socket(pidfd, family); };
  if (!filter_)
    proxy_->set_jail_sockets(jail_sockets);
  else if (!opts_.publish.empty() || !opts_.login_callbacks.empty())
    filter_->set_jail_sockets(jail_sockets);
  auto published = bind_published(opts_.publish);
  if (!published) {
    util::error("{}", published.error().message());
    if (supervisor_failure_.empty()) supervisor_failure_ = published.error().message();
    (void)jail_.signal(SIGKILL);
    return;
  }
  for (auto& p : *published) {
    netproxy::Rules::Forward target{*net::parse_ip("127.0.0.1"), p.spec.jail_port, "127.0.0.1",
                                    fmt::format("publish {} ({})", p.spec.str(), p.why)};
    if (auto st = add_listener(std::move(p.fd), netproxy::ListenerKind::publish, target); !st)
      return abort_jail("serve a published port: " + st.error().message());
  }
  // The login callbacks: watched from now on (the filter process serves
  // them; the in-process relay of a test build does not).
  if (filter_) logins_ = LoginCallbacks::start(jail_.pidfd(), opts_, *filter_);
  if (auto st = jail_.filter_ready(); !st) return abort_jail(st.error().message());
  util::drop_startup_pages();  // again: serving the listeners was start-up too
}

void Supervisor::on_control() {
  auto msg = jail_.read_control();
  if (!msg) {
    return abort_jail(msg.error().message());
  }
  if (!*msg) return;
  if ((*msg)->tag == linuxjail::kControlListeners) on_listeners(std::move((*msg)->fds));
  if ((*msg)->tag == linuxjail::kControlScratch && (*msg)->fds.size() == 1) scratch_ = std::move((*msg)->fds.front());
  if ((*msg)->tag == linuxjail::kControlMaster && (*msg)->fds.size() == 1)
    core_.attach_pty(std::move((*msg)->fds.front()));
  if ((*msg)->stop_signal) core_.on_command_stop((*msg)->stop_signal);
  if ((*msg)->ended) ended_ = true;
}

RunOutcome Supervisor::run() {
  if (!spec_.listeners.empty()) prepare_proxy();
  // A thread: only now that the jail is cloned.
  if (opts_.ssh_agent)
    if (auto st = opts_.ssh_agent->start(); !st) abort_jail("start the SSH agent proxy: " + st.error().message());
  util::drop_startup_pages();
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({jail_.pidfd(), POLLIN, 0});
    fds.push_back({sfd_.get(), POLLIN, 0});
    fds.push_back({jail_.sync_fd(), POLLIN, 0});  // -1 once closed: poll skips it
    fds.push_back({jail_.control_fd(), POLLIN, 0});
    fds.push_back({proxy_ ? proxy_->fd() : -1, POLLIN, 0});
    const bool filter_up = filter_ && !filter_gone_;
    fds.push_back({filter_up ? filter_->control_fd() : -1, POLLIN, 0});
    fds.push_back({filter_up ? filter_->exit_fd() : -1, POLLIN, 0});
    fds.push_back({filter_up ? filter_->resolver_fd() : -1, POLLIN, 0});
    const bool watching = logins_ && filter_up;
    fds.push_back({watching ? logins_->fd() : -1, POLLIN, 0});
    core_.add_pollfds(fds);
    const int idle = watching ? logins_->timeout_ms(LoginCallbacks::Clock::now()) : -1;
    if (::poll(fds.data(), fds.size(), core_.poll_timeout(Supervision::Clock::now(), idle)) < 0) {
      if (errno == EINTR) continue;
      util::error("poll: {}", std::strerror(errno));
      break;
    }
    if (fds[2].revents) {
      auto rec = jail_.read_sync();
      if (!rec)
        util::error("{}", rec.error().message());
      else if (*rec && !failure_)
        failure_ = **rec;
    }
    if (fds[3].revents) on_control();
    if (fds[4].revents & POLLIN) proxy_->run_once();
    if (fds[5].revents || fds[6].revents || fds[7].revents) on_filter();
    // The filter's first message of the run (it said ready before this
    // loop; now a name to look up, a connection's decision): the jail uses
    // the network, and this process serves it for as long as the run
    // lasts; from here on it maps its code a page at a time
    // (util::map_code_by_page()). Not before: a command that never
    // connects would pay the milliseconds for nothing.
    if (!mapped_by_page_ && (fds[5].revents & POLLIN) && !filter_gone_) {
      util::map_code_by_page();
      mapped_by_page_ = true;
    }
    // After the filter's messages: it may have said a listener is closed.
    if (logins_ && filter_ && !filter_gone_) logins_->on_poll(LoginCallbacks::Clock::now());
    if (proxy_ && opts_.refusals) opts_.refusals->update(proxy_->decisions());
    if (filter_ && opts_.refusals) opts_.refusals->update(filter_->decisions());
    core_.on_poll(fds);
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd_.get(), &si, sizeof si) == sizeof si) core_.on_signal(static_cast<int>(si.ssi_signo));
    }
    core_.tick();  // --timeout, --grace, `fg` of a running job
    if (fds[0].revents & POLLIN) init_gone_ = true;
    if (init_gone_ || ended_) break;
  }
  core_.finish();
  RunOutcome out;
  if (logins_) out.login_callbacks = logins_->served_log();
  if (proxy_) {
    proxy_->shutdown();
    out.decisions = proxy_->decisions();
  }
  if (filter_) {
    filter_->shutdown();
    out.decisions = filter_->decisions();
  }
  while (jail_.sync_fd() >= 0 && !failure_) {
    auto rec = jail_.read_sync();
    if (!rec || !*rec) break;
    failure_ = **rec;
  }
  // Messages the last poll left unread: only the scratch fd matters now.
  while (jail_.control_fd() >= 0 && !scratch_.valid()) {
    auto msg = jail_.read_control();
    if (!msg || !*msg) break;
    if ((*msg)->tag == linuxjail::kControlScratch && (*msg)->fds.size() == 1) scratch_ = std::move((*msg)->fds.front());
  }

  // Only when nothing of the jail runs any more (a failed poll(2) ends
  // the loop with the jail alive: then after the reap).
  const bool nothing_runs = ended_ || init_gone_;
  if (once_ended_ && nothing_runs) once_ended_();
  rusage before{};
  ::getrusage(RUSAGE_CHILDREN, &before);
  auto code = jail_.reap();
  if (once_ended_ && !nothing_runs) once_ended_();
  // What the jail's processes used: init waited for every one of them, so
  // their times and the largest RSS reach pi-jail with init (getrusage(2)).
  rusage after{};
  ::getrusage(RUSAGE_CHILDREN, &after);
  auto ms = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1000 + static_cast<std::uint64_t>(t.tv_usec) / 1000;
  };
  out.resources.cpu_ms = ms(after.ru_utime) + ms(after.ru_stime) - ms(before.ru_utime) - ms(before.ru_stime);
  out.resources.cpu_from = "getrusage";
  // ru_maxrss of RUSAGE_CHILDREN is the largest of every child pi-jail
  // ever waited for (git too): only a new maximum is the jail's.
  if (after.ru_maxrss > before.ru_maxrss) {
    out.resources.memory_peak_bytes = static_cast<std::uint64_t>(after.ru_maxrss) * 1024;
    out.resources.memory_peak_from = "largest process (getrusage)";
  }
  struct statfs sf;
  if (scratch_.valid() && ::fstatfs(scratch_.get(), &sf) == 0)
    out.resources.scratch_bytes =
        static_cast<std::uint64_t>(sf.f_blocks - sf.f_bfree) * static_cast<std::uint64_t>(sf.f_bsize);
  if (!code) {
    util::error("{}", code.error().message());
    out.failure = code.error().message();
    return out;
  }
  if (!supervisor_failure_.empty()) {
    out.failure = supervisor_failure_;
    return out;  // setup_failed, 125
  }
  if (failure_) {
    report_failure(*failure_, spec_);
    out.failure = describe_failure(*failure_, spec_);
    if (failure_->stage != Stage::exec) return out;  // setup_failed, 125
    out.ending = Ending::not_executed;
    out.exit_code = out.command_status = *code;
    return out;
  }
  RunOutcome ended = core_.ended(*code);
  ended.decisions = std::move(out.decisions);
  ended.resources = std::move(out.resources);
  ended.login_callbacks = std::move(out.login_callbacks);
  ended.discarded = survey_scratch();
  return ended;
}

}  // namespace

void block_handled_signals() {
  sigset_t set = handled_set();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

void choose_streams(linuxjail::JailSpec& spec) {
  auto& t = spec.terminal;
  t.pty_fds = terminal_fds();
  if (t.pty_fds == 0) {
    t.streams = linuxjail::Streams::inherit;
    return;
  }
  t.streams = linuxjail::Streams::pty;
  int tty = relay_ends(t.pty_fds).tty;
  t.mode = pty_settings(tty);
  ::ioctl(tty, TIOCGWINSZ, &t.size);
}

RunOutcome run_jailed(const linuxjail::JailSpec& spec, const RunOptions& opts,
                      const linuxjail::cgroup::JoinFiles& cgroups, const std::function<void()>& once_ended) {
  auto launched = Jail::launch(spec, cgroups);
  if (!launched) {
    const util::Error& e = launched.error();
    return setup_failed(e.message(), e.err() ? linuxjail::namespace_fix(e.err()) : "report a bug");
  }
  sigset_t set = handled_set();
  util::UniqueFd sfd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sfd.valid())
    return setup_failed(fmt::format("create a signalfd: {} ({})", std::strerror(errno), util::errno_name(errno)),
                        "report a bug");
  Supervisor sup(spec, opts, std::move(*launched), std::move(sfd), once_ended);
  return sup.run();
}

}  // namespace pj::supervisor
