// Which destinations the jail may reach. Pure: no sockets, no DNS.
//
// A destination is a host (a name, or an IP literal in any notation a
// resolver accepts) and a port. Names are matched after normalisation;
// literals after canonicalisation. Deny beats allow. Resolved addresses in
// loopback, private, CGNAT, link-local (cloud metadata), ULA, multicast and
// unspecified ranges (and their IPv4-mapped IPv6 forms) are refused unless
// the rule that allowed the host names it exactly.
#pragma once

#include <netinet/in.h>

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
std::optional<IpAddress> parse_ip(std::string_view text);

// Why an address may not be reached by default, or nullptr.
const char* special_range(const IpAddress& a);

// "Example.COM." -> "example.com"; IP literals -> canonical text.
// nullopt for something that is neither a valid name nor a literal.
std::optional<std::string> normalise_host(std::string_view host);

struct Rule {
  std::string host;   // normalised name, "*.domain", or canonical literal
  bool wildcard = false;
  int port = 0;       // 0: ports 80 and 443
  std::string source; // where it came from (file:line:column, flag)
};

struct Verdict {
  bool allowed = false;
  bool explicit_host = false;  // the allowing rule names this host or address exactly
  std::string reason;          // the rule (with its source) or why refused
};

class Rules {
public:
  Rules() = default;
  // Patterns as normalised by policy::parse_net_pattern.
  void allow(std::string_view pattern, std::string source);
  void deny(std::string_view pattern, std::string source);
  const std::vector<Rule>& allows() const { return allow_; }

  // May the jail connect to `host:port`? `host` is normalised here.
  Verdict check(std::string_view host, int port) const;
  // May it connect to `addr`, resolved from a host that check() allowed?
  Verdict check_address(const Verdict& host_verdict, std::string_view host, const IpAddress& addr) const;

  // The host-loopback services to forward into the jail: allow rules that
  // name 127.0.0.1, ::1 or localhost with a port.
  struct Forward {
    IpAddress addr;
    int port;
    std::string source;
  };
  std::vector<Forward> forwards() const;

private:
  static std::optional<Rule> parse(std::string_view pattern, std::string source);
  std::vector<Rule> allow_, deny_;
};

}  // namespace pj::netproxy
