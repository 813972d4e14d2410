// The credential filter's reading of a request from the jail: the head,
// the target forms, the body framing and placeholder substitution.
#include "fuzz.h"
#include "credentials/substitution.h"
#include "netproxy/http1.h"

using namespace pj::netproxy;
using namespace pj::netproxy::http1;
using namespace pj::credentials;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  RequestParse r = parse_request(in);
  if (r.progress == Progress::done) {
    if (r.consumed == 0 || r.consumed > in.size()) pj::fuzz::broken("parse_request consumed outside the buffer");
    (void)target_form(r.line);
    OriginTarget o = intercepted_target(r.line, "api.anthropic.com", 443);
    if (!o.target.empty() && o.target.front() != '/') pj::fuzz::broken("an intercepted target is not origin-form");
    (void)path_under(r.line.target, "/api/oauth/");
    (void)request_framing(r.head);
    std::vector<Binding> bindings{
        {"KEY", "sk-ant-api03-PLACEHOLDERxxxxxxxx", "sk-ant-api03-REALVALUE-0123456789", {{"api.anthropic.com", 443}}},
        {"OTHER", "sk-OTHERPLACEHOLDERyyyy", "sk-other-real", {{"api.openai.com", 443}}}};
    Head h = r.head;
    Substitution s = substitute(h, bindings, "api.anthropic.com", 443);
    if (s.refused && h.serialise() != r.head.serialise()) pj::fuzz::broken("a refused substitution changed the head");
    (void)placeholders_in(r.line.target, bindings);
  }
  // The same bytes as a response head.
  HeadParse p = parse_head(in);
  if (p.progress == Progress::done) {
    (void)status_of(p.head);
    (void)response_framing(p.head, "GET");
    (void)response_framing(p.head, "HEAD");
    (void)p.head.lists("connection", "close");
  }
  // Non-zero padding bits are read (RFC 4648 section 3.5 lets a decoder),
  // so only the decoded bytes must survive a round trip.
  if (auto d = base64_decode(in)) {
    auto again = base64_decode(base64_encode(*d));
    if (!again || *again != *d) pj::fuzz::broken("base64 does not read back what it encoded");
  }
  return 0;
}
