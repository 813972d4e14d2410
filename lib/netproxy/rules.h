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

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "util/result.h"

namespace pj::netproxy {

// How far the rule that allowed a host lets its addresses reach.
enum class Reach {
  public_only,     // a name or wildcard
  private_ranges,  // a name or wildcard with allow_private
  named_address,   // an IP literal: that address, whatever its range (not loopback)
  loopback,        // `localhost`, or a loopback literal
};

struct Rule {
  std::string host;  // normalised name, domain of "*.domain", or canonical literal
  bool wildcard = false;
  int port = 0;  // 0: ports 80 and 443
  net::PrivateRanges private_ranges = net::PrivateRanges::refused;
  std::string source;        // where it came from (file:line:column, flag)
  std::string text() const;  // "*.example.com:443", "[::1]:8080"
};

struct Verdict {
  bool allowed = false;
  Reach reach = Reach::public_only;  // when allowed
  std::string reason;                // the rule (with its source) or why refused: for the host's log
  std::string told;  // the same for the jail: the rule's text, never a file path or an address looked up
  // Refused by an exact deny rule, which no allow rule outweighs (an
  // exact allow does outweigh a wildcard deny: not set for that).
  bool denied = false;
};

class Rules {
public:
  Rules() = default;
  void allow(const net::NetPattern& pattern, std::string source,
             net::PrivateRanges private_ranges = net::PrivateRanges::refused);
  void deny(const net::NetPattern& pattern, std::string source);
  // The same for a pattern as written: an error (never a rule dropped)
  // when parse_net_pattern() refuses it.
  util::Status allow(std::string_view pattern, std::string source,
                     net::PrivateRanges private_ranges = net::PrivateRanges::refused);
  util::Status deny(std::string_view pattern, std::string source);
  const std::vector<Rule>& allows() const { return allow_; }
  const std::vector<Rule>& denies() const { return deny_; }

  // May the jail connect to `host:port`? `host` is normalised here.
  Verdict check(std::string_view host, int port) const;
  // May it connect to `addr`, resolved from a host that check() allowed?
  Verdict check_address(const Verdict& host_verdict, std::string_view host, const net::IpAddress& addr) const;

  // The addresses a host stands for without asking a resolver: an IP
  // literal (in any notation, trailing dot or not) is itself; `localhost`
  // is 127.0.0.1 and ::1 (RFC 6761), never what the host's resolver says.
  // Empty: a name to resolve.
  static std::vector<net::IpAddress> fixed_addresses(std::string_view host);

  // The host-loopback services to forward into the jail, one per listener
  // inside: every allow rule naming 127.0.0.1, ::1 or localhost with a
  // port is forwarded on both 127.0.0.1 and ::1 inside (so nothing in the
  // jail can bind the other one), rules for the same port merged.
  struct Forward {
    net::IpAddress addr;  // where it listens inside the jail
    int port;
    std::string host;  // the rule's host, checked (and connected to) as that rule
    std::string source;
  };
  std::vector<Forward> forwards() const;

private:
  std::vector<Rule> allow_, deny_;
};

}  // namespace pj::netproxy
