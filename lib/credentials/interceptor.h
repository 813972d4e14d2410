// The network filter's credential side: a connection whose
// checked target is a bound host is handed here by the proxy's loop
// (netproxy::CredentialFilter, which this implements). A
// worker thread (at most kMaxIntercepted at once) terminates the jail's
// TLS with the run's CA, verifies the real server, then reads HTTP/1.1
// requests one by one: placeholders in header values become the real
// values bound to this host, a placeholder bound elsewhere is refused
// (403), responses are masked (real values back to placeholders), a token
// exchange goes through the TokenExchange, and a WebSocket upgrade is
// relayed both ways after its head. Every wait is bounded by the
// filter's handshake and idle limits. What the workers decide reaches the
// proxy's DecisionRecorder through take_decisions() (the loop's thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "credentials/tls_ca.h"
#include "netproxy/credential_filter.h"
#include "netproxy/decisions.h"
#include "credentials/bindings.h"
#include "netproxy/upstream.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::credentials {

class Interceptor final : public netproxy::CredentialFilter {
public:
  // Makes the run's CA. Refuses a binding without a placeholder, without
  // hosts, or whose real value holds CR, LF or NUL (header injection), or
  // whose placeholder is inside another binding's.
  static util::Result<std::shared_ptr<Interceptor>> create(Intercept intercept);
  // The same checks, serving with the CA made elsewhere (the filter
  // process's, made by the supervisor).
  static util::Result<std::shared_ptr<Interceptor>> serving_with(Intercept intercept, const CaPems& ca);
  // The same checks, holding only what the filter process is sent (a new
  // CA, the bindings): no TLS context, and start() takes nothing.
  static util::Result<std::shared_ptr<Interceptor>> to_hand_over(Intercept intercept);
  // The same checks, serving with a TLS authority `make` makes at the first
  // connection that needs one (the filter process's: a run that reaches no
  // bound host parses no anchor and makes no context). `ca_pem`: its CA's
  // certificate. When `make` fails, that connection and every later one
  // ends with its error.
  using MakeTls = std::function<util::Result<std::unique_ptr<TlsAuthority>>()>;
  static util::Result<std::shared_ptr<Interceptor>> serving_later(Intercept intercept, std::string ca_pem,
                                                                  MakeTls make);
  ~Interceptor();
  Interceptor(const Interceptor&) = delete;
  Interceptor& operator=(const Interceptor&) = delete;

  void set_limits(netproxy::InterceptLimits l) override { limits_ = l; }
  // The CA certificate the jail is to trust (PEM); a CA to hand over may
  // still be in the making (TlsAuthority::to_hand_over): made() waits for
  // it and says whether it was made, ca_pem() is then empty if not.
  const std::string& ca_pem() const;
  util::Status made() const;
  // What the filter process needs to do this filter's work (filterproc/filter.h):
  // the CA's key and certificate (handed over once: this side keeps no
  // key, TlsAuthority::hand_over), the bindings now, the refused minting
  // endpoints, the operator's upstream CA file (a path, or empty).
  util::Result<CaPems> hand_over_ca();
  // The bindings now (a snapshot: a token refresh adds bindings while
  // workers read them).
  std::shared_ptr<const std::vector<Binding>> bindings() const;
  const std::vector<MintingEndpoint>& refused() const { return intercept_.refused; }
  const std::vector<BoundHost>& login_endpoints() const { return intercept_.login_endpoints; }
  const std::string& upstream_extra_ca_file() const { return intercept_.upstream.extra_ca_file; }
  // Whether host:port (normalised) is bound to a credential.
  bool bound(const std::string& host, int port) const { return bound_wire(host, port).has_value(); }
  std::optional<netproxy::Wire> bound_wire(const std::string& host, int port) const override;
  std::optional<std::string> unbound_placeholder(std::string_view text, const std::string& host, int port,
                                                 netproxy::Wire wire = netproxy::Wire::tls) const override;

  // Serve one connection on a worker. When kMaxIntercepted are served
  // already, the one waiting longest for a request (never having sent one
  // first) is closed to make room: a jail holding idle connections cannot
  // keep its own model calls out. False (the fds closed) when none waits.
  bool start(Handoff h) override;
  bool has_room() override;
  std::vector<netproxy::Decision> take_decisions() override;
  void shutdown() override;
  size_t active() const { return active_; }

private:
  Interceptor() = default;
  // create() and its kin: the bindings checked, then `make_ca` for them.
  using MakeCa = std::function<util::Result<std::unique_ptr<TlsAuthority>>(const std::vector<BoundHost>& hosts,
                                                                           const UpstreamTrust& upstream)>;
  static util::Result<std::shared_ptr<Interceptor>> make(Intercept intercept, const MakeCa& make_ca);
  void serve(Handoff h);
  void record(netproxy::Decision d);
  // The TLS authority, made now if it is made later (serving_later).
  util::Result<TlsAuthority*> tls();
  // The TokenExchange's new bindings (checked as create() checks them;
  // one that fails the check is left out and recorded).
  void add_bindings(std::vector<Binding> more);
  friend struct InterceptConn;

  Intercept intercept_;  // exchange and upstream CA; bindings live in bindings_
  mutable std::mutex bm_;
  std::shared_ptr<const std::vector<Binding>> bindings_;  // under bm_
  netproxy::InterceptLimits limits_;
  bool serves_ = false;  // false: it only hands the CA over
  std::mutex tls_mu_;
  std::unique_ptr<TlsAuthority> ca_;  // under tls_mu_ while make_later_ may make it
  MakeTls make_later_;                // under tls_mu_
  std::string tls_failed_;            // under tls_mu_: why make_later_ failed
  std::string ca_pem_;
  util::UniqueFd stop_r_, stop_w_;  // readable once shutdown() starts
  std::mutex m_;
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
    // kWaiting for the jail's next request head (the first, or between
    // requests): it may be closed to make room, and is then kReaped. Moved
    // only by compare-and-swap, so a request that just arrived is never
    // cut. `since`: when the wait began (steady-clock ticks); `served`:
    // requests so far.
    static constexpr int kWaiting = 0, kBusy = 1, kReaped = 2;
    std::atomic<int> state{kWaiting};
    std::atomic<std::int64_t> since{0};
    std::atomic<int> served{0};
    int client_fd = -1;    // under m_; -1 once the worker is closing it
    int upstream_fd = -1;  // under m_: the server connection, -1 before it is closed
  };
  // The worker to close for a new connection (under m_), or null.
  Worker* reapable();
  void join_done();                            // under m_: join and forget the workers that ended
  std::list<Worker> workers_;                  // under m_
  std::vector<netproxy::Decision> decisions_;  // under m_
  bool stopping_ = false;                      // under m_
  std::uint64_t overflow_ = 0;                 // under m_: decisions past the queue's bound
  std::atomic<size_t> active_{0};
};

}  // namespace pj::credentials
