// The supervisor's side of the network filter process (filterproc/filter.h):
// start it (this executable exec'd afresh, empty environment, only its
// control socket and /dev/null; on Linux as a clone of this process, on
// macOS under sandbox-exec with a profile of its own: FilterChild), configure
// it, then answer what it asks
// while the jail runs: names (resolved here, where NSS and /etc are),
// sockets of the jail's network namespace (for published ports), and
// record every decision it reports in this process's DecisionRecorder,
// so that the report, the log and the jail's notes read as before; and
// hand it, while the run lasts, host listeners to serve and to close
// again (the login callbacks, login_callbacks.h).
//
// Everything the filter sends is hostile input: it parses the jail's
// bytes and remote servers'. Its messages are decoded strictly
// (filterlink::decode_from_filter), a message it may not send ends it,
// and so does a message it may send only once, sent twice. The filter
// never writes a host file: this side does, if ever.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "credentials/token_exchange.h"
#include "filterlink/messages.h"
#include "netproxy/decisions.h"
#include "netproxy/proxy.h"
#include "netproxy/resolver.h"
#include "run.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

// The filter's process as this side holds it; how it was started is the
// backend's (Linux: filter_start_linux.cc; macOS: seatbelt/launch.h).
class FilterChild {
public:
  virtual ~FilterChild() = default;
  virtual pid_t pid() const = 0;
  // Readable once the process exited (a pidfd), or -1 where only the end
  // of its control socket says so.
  virtual int exit_fd() const = 0;
  // Its wait status once it ended (then reaped), waiting at most `wait`;
  // nullopt while it runs.
  virtual std::optional<int> wait_for(std::chrono::milliseconds wait) = 0;
  // Kill it (SIGKILL) and reap it, unless reaped already.
  virtual void kill_and_reap() = 0;
  virtual bool reaped() const = 0;
};

class FilterProcess {
public:
  // Linux (filter_start_linux.cc): exec the filter as a clone of this
  // process, then configure() it.
  static util::Result<std::unique_ptr<FilterProcess>> start(const RunOptions& opts);
  // Send the filter `child` runs (at the other end of `sock`) the rules and
  // limits of `opts`, and wait for it to say it is locked down and ready.
  // An error names the step; the child is then killed.
  static util::Result<std::unique_ptr<FilterProcess>> configure(std::unique_ptr<FilterChild> child, util::UniqueFd sock,
                                                                const RunOptions& opts);
  ~FilterProcess();
  FilterProcess(const FilterProcess&) = delete;
  FilterProcess& operator=(const FilterProcess&) = delete;

  // A listener for the filter to serve (sent with its fd).
  util::Status add_listener(util::UniqueFd fd, netproxy::ListenerKind kind,
                            std::optional<netproxy::Rules::Forward> target);
  // Where the sockets for published ports are made (this side: the filter
  // cannot enter the jail's network namespace). Without it (a run that
  // publishes no port and has no login callbacks), a filter that asks
  // for one is killed.
  void set_jail_sockets(netproxy::JailSockets make) { jail_sockets_ = std::move(make); }

  // A host listener to serve as a published port to `target` (the jail's
  // 127.0.0.1 or ::1) from now on, until unlisten() of the id returned.
  util::Result<std::uint64_t> listen(util::UniqueFd fd, const netproxy::Rules::Forward& target);
  // Tell the filter to close listener `id`: it stays held() until the
  // filter says it closed it (its host port is free only then).
  util::Status unlisten(std::uint64_t id);
  // Whether the filter still holds listener `id` (served, or told to close
  // and not yet said it did).
  bool held(std::uint64_t id) const { return served_.count(id) || closing_.count(id); }

  // The descriptors to poll for POLLIN: the control socket, the filter's
  // exit (FilterChild::exit_fd(), or -1), the resolver's wake-up fd.
  int control_fd() const { return sock_.get(); }
  int exit_fd() const { return child_->exit_fd(); }
  int resolver_fd() const { return resolver_.fd(); }
  // Handle what is ready; never blocks. An error: the filter is gone or
  // broke the protocol (it is then killed): the run must end.
  util::Status on_ready();

  // Tell the filter to stop, wait for it a bounded time, then kill it.
  void shutdown();
  const netproxy::DecisionTable& decisions() const { return recorder_.table(); }
  pid_t pid() const { return child_->pid(); }

private:
  FilterProcess(std::unique_ptr<FilterChild> child, util::UniqueFd sock, const RunOptions& opts);
  util::Status send_config(const RunOptions& opts);
  util::Status send_roots();
  util::Status send_credentials(const RunOptions& opts);
  util::Status send_bindings(credentials::Interceptor& in);
  util::Status send_exchange_seed(const std::shared_ptr<credentials::OAuthExchange>& exchange,
                                  const std::vector<credentials::Binding>& bound);
  util::Status take_token_update(filterlink::TokenUpdate& u);
  // Sends `m`, then wipes its secrets (filterlink::wipe_secrets): pass
  // the last copy of them in this process.
  util::Status send(filterlink::FromSupervisor m, int guard_ms);
  util::Status handle(filterlink::FromFilter m);
  util::Status answer_jail_socket(const filterlink::JailSocketRequest& r);
  util::Status read_messages();
  util::Status answer_names();
  util::Error gone(util::Error e);
  void kill_and_reap() { child_->kill_and_reap(); }

  std::unique_ptr<FilterChild> child_;
  util::UniqueFd sock_;
  netproxy::DecisionRecorder recorder_;
  netproxy::Resolver resolver_;
  netproxy::JailSockets jail_sockets_;
  // Credentials: the CA the filter must say it serves with, and the
  // exchange that takes its token updates (null: it may send none).
  std::string ca_pem_;
  std::shared_ptr<credentials::OAuthExchange> exchange_;
  std::vector<credentials::Binding> added_bindings_;  // since the last token update
  std::vector<std::pair<std::string, std::string>> added_slots_;
  std::vector<std::string> watched_;  // the credentials whose placeholders it looks for
  // Run-time listeners (listen): served, and told to close. The filter may
  // say it closed only one it was told to close, once.
  std::set<std::uint64_t> served_, closing_;
  std::uint64_t next_listen_ = 1;
  // Each socket in the jail forks this process into its namespaces: a
  // bounded number a second.
  std::chrono::steady_clock::time_point jail_socket_second_{};
  int jail_sockets_this_second_ = 0;
  bool ready_ = false;
};

// The one way the filter's status of exit reads in an error: "exited
// with status N", "was killed by signal N (SIGABRT)".
std::string describe_filter_end(int wait_status);

}  // namespace pj::supervisor
