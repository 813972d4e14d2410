// The address classifier and the network pattern parser: what the jail
// names as a host, and what the policy writes as a pattern.
#include <string>

#include "fuzz.h"
#include "net/address.h"

using namespace pj::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  if (auto ip = parse_ip(in)) {
    AddressClass c = classify(*ip);
    auto again = parse_ip(ip->str());
    if (!again || !(*again == *ip)) pj::fuzz::broken("an address does not read back from its canonical text");
    if (classify(*again).range != c.range) pj::fuzz::broken("the canonical text classifies differently");
  }
  if (auto host = normalise_host(in)) {
    auto again = normalise_host(*host);
    if (!again || *again != *host) pj::fuzz::broken("normalise_host is not stable");
  }
  (void)is_loopback_literal(in);
  auto p = parse_net_pattern(in);
  if (p) {
    auto again = parse_net_pattern(p->str());
    if (!again || !(*again == *p)) pj::fuzz::broken("a network pattern does not parse back to itself");
  }
  return 0;
}
