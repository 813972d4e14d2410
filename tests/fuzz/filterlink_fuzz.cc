// The decoders of the supervisor-filter link. The supervisor's of what
// the network filter process sends: the filter parses the jail's bytes
// and remote servers', so every record it sends may be crafted. And the
// filter's of what the supervisor sends (the settings with the upstream
// proxy's credentials, the rules, the bindings, its run-time listen and
// unlisten), held to the same strictness, with no descriptor and with
// one (a listener's). A record decodes or is refused, never crashes; what
// decodes encodes again to a record that decodes to the same bytes. The
// record's type says which side sends it: each input is given to both
// decoders.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "fuzz.h"

using namespace pj::filterlink;

namespace {

// `n` descriptors (0 or 1) for a record to carry: /dev/null, opened once.
std::vector<pj::util::UniqueFd> fds(size_t n) {
  static const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<pj::util::UniqueFd> v;
  for (size_t i = 0; i < n; ++i) v.emplace_back(::fcntl(devnull, F_DUPFD_CLOEXEC, 0));
  return v;
}

template <typename Decoded, typename Decode>
void round_trip(std::string_view in, size_t carried, Decode decode) {
  Decoded m = decode(in, fds(carried));
  if (!m) return;
  auto rec = encode(*m);
  if (!rec) pj::fuzz::broken("a decoded message does not encode");
  Decoded again = decode(rec->bytes, fds(rec->fds.size()));
  if (!again) pj::fuzz::broken("an encoded message does not decode");
  auto rec2 = encode(*again);
  if (!rec2 || rec2->bytes != rec->bytes) pj::fuzz::broken("a message does not survive its round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  round_trip<pj::util::Result<FromFilter>>(in, 0, decode_from_filter);
  for (size_t carried : {0, 1}) round_trip<pj::util::Result<FromSupervisor>>(in, carried, decode_from_supervisor);
  return 0;
}
