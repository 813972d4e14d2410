// The network filter's relay: a non-blocking event loop in the supervisor
// (epoll and splice on Linux; poll and a buffer copy elsewhere).
// It accepts on listening sockets that the jail's init created inside the
// jail's network namespace (so no path or port inside can be swapped),
// checks each request against the rules, resolves names outside the jail
// (on worker threads: the loop never blocks), connects to the address it
// checked, and relays. Every decision is recorded (decisions.h: bounded).
// Each listener has its own connection budget; every connection has a
// handshake or an idle timeout; a socket that hung up is never watched
// again; a full fd table pauses accepting instead of spinning; a relay
// moves at most relay_slice bytes a direction per wake-up, so a bulk
// transfer does not hold back small requests. On macOS the listeners
// are on the host's loopback, reachable from the Seatbelt jail only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "netproxy/decisions.h"
#include "netproxy/credential_filter.h"
#include "netproxy/listener_kind.h"
#include "netproxy/resolver.h"
#include "netproxy/rules.h"
#include "netproxy/upstream.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::netproxy {

// Makes an unconnected TCP socket of `family` inside the jail's network
// namespace (the fd, or -errno). Needed by publish listeners only.
using JailSockets = std::function<int(int family)>;

// Every bound of the filter; the defaults are documented in README
// "Network" and pi-jail(1). Tests shorten the timeouts (--test-net-timeouts).
struct ProxyLimits {
  // Each listener's own budget (the HTTP and SOCKS ports and every forward
  // port): one listener's connections never take another's. When a
  // listener's budget is full, a new connection takes the place of that
  // listener's connection idle the longest (one still in its request first).
  size_t connections_per_listener = 512;
  size_t resolver_names = 64;                  // names queued or being looked up
  std::chrono::milliseconds handshake{10000};  // request head, resolution and connect
  std::chrono::milliseconds idle{600000};      // a relayed connection with no byte either way
  size_t relay_slice = 256 * 1024;             // bytes one direction moves per wake-up
  LogLimits log;
  // Test builds only (--test-resolve HOST:PORT=IP:PORT2): once the rules
  // allowed HOST:PORT, connect to IP:PORT2 instead of resolving HOST (the
  // name stays what is checked, bound, verified and shown). Empty otherwise.
  std::vector<std::pair<std::string, std::pair<net::IpAddress, uint16_t>>> test_resolve;
};

class Proxy {
public:
  // `log_fd`: JSON lines are appended there (-1: none). Raises the
  // process's soft RLIMIT_NOFILE to its hard limit (each relayed
  // connection holds six fds on Linux: two sockets, two pipes), and
  // ignores SIGPIPE process-wide (splice(2) raises it for a gone peer).
  // `credentials` (may be null): connections to hosts bound to a
  // credential are handed to it once connected (CONNECT, SOCKS5 and
  // forwards); a placeholder in a proxy request head is refused (403)
  // unless the tunnel goes to a host it is bound to, and always in a
  // plain-http request (never sent in clear).
  static util::Result<std::unique_ptr<Proxy>> start(Rules rules, int log_fd, ProxyLimits limits = {},
                                                    std::shared_ptr<CredentialFilter> credentials = nullptr);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // A listener to serve; for `forward`, where to connect on the host.
  // `publish`: `target` is the jail's address and port, its `source` the
  // operator's entry; it is relayed without the rule check (the operator
  // chose it; the jail's server is not a destination the jail asked for).
  util::Status add_listener(util::UniqueFd fd, ListenerKind kind, std::optional<Rules::Forward> target);
  // Stop serving the listener whose socket is `fd` (as add_listener took
  // it): closed now, so its port is free; its connections go on to their
  // end. An error when no listener served has that socket.
  util::Status remove_listener(int fd);
  // The run's placeholders to look for in the first bytes the jail sends
  // to a host loopback port that no binding covers (credential_types.h Watched).
  void watch_placeholders(std::vector<Watched> watched);
  // Where publish listeners get their sockets (before the first accept).
  void set_jail_sockets(JailSockets make);
  // Connect out through this HTTP proxy (upstream.h) where it applies,
  // the credential filter's connections too (before the first accept).
  void use_upstream_proxy(std::shared_ptr<const UpstreamProxy> proxy);
  // The filter process (which may not open files): names are asked
  // through `ask`, and their answers given to name_answer() (resolver.h).
  void resolve_through(Resolver::Ask ask);
  void name_answer(std::uint64_t id, std::vector<net::IpAddress> addrs, std::string error);
  // Every decision, as it is recorded (the filter process sends it on).
  void on_decision(std::function<void(const Decision&)> sink);
  // The loop's fd: readable when run_once() has work (Linux); -1 where
  // the loop has no single fd (portable path): call run_for() instead.
  int fd() const;
  // Handle everything ready; never blocks.
  void run_once();
  // Wait up to `max_wait` for work, then handle it (a loop on its own
  // thread). True when the fd given to wake_on() is readable (or hung up).
  bool run_for(std::chrono::milliseconds max_wait);
  // run_for() also wakes for `fd` (the owner's own, e.g. the filter
  // process's control socket), says so, and leaves reading it to the
  // owner: one wait a turn for both instead of a poll(2) of the owner's
  // and then the loop's, on either path.
  void wake_on(int fd);
  // Close every connection (the jail is gone), recording each.
  void shutdown();
  const DecisionTable& decisions() const;
  // Connections open now, and names queued for resolution (for tests).
  size_t open_connections() const;

private:
  struct Impl;
  explicit Proxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pj::netproxy
