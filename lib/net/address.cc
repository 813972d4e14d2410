#include "net/address.h"

#include <arpa/inet.h>

#include <cstring>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "util/numbers.h"

namespace pj::net {

namespace {

bool in4(const in_addr& a, const char* net, int bits) {
  in_addr n{};
  ::inet_pton(AF_INET, net, &n);
  uint32_t mask = bits == 0 ? 0 : htonl(~0U << (32 - bits));
  return (a.s_addr & mask) == (n.s_addr & mask);
}

bool in6(const in6_addr& a, const char* net, int bits) {
  in6_addr n{};
  ::inet_pton(AF_INET6, net, &n);
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const uint8_t mask = static_cast<uint8_t>(bits >= 8 ? 0xff : 0xff << (8 - bits));
    if ((a.s6_addr[i] & mask) != (n.s6_addr[i] & mask)) return false;
  }
  return true;
}

AddressClass classify4(const in_addr& a) {
  struct Row {
    const char* net;
    int bits;
    Range range;
    const char* why;
  };
  static constexpr Row kRows[] = {
      {"0.0.0.0", 8, Range::unspecified, "unspecified (0.0.0.0/8)"},
      {"127.0.0.0", 8, Range::loopback, "loopback (127.0.0.0/8)"},
      {"10.0.0.0", 8, Range::private_use, "private (10.0.0.0/8)"},
      {"172.16.0.0", 12, Range::private_use, "private (172.16.0.0/12)"},
      {"192.168.0.0", 16, Range::private_use, "private (192.168.0.0/16)"},
      {"100.64.0.0", 10, Range::private_use, "carrier-grade NAT (100.64.0.0/10)"},
      {"169.254.0.0", 16, Range::special, "link-local, incl. cloud metadata (169.254.0.0/16)"},
      {"192.0.0.0", 24, Range::special, "IETF protocol assignments (192.0.0.0/24)"},
      {"198.18.0.0", 15, Range::special, "benchmarking (198.18.0.0/15)"},
      {"224.0.0.0", 4, Range::special, "multicast (224.0.0.0/4)"},
      {"240.0.0.0", 4, Range::special, "reserved or broadcast (240.0.0.0/4)"},
  };
  for (const auto& r : kRows)
    if (in4(a, r.net, r.bits)) return {r.range, r.why};
  return {};
}

in_addr v4_at(const in6_addr& a, std::initializer_list<int> bytes) {
  in_addr v4{};
  auto* out = reinterpret_cast<uint8_t*>(&v4.s_addr);
  int i = 0;
  for (int b : bytes) out[i++] = a.s6_addr[b];
  return v4;
}

// The IPv4 addresses an IPv6 address may carry, with the form's name.
struct Embedded {
  in_addr v4;
  const char* form;
};
std::vector<Embedded> embedded4(const in6_addr& a) {
  const auto last4 = [&] { return v4_at(a, {12, 13, 14, 15}); };
  if (in6(a, "::ffff:0:0", 96)) return {{last4(), "IPv4-mapped (::ffff:0:0/96)"}};
  if (in6(a, "::ffff:0:0:0", 96)) return {{last4(), "SIIT (::ffff:0:0:0/96)"}};
  if (in6(a, "::", 96)) return {{last4(), "IPv4-compatible (::/96)"}};
  if (in6(a, "64:ff9b::", 96)) return {{last4(), "NAT64 (64:ff9b::/96)"}};
  if (in6(a, "64:ff9b:1::", 48)) {
    // RFC 6052 section 2.2: where the IPv4 address sits depends on the
    // prefix length the network chose (/48, /56, /64 or /96); bits 64-71
    // are skipped. Every candidate is checked.
    const char* form = "local-use NAT64 (64:ff9b:1::/48)";
    return {{v4_at(a, {6, 7, 9, 10}), form},
            {v4_at(a, {7, 9, 10, 11}), form},
            {v4_at(a, {9, 10, 11, 12}), form},
            {last4(), form}};
  }
  if (in6(a, "2002::", 16)) return {{v4_at(a, {2, 3, 4, 5}), "6to4 (2002::/16)"}};
  if (in6(a, "2001::", 32)) {
    in_addr client = v4_at(a, {12, 13, 14, 15});
    client.s_addr = ~client.s_addr;  // RFC 4380: the client address is stored inverted
    return {{v4_at(a, {4, 5, 6, 7}), "Teredo server (2001::/32)"}, {client, "Teredo client (2001::/32)"}};
  }
  return {};
}

AddressClass classify6(const in6_addr& x) {
  if (IN6_IS_ADDR_UNSPECIFIED(&x)) return {Range::unspecified, "unspecified (::)"};
  if (IN6_IS_ADDR_LOOPBACK(&x)) return {Range::loopback, "loopback (::1)"};
  AddressClass worst;
  if (in6(x, "fc00::", 7))
    worst = {Range::private_use, "unique local (fc00::/7)"};
  else if (in6(x, "fec0::", 10))
    worst = {Range::private_use, "site-local (fec0::/10)"};
  else if (in6(x, "fe80::", 10))
    worst = {Range::special, "link-local (fe80::/10)"};
  else if (in6(x, "ff00::", 8))
    worst = {Range::special, "multicast (ff00::/8)"};
  else if (in6(x, "64:ff9b:1::", 48))
    worst = {Range::private_use, "local-use NAT64 (64:ff9b:1::/48), a translator of the local network"};
  else if (in6(x, "::", 96))
    worst = {Range::special, "IPv4-compatible (::/96), deprecated"};
  const bool candidates = in6(x, "64:ff9b:1::", 48);
  for (const auto& e : embedded4(x)) {
    AddressClass c = classify4(e.v4);
    // Of local-use NAT64's candidate positions the unused ones read as
    // 0.0.0.0/8, which no translator maps: only the others count.
    if (candidates && c.range == Range::unspecified) continue;
    if (c.range > worst.range) worst = {c.range, fmt::format("{} in {}", c.why, e.form)};
  }
  return worst;
}

bool all_of(std::string_view s, std::string_view chars) { return s.find_first_not_of(chars) == std::string_view::npos; }

}  // namespace

