// What the network filter's loop needs from the credential filter, and
// no more: whether a host:port is bound to a credential and over which
// wire, whether a proxy request head carries a placeholder where it may
// not go, and a worker to hand a connected bound connection to, whose
// decisions the loop collects into its own record. The loop (proxy.h)
// holds one of these; the credential broker implements it
// (lib/credentials, which imports this room, never the other way).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netproxy/decisions.h"
#include "netproxy/credential_types.h"
#include "netproxy/upstream.h"
#include "util/unique_fd.h"

namespace pj::netproxy {

// The connections a credential filter serves at once (start() makes room
// by closing an idle one first; the loop refuses with 503 past that).
inline constexpr size_t kMaxIntercepted = 64;

// The loop's own handshake and idle bounds, which the credential filter's
// waits keep too.
struct InterceptLimits {
  std::chrono::milliseconds handshake{10000};
  std::chrono::milliseconds idle{600000};
};

class CredentialFilter {
public:
  // A connection the loop connected to a bound host and gives away.
  struct Handoff {
    util::UniqueFd client, upstream;  // connected; the upstream to the checked address
    std::string reply;                // sent to the client first (CONNECT 200, SOCKS success)
    // Wire::plain_http: no TLS either side, and `upstream` must be
    // connected to a loopback address (checked again by the worker).
    Wire wire = Wire::tls;
    std::string prefill;  // plain only: the jail's bytes already read (an absolute-form request)
    Protocol protocol = Protocol::http_connect;
    std::string host, address, reason;
    int port = 0;
    std::chrono::system_clock::time_point wall;
    // Set when `upstream` is a tunnel through this proxy: a new server
    // connection (to the same proxy address) opens its tunnel too.
    std::shared_ptr<const UpstreamProxy> via;
  };

  virtual ~CredentialFilter() = default;

  // The loop's bounds (Proxy::start gives them before the first start()).
  virtual void set_limits(InterceptLimits l) = 0;
  // How a connection to host:port (normalised) is served when a
  // credential is bound to it: plain HTTP when a binding says so for it
  // (a loopback port), else TLS; nullopt when nothing is bound to it.
  virtual std::optional<Wire> bound_wire(const std::string& host, int port) const = 0;
  // The name of the first binding whose placeholder is in `text` (a proxy
  // request head) and that is not bound to host:port over `wire` (port <
  // 0: to nothing); nullopt when none.
  virtual std::optional<std::string> unbound_placeholder(std::string_view text, const std::string& host, int port,
                                                         Wire wire) const = 0;
  // Whether start() would take a connection now (a slot, or one to close).
  virtual bool has_room() = 0;
  // Serve one connection on a worker of the filter's. False (the fds
  // closed) when it cannot: the loop records the refusal.
  virtual bool start(Handoff h) = 0;
  // What the workers decided since the last call (the loop's thread).
  virtual std::vector<Decision> take_decisions() = 0;
  // Whether there is something for take_decisions(): the loop looks every
  // turn, and calls it only then (a filter that serves nothing keeps its
  // code out of the loop's resident pages).
  bool decided() const { return decided_.load(std::memory_order_acquire); }
  // Stop every worker (their connections close) and wait for them.
  virtual void shutdown() = 0;

protected:
  std::atomic<bool> decided_{false};  // set with each decision, cleared by take_decisions()
};

}  // namespace pj::netproxy
