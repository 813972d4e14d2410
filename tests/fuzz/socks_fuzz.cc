// The SOCKS5 handshake from the jail: the greeting, then the request.
#include "fuzz.h"
#include "netproxy/protocol.h"

using namespace pj::netproxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  SocksGreeting g = parse_socks_greeting(in);
  if (g.progress == Progress::done) {
    if (g.consumed == 0 || g.consumed > in.size()) pj::fuzz::broken("the greeting consumed outside the buffer");
    in.remove_prefix(g.consumed);
  }
  SocksRequest r = parse_socks_request(in);
  if (r.progress == Progress::done) {
    if (r.consumed == 0 || r.consumed > in.size()) pj::fuzz::broken("the request consumed outside the buffer");
    if (r.target.port < 0 || r.target.port > 65535) pj::fuzz::broken("a port out of range");
  }
  (void)socks_reply(r.reply);
  return 0;
}