bool is_loopback_literal(std::string_view host) {
  auto ip = parse_ip(host);
  return ip && (ip->v6 ? IN6_IS_ADDR_LOOPBACK(&ip->v6addr) : in4(ip->v4addr, "127.0.0.0", 8));
}

bool is_loopback_host(std::string_view host) {
  return is_loopback_literal(host) || host == "localhost" || host == "localhost.";
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN];
  if (v6)
    ::inet_ntop(AF_INET6, &v6addr, buf, sizeof buf);
  else
    ::inet_ntop(AF_INET, &v4addr, buf, sizeof buf);
  return buf;
}

bool IpAddress::operator==(const IpAddress& o) const {
  if (v6 != o.v6) return false;
  return v6 ? std::memcmp(&v6addr, &o.v6addr, sizeof v6addr) == 0 : v4addr.s_addr == o.v4addr.s_addr;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  IpAddress ip;
  if (s.find(':') != std::string::npos) {
    if (::inet_pton(AF_INET6, s.c_str(), &ip.v6addr) != 1) return std::nullopt;
    if (IN6_IS_ADDR_V4MAPPED(&ip.v6addr)) {
      std::memcpy(&ip.v4addr, &ip.v6addr.s6_addr[12], 4);
      return ip;
    }
    ip.v6 = true;
    return ip;
  }
  // inet_aton takes every legacy form (127.1, 2130706433, 0x7f.1, 0177.0.0.1),
  // as resolvers do; anything with other characters is a name.
  if (!all_of(s, "0123456789abcdefABCDEFxX.")) return std::nullopt;
  if (::inet_aton(s.c_str(), &ip.v4addr) == 0) return std::nullopt;
  return ip;
}

AddressClass classify(const IpAddress& a) { return a.v6 ? classify6(a.v6addr) : classify4(a.v4addr); }

std::optional<std::string> normalise_host(std::string_view host) {
  // "127.0.0.1." is an absolute name that resolvers read as the literal:
  // it is the literal here too (never handed to the host's resolver).
  std::string_view bare = host;
  if (bare.size() > 1 && bare.back() == '.' && bare.front() != '[') bare.remove_suffix(1);
  if (auto ip = parse_ip(bare)) return ip->str();
  std::string h;
  for (char c : bare) h += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (h.empty() || h.size() > 253 || !all_of(h, "abcdefghijklmnopqrstuvwxyz0123456789-.") ||
      h.find("..") != std::string::npos || h.front() == '.' || h.front() == '-' || h.back() == '.')
    return std::nullopt;
  return h;
}

std::string bracketed(std::string_view host) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]", host) : std::string(host);
}

std::string authority(std::string_view host, int port) { return fmt::format("{}:{}", bracketed(host), port); }

std::string NetPattern::str() const {
  std::string h = bracketed(host);
  if (wildcard) h = "*." + h;
  return port ? fmt::format("{}:{}", h, port) : h;
}

util::Result<HostPortText> split_host_port(std::string_view text) {
  HostPortText out{text, {}, false};
  if (text.starts_with("[")) {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return util::Error::invalid("unclosed [");
    out.host = text.substr(0, close + 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return util::Error::invalid("expected :PORT after ]");
      out.has_port = true;
      out.port = rest.substr(1);
    }
  } else if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) return util::Error::invalid("IPv6 addresses go in brackets: [::1]:PORT");
    out.has_port = true;
    out.port = text.substr(colon + 1);
    out.host = text.substr(0, colon);
  }
  return out;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  auto split = split_host_port(text);
  if (!split || !split->has_port || split->host.empty()) return std::nullopt;
  auto port = util::parse_port(split->port);
  if (!port) return std::nullopt;
  return HostPort{std::string(split->host), *port};
}

util::Result<NetPattern> parse_net_pattern(std::string_view text) {
  auto bad = [](std::string_view why) { return util::Error::invalid(std::string(why)); };
  NetPattern p;
  auto split = split_host_port(text);
  if (!split) return split.take_error();
  std::string_view host = split->host, port = split->port;
  const bool has_port = split->has_port;
  if (host.starts_with("[")) {
    auto ip = parse_ip(host);
    if (!ip || (!ip->v6 && host.find(':') == std::string_view::npos)) return bad("not an IPv6 address");
  }
  if (has_port) {
    auto number = util::parse_port(port);
    if (!number) return bad("the port must be a number from 1 to 65535");
    p.port = *number;
  }
  if (host.starts_with("*.")) {
    p.wildcard = true;
    host.remove_prefix(2);
  }
  if (host.empty()) return bad(p.wildcard ? "a wildcard needs a domain with a dot (*.example.com)" : "empty host");
  if (host.find('*') != std::string_view::npos) return bad("'*' is only allowed as a leading \"*.\"");
  auto normal = normalise_host(host);
  if (!normal) return bad("a host name has only letters, digits, '-' and '.', at most 253 of them, no empty label");
  if (p.wildcard) {
    if (parse_ip(*normal)) return bad("a wildcard needs a domain name, not an address (*.example.com)");
    if (normal->find('.') == std::string::npos) return bad("a wildcard needs a domain with a dot (*.example.com)");
  }
  p.host = std::move(*normal);
  return p;
}

}  // namespace pj::net
