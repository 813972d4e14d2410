#include "netproxy/rules.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

namespace pj::netproxy {

// The address vocabulary (net/address.h) the rules are written in.
using net::AddressClass;
using net::classify;
using net::IpAddress;
using net::is_loopback_literal;
using net::NetPattern;
using net::normalise_host;
using net::parse_ip;
using net::parse_net_pattern;
using net::PrivateRanges;
using net::Range;

std::string Rule::text() const { return NetPattern{host, wildcard, port}.str(); }

namespace {

Rule rule_of(const NetPattern& p, std::string source) {
  Rule r;
  r.host = p.host;
  r.wildcard = p.wildcard;
  r.port = p.port;
  r.source = std::move(source);
  return r;
}

}  // namespace

void Rules::allow(const NetPattern& pattern, std::string source, PrivateRanges private_ranges) {
  allow_.push_back(rule_of(pattern, std::move(source)));
  allow_.back().private_ranges = private_ranges;
}

void Rules::deny(const NetPattern& pattern, std::string source) {
  deny_.push_back(rule_of(pattern, std::move(source)));
}

util::Status Rules::allow(std::string_view pattern, std::string source, PrivateRanges private_ranges) {
  auto p = parse_net_pattern(pattern);
  if (!p) return p.take_error();
  allow(*p, std::move(source), private_ranges);
  return {};
}

util::Status Rules::deny(std::string_view pattern, std::string source) {
  auto p = parse_net_pattern(pattern);
  if (!p) return p.take_error();
  deny(*p, std::move(source));
  return {};
}

namespace {

bool matches(const Rule& r, const std::string& host, int port) {
  bool host_ok = r.wildcard ? host.size() > r.host.size() + 1 && host.ends_with("." + r.host) : host == r.host;
  if (!host_ok) return false;
  return r.port == 0 ? (port == 80 || port == 443) : port == r.port;
}

// Exact names beat every wildcard; a longer wildcard domain beats a
// shorter one (a name has at most 253 characters).
size_t specificity(const Rule& r) { return r.wildcard ? r.host.size() : 1000; }

Reach reach_of(const Rule& r) {
  if (!r.wildcard && (r.host == "localhost" || is_loopback_literal(r.host))) return Reach::loopback;
  if (!r.wildcard && parse_ip(r.host)) return Reach::named_address;
  return r.private_ranges == PrivateRanges::allowed ? Reach::private_ranges : Reach::public_only;
}

// The most specific of `rules` matching; among equals the widest reach,
// then one naming the port: never the order they were written in.
const Rule* decisive(const std::vector<Rule>& rules, const std::string& host, int port) {
  const Rule* best = nullptr;
  auto key = [](const Rule& r) { return std::tuple(specificity(r), reach_of(r), r.port != 0); };
  for (const auto& r : rules)
    if (matches(r, host, port) && (!best || key(r) > key(*best))) best = &r;
  return best;
}

std::string with_source(const Rule& r) { return fmt::format("{} ({})", r.text(), r.source); }

Range widest(Reach reach) {
  switch (reach) {
    case Reach::public_only: return Range::global;
    case Reach::private_ranges: return Range::private_use;
    case Reach::named_address: return Range::special;
    case Reach::loopback: return Range::loopback;
  }
  return Range::global;
}

const char* what_reaches(Range range) {
  switch (range) {
    case Range::private_use: return "allowed only by a rule with allow_private = true, or one naming the address";
    case Range::special: return "allowed only by a rule naming the address";
    case Range::loopback: return "allowed only by a rule naming localhost or a loopback address";
    default: return "never allowed";
  }
}

}  // namespace

Verdict Rules::check(std::string_view raw_host, int port) const {
  auto host = normalise_host(raw_host);
  if (!host) {
    std::string why = "the host is not a valid name or IP address";
    return {false, Reach::public_only, why, why};
  }
  if (port < 1 || port > 65535) {
    std::string why = fmt::format("port {} is not valid", port);
    return {false, Reach::public_only, why, why};
  }
  const Rule* deny = decisive(deny_, *host, port);
  const Rule* allow = decisive(allow_, *host, port);
  if (deny && (!allow || specificity(*deny) >= specificity(*allow)))
    return {false, Reach::public_only, "denied by " + with_source(*deny), "denied by the rule " + deny->text(),
            !deny->wildcard};
  if (allow)
    return {true, reach_of(*allow), "allowed by " + with_source(*allow), "allowed by the rule " + allow->text()};
  std::string why = fmt::format("no rule allows {}:{}", *host, port);
  return {false, Reach::public_only, why, why};
}

Verdict Rules::check_address(const Verdict& host_verdict, std::string_view host, const IpAddress& addr) const {
  std::string a = addr.str();
  for (const auto& r : deny_)
    if (!r.wildcard && r.host == a)
      return {false, Reach::public_only, "address " + a + " denied by " + with_source(r),
              fmt::format("{}: an address it stands for is denied by the rule {}", host, r.text()), true};
  AddressClass c = classify(addr);
  if (c.range == Range::global) return host_verdict;
  if (c.range == Range::unspecified || c.range > widest(host_verdict.reach))
    return {false, Reach::public_only, fmt::format("{} resolves to {}, {}: {}", host, a, c.why, what_reaches(c.range)),
            fmt::format("{}: an address it stands for is in a range the rule does not reach; {}", host,
                        what_reaches(c.range))};
  return host_verdict;
}

std::vector<IpAddress> Rules::fixed_addresses(std::string_view host) {
  auto n = normalise_host(host);
  if (!n) return {};
  if (*n == "localhost") return {*parse_ip("127.0.0.1"), *parse_ip("::1")};
  if (auto ip = parse_ip(*n)) return {*ip};
  return {};
}

std::vector<Rules::Forward> Rules::forwards() const {
  // Per port: for each listener inside, the rule of its own family first,
  // then localhost, then the other family.
  std::vector<int> ports;
  for (const auto& r : allow_)
    if (!r.wildcard && r.port != 0 && (r.host == "localhost" || r.host == "127.0.0.1" || r.host == "::1") &&
        std::find(ports.begin(), ports.end(), r.port) == ports.end())
      ports.push_back(r.port);
  std::vector<Forward> out;
  for (int port : ports) {
    auto rule = [&](std::initializer_list<const char*> prefer) -> const Rule* {
      for (const char* h : prefer)
        for (const auto& r : allow_)
          if (!r.wildcard && r.port == port && r.host == h) return &r;
      return nullptr;
    };
    const Rule* v4 = rule({"127.0.0.1", "localhost", "::1"});
    const Rule* v6 = rule({"::1", "localhost", "127.0.0.1"});
    out.push_back({*parse_ip("127.0.0.1"), port, v4->host, v4->source});
    out.push_back({*parse_ip("::1"), port, v6->host, v6->source});
  }
  return out;
}

}  // namespace pj::netproxy
