// A chunked body from a server or the jail, fed in pieces whose sizes
// the first bytes choose: the result must not depend on the pieces.
#include <string>

#include "fuzz.h"
#include "netproxy/http1.h"

using namespace pj::netproxy;
using namespace pj::netproxy::http1;

namespace {

struct Decoded {
  Progress progress = Progress::need_more;
  std::string out;
  size_t used = 0;
};

Decoded decode(std::string_view body, size_t step) {
  ChunkDecoder d;
  Decoded r;
  while (r.used < body.size() && r.progress == Progress::need_more) {
    size_t used = 0;
    r.progress = d.feed(body.substr(r.used, step), r.out, used);
    if (used > step) pj::fuzz::broken("feed() used more than it was given");
    r.used += used;
    if (used == 0 && r.progress == Progress::need_more) pj::fuzz::broken("feed() neither used bytes nor ended");
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  const size_t step = pj::fuzz::take_byte(in) % 16 + 1;
  Decoded whole = decode(in, in.size() + 1);
  Decoded pieces = decode(in, step);
  if (whole.progress != pieces.progress) pj::fuzz::broken("the outcome depends on how the body arrives");
  if (whole.progress == Progress::done && (whole.out != pieces.out || whole.used != pieces.used))
    pj::fuzz::broken("the decoded body depends on how it arrives");
  return 0;
}
