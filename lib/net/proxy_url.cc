#include "net/proxy_url.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "util/numbers.h"

namespace pj::net {

namespace {

bool iequal_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

// RFC 3986 section 2.1, strictly: a '%' not followed by two hex digits is
// an error, never a literal '%' (a password must decode one way only).
std::optional<std::string> decode_userinfo_part(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    auto byte = util::parse_number<unsigned>(s.substr(i + 1, 2), 16);
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
    i += 2;
  }
  return out;
}

bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Whether `a` is inside net/prefix (both of one family).
bool in_range(const IpAddress& a, const IpAddress& net, int prefix) {
  if (a.v6 != net.v6) return false;
  const auto* x = a.v6 ? a.v6addr.s6_addr : reinterpret_cast<const unsigned char*>(&a.v4addr);
  const auto* y = net.v6 ? net.v6addr.s6_addr : reinterpret_cast<const unsigned char*>(&net.v4addr);
  for (int i = 0; prefix > 0; ++i, prefix -= 8) {
    const unsigned mask = prefix >= 8 ? 0xffU : (0xffU << (8 - prefix)) & 0xffU;
    if ((x[i] & mask) != (y[i] & mask)) return false;
  }
  return true;
}

}  // namespace

std::string ProxyUrl::authority() const { return net::authority(host, port); }

std::string ProxyUrl::redacted() const { return fmt::format("http://{}{}", user ? *user + ":***@" : "", authority()); }

util::Result<ProxyUrl> parse_proxy_url(std::string_view text) {
  auto bad = [](std::string_view why) { return util::Error::invalid(std::string(why)); };
  if (text.empty()) return bad("empty: write http://HOST:PORT");
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) return bad("not a URL: write http://HOST:PORT");
  if (!iequal_prefix(text, "http://"))
    return bad(
        "the scheme must be http:// (the filter speaks plain HTTP to the proxy and opens a tunnel; "
        "TLS or SOCKS to the proxy is not supported)");
  std::string_view rest = text.substr(7);
  // The authority ends at the first '/', '?' or '#' after the userinfo
  // (a password may hold '/' only escaped, as %2F).
  const size_t at = rest.rfind('@');
  const size_t auth_end = rest.find_first_of("/?#", at == std::string_view::npos ? 0 : at + 1);
  std::string_view authority = rest.substr(0, auth_end);
  if (auth_end != std::string_view::npos && rest.substr(auth_end) != "/")
    return bad("a path, query or fragment after HOST:PORT (write http://HOST:PORT)");
  ProxyUrl u;
  if (at != std::string_view::npos && at < authority.size()) {
    std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const size_t colon = userinfo.find(':');
    auto user = decode_userinfo_part(userinfo.substr(0, colon));
    auto password = colon == std::string_view::npos ? std::optional<std::string>("")
                                                    : decode_userinfo_part(userinfo.substr(colon + 1));
    if (!user || !password) return bad("a '%' in the user or password not followed by two hex digits");
    if (user->empty()) return bad("an empty user before '@'");
    if (has_control(*user) || has_control(*password)) return bad("a control character in the user or password");
    u.user = std::move(*user);
    u.password = std::move(*password);
  }
  auto split = split_host_port(authority);
  if (!split) return split.take_error();
  if (split->host.empty()) return bad("no host (write http://HOST:PORT)");
  if (!split->has_port) return bad("no port (write http://HOST:PORT, e.g. http://proxy.example:3128)");
  auto port = util::parse_port(split->port);
  if (!port) return bad("the port must be a number from 1 to 65535");
  std::string_view host = split->host;
  if (host.starts_with("[")) {
    auto ip = parse_ip(host);
    if (!ip || !ip->v6) return bad("not an IPv6 address in brackets");
  }
  auto normal = normalise_host(host);
  if (!normal) return bad("the host is not a name (letters, digits, '-' and '.') or an address");
  u.host = std::move(*normal);
  u.port = *port;
  return u;
}

std::string redact_userinfo(std::string_view text) {
  const size_t scheme_end = text.find("://");
  const size_t from = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < from) return std::string(text);
  std::string_view userinfo = text.substr(from, at - from);
  return std::string(text.substr(0, from)) + std::string(userinfo.substr(0, userinfo.find(':'))) + ":***" +
         std::string(text.substr(at));
}

NoProxy NoProxy::parse(std::string_view list) {
  NoProxy np;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.empty()) continue;
    if (item == "*") {
      np.all_ = true;
      continue;
    }
    Entry e;
    std::string_view text = item;
    const size_t slash = text.find('/');
    if (slash != std::string_view::npos) {  // a range, without a port
      auto net = parse_ip(text.substr(0, slash));
      auto prefix = util::parse_number<int>(text.substr(slash + 1));
      if (!net || !prefix || *prefix > (net->v6 ? 128 : 32)) {
        np.ignored_.emplace_back(item);
        continue;
      }
      e.net = *net;
      e.prefix = *prefix;
      np.entries_.push_back(std::move(e));
      continue;
    }
    if (text.starts_with("*."))
      text.remove_prefix(2);
    else if (text.starts_with("."))
      text.remove_prefix(1);
    if (auto ip = parse_ip(text); ip && text.front() != '[') {  // "::1" as written, without brackets
      e.host = ip->str();
      np.entries_.push_back(std::move(e));
      continue;
    }
    auto split = split_host_port(text);
    std::optional<int> port = split && split->has_port ? util::parse_port(split->port) : std::optional<int>(0);
    auto host = split && !split->host.empty() ? normalise_host(split->host) : std::nullopt;
    if (!host || !port) {
      np.ignored_.emplace_back(item);
      continue;
    }
    e.host = std::move(*host);
    e.port = *port;
    np.entries_.push_back(std::move(e));
  }
  return np;
}

bool NoProxy::matches(std::string_view host, int port) const {
  if (all_) return true;
  const auto literal = parse_ip(host);
  for (const auto& e : entries_) {
    if (e.port != 0 && e.port != port) continue;
    if (e.prefix >= 0) {
      if (literal && in_range(*literal, *e.net, e.prefix)) return true;
      continue;
    }
    if (literal) {
      if (parse_ip(e.host) && *parse_ip(e.host) == *literal) return true;
      continue;
    }
    if (host == e.host ||
        (host.size() > e.host.size() && host.ends_with(e.host) && host[host.size() - e.host.size() - 1] == '.'))
      return true;
  }
  return false;
}

std::string NoProxy::str() const {
  std::vector<std::string> out;
  if (all_) out.emplace_back("*");
  for (const auto& e : entries_) {
    if (e.prefix >= 0)
      out.push_back(fmt::format("{}/{}", e.net->str(), e.prefix));
    else if (e.port)
      out.push_back(authority(e.host, e.port));
    else
      out.push_back(bracketed(e.host));
  }
  return fmt::format("{}", fmt::join(out, ","));
}

}  // namespace pj::net
