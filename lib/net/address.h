// Addresses and network patterns, parsed once: the policy (limits,
// explain) and the filter (enforcement) read a pattern with this one
// parser, so what `explain` shows is what the filter decides. Pure: no
// sockets, no DNS.
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace pj::net {

// A parsed IP address (v4 stored as v4, IPv4-mapped v6 unwrapped to v4).
struct IpAddress {
  bool v6 = false;
  in_addr v4addr{};
  in6_addr v6addr{};
  std::string str() const;  // canonical text: dotted quad, or RFC 5952 v6
  bool operator==(const IpAddress& o) const;
};

// Parse an IP literal in every notation inet_aton/inet_pton accept:
// "127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1",
// "::ffff:127.0.0.1", "[::1]". nullopt when `text` is not a literal.
// A trailing dot is not part of a literal (normalise_host() strips it).
std::optional<IpAddress> parse_ip(std::string_view text);

// HOST, HOST:PORT, [V6] or [V6]:PORT split where the port begins: the
// host as written (brackets kept) and the port's text, unchecked. The
// error says what is wrong with the shape: an unclosed bracket, something
// other than ":PORT" after one, or an unbracketed host with a colon.
struct HostPortText {
  std::string_view host, port;
  bool has_port = false;
};
util::Result<HostPortText> split_host_port(std::string_view text);

// HOST:PORT or [V6]:PORT with a port (1 to 65535, parse_port) and a
// non-empty host: the one parser of a host and port, for every caller
// that needs both.
struct HostPort {
  std::string host;  // as written, brackets kept
  int port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text);

// The reverse, for what is shown or sent: a host with a colon (an IPv6
// literal) in brackets, and HOST:PORT with it ("[::1]:1455").
std::string bracketed(std::string_view host);
std::string authority(std::string_view host, int port);

// What kind of address this is, from the most to the least reachable.
enum class Range {
  global,       // none of the below
  private_use,  // RFC 1918, CGNAT, ULA, site-local, local-use NAT64
  special,      // link-local (cloud metadata), multicast, reserved, benchmarking, IETF, IPv4-compatible
  loopback,     // 127.0.0.0/8, ::1
  unspecified,  // 0.0.0.0/8, ::
};
// Whether a rule lets a name reach private ranges (operator policy only).
enum class PrivateRanges { refused, allowed };

struct AddressClass {
  Range range = Range::global;
  std::string why;  // "loopback (127.0.0.0/8) in NAT64 (64:ff9b::/96)"; empty for global
};
// One classifier for every form: an IPv4 address carried in IPv6
// (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, SIIT ::ffff:0:0:0/96,
// NAT64 64:ff9b::/96, local-use NAT64 64:ff9b:1::/48 at every RFC 6052
// prefix length, 6to4 2002::/16, Teredo 2001::/32 server and obfuscated
// client) is classified as that IPv4 address, and the worst of the
// candidates counts.
AddressClass classify(const IpAddress& a);

// "Example.COM." -> "example.com"; IP literals (a trailing dot too:
// "127.0.0.1." is 127.0.0.1) -> canonical text. nullopt for something
// that is neither a valid name nor a literal.
std::optional<std::string> normalise_host(std::string_view host);

// Whether `host` is an IP literal of the loopback range (127.0.0.0/8, ::1).
bool is_loopback_literal(std::string_view host);
// Whether `host` (normalised) names the host's loopback: a loopback
// literal or `localhost` (RFC 6761: never what a resolver says).
bool is_loopback_host(std::string_view host);

// A network pattern as written in policy and on the command line: "host",
// "*.domain", an IP literal in any notation parse_ip() takes ("[::1]" in
// brackets), each with an optional ":port".
struct NetPattern {
  std::string host;       // normalise_host(): lower case, no trailing dot, literals canonical
  bool wildcard = false;  // matches names below `host` (not `host` itself)
  int port = 0;           // 0: the default ports (80 and 443)
  // "*.example.com:443", "[::1]:8080", "127.0.0.1": parses back to itself.
  std::string str() const;
  bool operator==(const NetPattern&) const = default;
};

// The one parser. A wildcard's domain must be a name with a dot, never an
// address ("*.1.2.3" is refused: resolvers would read "1.2.3" as 1.2.0.3).
// The error says what is wrong with `text`, without repeating it.
util::Result<NetPattern> parse_net_pattern(std::string_view text);

}  // namespace pj::net
