// The network filter's relay: a non-blocking event loop in the supervisor
// (epoll and splice on Linux; poll and a buffer copy elsewhere).
// It accepts on listening sockets that the jail's init created inside the
// jail's network namespace (so no path or port inside can be swapped),
// checks each request against the rules, resolves names outside the jail
// (on worker threads: the loop never blocks), connects to the address it
// checked, and relays. Every decision is recorded. On macOS the listeners
// are on the host's loopback, reachable from the Seatbelt jail only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "netproxy/rules.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::netproxy {

enum class ListenerKind { http, socks, forward };

struct Decision {
  std::chrono::system_clock::time_point time;
  std::string protocol;  // "http-connect", "http", "socks5", "forward"
  std::string host;
  int port = 0;
  std::string address;   // the address connected to, when one was
  bool allowed = false;
  std::string reason;
  std::uint64_t bytes_up = 0, bytes_down = 0;
  std::int64_t duration_ms = 0;
  std::string json() const;  // one line
};

struct ProxyLimits {
  size_t max_connections = 256;
  std::chrono::milliseconds handshake{10000};  // head, resolution and connect
};

class Proxy {
public:
  // `log_fd`: JSON lines are appended there (-1: none).
  static util::Result<std::unique_ptr<Proxy>> start(Rules rules, int log_fd, ProxyLimits limits = {});
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // A listener to serve; for `forward`, where to connect on the host.
  util::Status add_listener(util::UniqueFd fd, ListenerKind kind, std::optional<Rules::Forward> target);
  // The loop's fd: readable when run_once() has work (Linux); -1 where
  // the loop has no single fd (portable path): call run_for() instead.
  int fd() const;
  // Handle everything ready; never blocks.
  void run_once();
  // Wait up to `max_wait` for work, then handle it (a loop on its own thread).
  void run_for(std::chrono::milliseconds max_wait);
  // Close every connection (the jail is gone), recording each.
  void shutdown();
  const std::vector<Decision>& decisions() const;

private:
  struct Impl;
  explicit Proxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pj::netproxy
