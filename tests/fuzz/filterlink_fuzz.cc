// The supervisor's decoder of what the network filter process sends: the
// filter parses the jail's bytes and remote servers', so every record it
// sends may be crafted. A record decodes or is refused, never crashes;
// what decodes encodes again to a record that decodes to the same bytes.
#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "fuzz.h"

using namespace pj::filterlink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  auto m = decode_from_filter(in, {});
  if (!m) return 0;
  auto rec = encode(*m);
  if (!rec) pj::fuzz::broken("a decoded message does not encode");
  auto again = decode_from_filter(rec->bytes, {});
  if (!again) pj::fuzz::broken("an encoded message does not decode");
  auto rec2 = encode(*again);
  if (!rec2 || rec2->bytes != rec->bytes) pj::fuzz::broken("a message does not survive its round trip");
  return 0;
}
