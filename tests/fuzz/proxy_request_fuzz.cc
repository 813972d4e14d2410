// What the jail asks the HTTP proxy for: CONNECT targets, absolute-form
// requests, and the one host:port parser behind them.
#include <string>

#include "fuzz.h"
#include "net/address.h"
#include "netproxy/protocol.h"

using namespace pj::net;
using namespace pj::netproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  HttpRequest r = parse_http_request(in);
  if (r.progress == Progress::done) {
    if (r.consumed == 0 || r.consumed > in.size()) pj::fuzz::broken("the head consumed outside the buffer");
    if (r.target.port <= 0 || r.target.port > 65535) pj::fuzz::broken("a target port out of range");
    (void)normalise_host(r.target.host);
  }
  for (int default_port : {0, 80}) {
    if (auto t = parse_authority(in, default_port)) {
      if (t->port <= 0 || t->port > 65535) pj::fuzz::broken("an authority port out of range");
      (void)normalise_host(t->host);
      (void)is_loopback_literal(t->host);
    }
  }
  return 0;
}
