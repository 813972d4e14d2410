#include "netproxy/rules.h"

#include <arpa/inet.h>

#include <cstring>

#include <fmt/format.h>

namespace pj::netproxy {

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

const char* special4(const in_addr& a) {
  if (in4(a, "0.0.0.0", 8)) return "unspecified (0.0.0.0/8)";
  if (in4(a, "127.0.0.0", 8)) return "loopback (127.0.0.0/8)";
  if (in4(a, "10.0.0.0", 8) || in4(a, "172.16.0.0", 12) || in4(a, "192.168.0.0", 16)) return "private (RFC 1918)";
  if (in4(a, "100.64.0.0", 10)) return "carrier-grade NAT (100.64.0.0/10)";
  if (in4(a, "169.254.0.0", 16)) return "link-local, incl. cloud metadata (169.254.0.0/16)";
  if (in4(a, "192.0.0.0", 24)) return "IETF protocol assignments (192.0.0.0/24)";
  if (in4(a, "198.18.0.0", 15)) return "benchmarking (198.18.0.0/15)";
  if (in4(a, "224.0.0.0", 4)) return "multicast (224.0.0.0/4)";
  if (in4(a, "240.0.0.0", 4)) return "reserved or broadcast (240.0.0.0/4)";
  return nullptr;
}

// An IPv4 address carried inside an IPv6 one (NAT64, 6to4), if any.
std::optional<in_addr> embedded4(const in6_addr& a) {
  in_addr v4{};
  if (in6(a, "64:ff9b::", 96)) {
    std::memcpy(&v4, &a.s6_addr[12], 4);
    return v4;
  }
  if (in6(a, "2002::", 16)) {
    std::memcpy(&v4, &a.s6_addr[2], 4);
    return v4;
  }
  return std::nullopt;
}

bool all_of(std::string_view s, std::string_view chars) { return s.find_first_not_of(chars) == std::string_view::npos; }

}  // namespace

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN];
  if (v6) ::inet_ntop(AF_INET6, &v6addr, buf, sizeof buf);
  else ::inet_ntop(AF_INET, &v4addr, buf, sizeof buf);
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

const char* special_range(const IpAddress& a) {
  if (!a.v6) return special4(a.v4addr);
  const in6_addr& x = a.v6addr;
  if (IN6_IS_ADDR_UNSPECIFIED(&x)) return "unspecified (::)";
  if (IN6_IS_ADDR_LOOPBACK(&x)) return "loopback (::1)";
  if (in6(x, "::", 96)) return "IPv4-compatible (::/96)";
  if (in6(x, "fc00::", 7)) return "unique local (fc00::/7)";
  if (in6(x, "fe80::", 10)) return "link-local (fe80::/10)";
  if (in6(x, "fec0::", 10)) return "site-local (fec0::/10)";
  if (in6(x, "ff00::", 8)) return "multicast (ff00::/8)";
  if (auto v4 = embedded4(x))
    if (special4(*v4)) return "an embedded IPv4 address in a refused range (NAT64/6to4)";
  return nullptr;
}

std::optional<std::string> normalise_host(std::string_view host) {
  if (auto ip = parse_ip(host)) return ip->str();
  std::string h;
  for (char c : host) h += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty() || h.size() > 253 || !all_of(h, "abcdefghijklmnopqrstuvwxyz0123456789-.") ||
      h.find("..") != std::string::npos || h.front() == '.' || h.front() == '-')
    return std::nullopt;
  return h;
}

std::optional<Rule> Rules::parse(std::string_view pattern, std::string source) {
  Rule r;
  r.source = std::move(source);
  std::string_view host = pattern;
  if (pattern.starts_with("[")) {
    size_t close = pattern.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = pattern.substr(0, close + 1);
    if (close + 2 < pattern.size() && pattern[close + 1] == ':') r.port = std::atoi(pattern.data() + close + 2);
  } else if (size_t colon = pattern.rfind(':'); colon != std::string_view::npos) {
    host = pattern.substr(0, colon);
    r.port = std::atoi(std::string(pattern.substr(colon + 1)).c_str());
  }
  if (host.starts_with("*.")) {
    r.wildcard = true;
    auto n = normalise_host(host.substr(2));
    if (!n) return std::nullopt;
    r.host = *n;
    return r;
  }
  auto n = normalise_host(host);
  if (!n) return std::nullopt;
  r.host = *n;
  return r;
}

void Rules::allow(std::string_view pattern, std::string source) {
  if (auto r = parse(pattern, std::move(source))) allow_.push_back(*r);
}

void Rules::deny(std::string_view pattern, std::string source) {
  if (auto r = parse(pattern, std::move(source))) deny_.push_back(*r);
}

namespace {

bool matches(const Rule& r, const std::string& host, int port) {
  bool host_ok = r.wildcard ? host.size() > r.host.size() + 1 && host.ends_with("." + r.host) : host == r.host;
  if (!host_ok) return false;
  return r.port == 0 ? (port == 80 || port == 443) : port == r.port;
}

std::string rule_text(const Rule& r) {
  std::string h = r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host;
  if (r.wildcard) h = "*." + h;
  if (r.port) h += ":" + std::to_string(r.port);
  return fmt::format("{} ({})", h, r.source);
}

}  // namespace

Verdict Rules::check(std::string_view raw_host, int port) const {
  auto host = normalise_host(raw_host);
  if (!host) return {false, false, fmt::format("\"{}\" is not a valid host", raw_host)};
  if (port < 1 || port > 65535) return {false, false, fmt::format("port {} is not valid", port)};
  for (const auto& r : deny_)
    if (matches(r, *host, port)) return {false, false, "denied by " + rule_text(r)};
  for (const auto& r : allow_)
    if (matches(r, *host, port)) return {true, !r.wildcard, "allowed by " + rule_text(r)};
  return {false, false, fmt::format("no rule allows {}:{}", *host, port)};
}

Verdict Rules::check_address(const Verdict& host_verdict, std::string_view host, const IpAddress& addr) const {
  std::string a = addr.str();
  for (const auto& r : deny_)
    if (!r.wildcard && r.host == a) return {false, false, "address " + a + " denied by " + rule_text(r)};
  const char* range = special_range(addr);
  if (range && !host_verdict.explicit_host)
    return {false, false,
            fmt::format("{} resolves to {}, {}: allowed only when a rule names the host exactly", host, a, range)};
  return host_verdict;
}

std::vector<Rules::Forward> Rules::forwards() const {
  std::vector<Forward> out;
  for (const auto& r : allow_) {
    if (r.wildcard || r.port == 0) continue;
    if (r.host == "localhost") {
      out.push_back({*parse_ip("127.0.0.1"), r.port, r.source});
      out.push_back({*parse_ip("::1"), r.port, r.source});
    } else if (auto ip = parse_ip(r.host); ip && (r.host == "127.0.0.1" || r.host == "::1")) {
      out.push_back({*ip, r.port, r.source});
    }
  }
  return out;
}

}  // namespace pj::netproxy
