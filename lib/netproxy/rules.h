// Which destinations the jail may reach. Pure: no sockets, no DNS.
//
// A destination is a host (a name, or an IP literal in any notation a
// resolver accepts) and a port. Names are matched after normalisation;
// literals after canonicalisation. Rules do not depend on their order:
// the most specific matching rule decides (a rule naming the host exactly
// beats a wildcard, a longer wildcard beats a shorter one), and a deny
// beats an allow of the same specificity.
//
// Every address a host resolves to is classified (classify(), every
// IPv4-in-IPv6 form unwrapped) and refused by range unless the deciding
// rule reaches that range: public addresses are reachable through any
// allow rule; private ones (RFC 1918, CGNAT, ULA) through a rule with
// `allow_private` or one naming the address; link-local (cloud metadata),
// multicast and reserved ones only through a rule naming the address;
// loopback only through a rule naming a loopback address or `localhost`;
// the unspecified address never.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pj::netproxy {

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

// What kind of address this is, from the most to the least reachable.
enum class Range {
  global,       // none of the below
  private_use,  // RFC 1918, CGNAT, ULA, site-local, local-use NAT64
  special,      // link-local (cloud metadata), multicast, reserved, benchmarking, IETF, IPv4-compatible
  loopback,     // 127.0.0.0/8, ::1
  unspecified,  // 0.0.0.0/8, ::
};
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

// Whether a rule lets a name reach private ranges (operator policy only).
enum class PrivateRanges { refused, allowed };

// How far the rule that allowed a host lets its addresses reach.
enum class Reach {
  public_only,    // a name or wildcard
  private_ranges, // a name or wildcard with allow_private
  named_address,  // an IP literal: that address, whatever its range (not loopback)
  loopback,       // `localhost`, or a loopback literal
};

struct Rule {
  std::string host;   // normalised name, domain of "*.domain", or canonical literal
  bool wildcard = false;
  int port = 0;       // 0: ports 80 and 443
  PrivateRanges private_ranges = PrivateRanges::refused;
  std::string source; // where it came from (file:line:column, flag)
  std::string text() const;  // "*.example.com:443", "[::1]:8080"
};

struct Verdict {
  bool allowed = false;
  Reach reach = Reach::public_only;  // when allowed
  std::string reason;  // the rule (with its source) or why refused: for the host's log
  std::string told;    // the same for the jail: the rule's text, never a file path or an address looked up
};

class Rules {
public:
  Rules() = default;
  // Patterns as normalised by policy::parse_net_pattern.
  void allow(std::string_view pattern, std::string source, PrivateRanges private_ranges = PrivateRanges::refused);
  void deny(std::string_view pattern, std::string source);
  const std::vector<Rule>& allows() const { return allow_; }

  // May the jail connect to `host:port`? `host` is normalised here.
  Verdict check(std::string_view host, int port) const;
  // May it connect to `addr`, resolved from a host that check() allowed?
  Verdict check_address(const Verdict& host_verdict, std::string_view host, const IpAddress& addr) const;

  // The addresses a host stands for without asking a resolver: an IP
  // literal (in any notation, trailing dot or not) is itself; `localhost`
  // is 127.0.0.1 and ::1 (RFC 6761), never what the host's resolver says.
  // Empty: a name to resolve.
  static std::vector<IpAddress> fixed_addresses(std::string_view host);

  // The host-loopback services to forward into the jail, one per listener
  // inside: every allow rule naming 127.0.0.1, ::1 or localhost with a
  // port is forwarded on both 127.0.0.1 and ::1 inside (so nothing in the
  // jail can bind the other one), rules for the same port merged.
  struct Forward {
    IpAddress addr;     // where it listens inside the jail
    int port;
    std::string host;   // the rule's host, checked (and connected to) as that rule
    std::string source;
  };
  std::vector<Forward> forwards() const;

private:
  static std::optional<Rule> parse(std::string_view pattern, std::string source);
  std::vector<Rule> allow_, deny_;
};

}  // namespace pj::netproxy
