// The decoders of the messages between the supervisor and the network
// filter process. The supervisor's of what the filter sends: the filter
// parses the jail's bytes and remote servers', so every record it sends
// may be crafted. The filter's of what the supervisor sends (the settings
// with the upstream proxy's credentials, the rules, the bindings), read
// with the same strictness. A record decodes or is refused, never
// crashes; what decodes encodes again to a record that decodes to the
// same bytes. The record's type says which side sends it: each input is
// given to both decoders.
#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "fuzz.h"

using namespace pj::filterlink;

namespace {

template <typename Decode>
void round_trip(std::string_view in, Decode decode) {
  auto m = decode(in);
  if (!m) return;
  auto rec = encode(*m);
  if (!rec) pj::fuzz::broken("a decoded message does not encode");
  auto again = decode(rec->bytes);
  if (!again) pj::fuzz::broken("an encoded message does not decode");
  auto rec2 = encode(*again);
  if (!rec2 || rec2->bytes != rec->bytes) pj::fuzz::broken("a message does not survive its round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  round_trip(in, [](std::string_view b) { return decode_from_filter(b, {}); });
  round_trip(in, [](std::string_view b) { return decode_from_supervisor(b, {}); });
  return 0;
}
