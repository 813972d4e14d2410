// The upstream HTTP proxy (`[network] upstream_proxy`): where the
// filter's outbound connections go when the host reaches the network only
// through a proxy. The filter checks a destination by name as ever, then
// connects to the proxy and asks it for a tunnel (CONNECT host:port, RFC
// 9110 section 9.3.6); the proxy resolves the name, so the filter cannot
// check the address it reaches (README "Network"). Loopback destinations
// and those the NO_PROXY list names are connected to directly.
//
// The proxy's reply is hostile input: read with http1::parse_head, at
// most kMaxProxyReply bytes, never a byte past its head (what follows is
// the destination's), and its status line is shown escaped.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "net/proxy_url.h"

namespace pj::netproxy {

inline constexpr size_t kMaxProxyReply = 16 * 1024;

struct UpstreamProxy {
  net::ProxyUrl url;                  // its user and password: secrets
  std::vector<net::IpAddress> addrs;  // resolved by the supervisor before the filter starts
  net::NoProxy no_proxy;              // destinations reached directly

  // "proxy.corp:3128": for messages, never with credentials.
  std::string name() const { return url.authority(); }
  // Whether a connection to `host` (normalised: a name or a literal's
  // canonical text) and `port` goes through the proxy: never to the
  // host's loopback (the proxy's "localhost" is its own), nor to what
  // NO_PROXY names.
  bool applies(std::string_view host, int port) const;
  // Whether `host` (normalised) and `port` are the proxy itself: its own
  // name, or a literal of one of its addresses, at its port. The proxy is
  // never a destination, whatever the rules allow: a connection of the
  // jail's own to it would carry requests (CONNECTs of its own, with no
  // check of pi-jail's) to wherever the proxy goes.
  bool is_itself(std::string_view host, int port) const;
  // The same for an address a destination resolved to (or a literal's).
  bool is_itself(const net::IpAddress& addr, int port) const;
};

// Opens a tunnel on a socket connected to the proxy: sends the CONNECT
// request, then reads the reply's head and nothing after it. Never
// blocks: step() does what the socket allows now and says what it waits
// for. The filter's loop calls it when the socket is ready (its
// handshake deadline bounds the wait); open_tunnel() waits with poll.
class TunnelOpener {
public:
  // `host` as the rules checked it (normalised), `port` the destination's.
  TunnelOpener(const UpstreamProxy& proxy, std::string_view host, int port);
  enum class Step { want_write, want_read, open, failed };
  Step step(int fd);
  // Why it failed: the proxy's refusal with its status line (escaped,
  // bounded), a malformed or oversized reply, a closed connection.
  const std::string& error() const { return error_; }

private:
  Step fail(std::string why);
  std::string proxy_name_, target_;
  std::string out_;   // the request, or what of it is still to send
  std::string head_;  // the reply's bytes read so far, all before its end
  std::string error_;
};

// The same, waiting with poll(2) for at most `timeout` in all, or until
// `stop_fd` (-1: none) is readable. `fd` must be non-blocking. False with
// `why` when no tunnel was opened.
bool open_tunnel(int fd, const UpstreamProxy& proxy, std::string_view host, int port, int stop_fd,
                 std::chrono::milliseconds timeout, std::string& why);

}  // namespace pj::netproxy
