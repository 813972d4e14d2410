// The network filter loop's state (Proxy::Impl, proxy.h), shared by
// proxy.cc (the loop: listeners, accepting, timeouts, the public calls)
// and connection.cc (one connection's way through its states: request,
// rule check, resolution, connect, relay or refusal). Internal to
// lib/netproxy; loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netproxy/poller.h"
#include "netproxy/protocol.h"
#include "netproxy/proxy.h"
#include "netproxy/relay.h"
#include "netproxy/resolver.h"
#include "netproxy/upstream.h"
#include "util/unique_fd.h"

namespace pj::netproxy {

using Clock = std::chrono::steady_clock;

// Non-blocking and close-on-exec; no SIGPIPE from a socket where that is
// a flag (macOS).
[[nodiscard]] bool set_flags(int fd);
// TCP_NODELAY on a relayed socket.
void no_delay(int fd);

// proxy_handshake: connected to the upstream proxy, its tunnel not open yet.
enum class State { handshake, socks_request, resolving, connecting, proxy_handshake, relaying, closing };

// One connection: the client's socket, and once connected the upstream.
struct Conn {
  std::uint64_t id;
  size_t listener;
  ListenerKind kind;
  Protocol protocol = Protocol::http;
  util::UniqueFd client, upstream;
  State state = State::handshake;
  std::string inbuf;
  bool greeted = false;  // SOCKS greeting answered
  Target target;
  Verdict verdict;
  bool rule_refusal = false;  // refused by the rule check itself
  std::string resolving;      // the name given to the resolver, while it is looked up
  std::string upstream_head;  // absolute-form HTTP
  std::vector<net::IpAddress> addrs;
  size_t next_addr = 0;
  int test_port = 0;  // --test-resolve: the stand-in's port (its address is in addrs)
  // Through the upstream proxy: `addrs` are the proxy's, and once
  // connected `tunnel` asks it for the target (State::proxy_handshake).
  bool via_proxy = false;
  std::unique_ptr<TunnelOpener> tunnel;
  std::string address;
  std::string jail_socket_error;  // publish: why the last socket could not be made
  std::string to_client;          // a reply to flush before closing or relaying
  // A host loopback port no binding covers: the jail's first
  // kSniffBytes are read here and scanned for the run's placeholders
  // before they are relayed (Proxy::watch_placeholders).
  size_t sniff_left = 0;
  std::string sniff_tail;  // the last bytes scanned: a placeholder may straddle two reads
  Flow up, down;
  bool client_dead = false, upstream_dead = false;  // hung up: never watched again
  // What relay() last asked the poller to watch on each side: it asks
  // again only for a change (one system call less each, every turn).
  // kAskAgain until relaying starts; nothing else watches them after.
  static constexpr std::uint32_t kAskAgain = ~std::uint32_t{0};
  std::uint32_t client_watch = kAskAgain, upstream_watch = kAskAgain;
  Clock::time_point started = Clock::now();
  Clock::time_point last_active = started;
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
  Clock::time_point deadline;
  bool logged = false;
};

// Which flows of a connection a turn of relay() pumps: both (the relay's
// start, a hang-up), or the one a readiness event concerns.
enum class Pump { both, up, down };

// Poller tags: a connection's client is id << 1, its upstream id << 1 | 1.
constexpr std::uint64_t kTagListener = 1ULL << 62;
constexpr std::uint64_t kTagResolver = 1ULL << 61;
constexpr std::uint64_t kTagTimer = 1ULL << 60;
constexpr std::uint64_t kTagWake = 1ULL << 59;  // the caller's fd (Proxy::wake_on)

struct Proxy::Impl {
  Rules rules;
  ProxyLimits limits;
  DecisionRecorder recorder;
  std::chrono::milliseconds tick;
  Poller poller;
  Resolver resolver;
  struct Listener {
    util::UniqueFd fd;
    ListenerKind kind;
    std::optional<Rules::Forward> target;
    size_t open = 0;  // its connections now
  };
  std::vector<Listener> listeners;
  JailSockets jail_sockets;
  std::optional<Clock::time_point> accept_paused_until;  // the fd table was full
  std::map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::uint64_t next_id = 1;

  std::shared_ptr<CredentialFilter> credentials;        // may be null
  std::shared_ptr<const UpstreamProxy> upstream_proxy;  // may be null: every connection is direct
  std::vector<Watched> watched;
  static constexpr size_t kSniffBytes = 64 * 1024;

  Impl(Rules r, int fd, ProxyLimits l);

  void watch(int fd, std::uint64_t tag, std::uint32_t events) { poller.watch(fd, tag, events); }

  // The loop (proxy.cc).
  void take_intercepted();
  void make_room(size_t listener);
  void pause_accepting();
  void resume_accepting();
  void accept_on(size_t index);
  void sweep();

  // One connection's states (connection.cc).
  std::string checked_host(const Conn& c) const;
  void hand_off(Conn& c, Wire wire);
  void record(Conn& c, bool allowed, std::string reason);
  void close_conn(std::uint64_t id);
  void refuse(Conn& c, int http_status, SocksReply socks, const std::string& reason, std::string_view told = {});
  void flush_and_close(Conn& c);
  void on_client_handshake(Conn& c);
  void decide(Conn& c);
  void on_resolved(Resolver::Answer& r);
  void try_connect(Conn& c);
  void on_connected(Conn& c);
  void proxy_handshake(Conn& c);
  void on_open(Conn& c);
  void relay(Conn& c, Pump which = Pump::both);
  void start_sniffing(Conn& c);
  void sniff(Conn& c);
  void scan_for_placeholders(Conn& c, std::string_view bytes);
  void on_hangup(Conn& c, bool upstream_side);
  void on_conn_event(std::uint64_t tag, std::uint32_t events);
};

}  // namespace pj::netproxy
