// Messages a client in the jail sends pi-jail's SSH agent proxy, one
// connection's worth: framed as on the wire, each judged in turn; and the
// same bytes as a known_hosts file and as a host key with a signature.
#include "fuzz.h"
#include "sshagent/agent.h"
#include "sshagent/hostkey.h"
#include "sshagent/known_hosts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  pj::sshagent::Session session({std::string(in.substr(0, 51))});
  std::string_view rest = in;
  while (true) {
    auto len = pj::sshagent::frame_length(rest);
    if (len.bad || !len.body || rest.size() < 4 + *len.body) break;
    auto j = session.judge(rest.substr(4, *len.body));
    if (j.action == pj::sshagent::Action::refuse && j.refusal.empty()) pj::fuzz::broken("a refusal without a reason");
    if (j.action == pj::sshagent::Action::forward && rest[4] == pj::sshagent::kSignRequest &&
        session.bound_session().empty())
      pj::fuzz::broken("a sign request forwarded on an unbound connection");
    rest.remove_prefix(4 + *len.body);
  }
  for (const auto& k : pj::sshagent::find_host_keys(in, "git.example", 22))
    if (k.blob.empty()) pj::fuzz::broken("a known_hosts key with no blob");
  auto parts = pj::fuzz::split(in, '\n', 3);
  if (parts.size() == 3) (void)pj::sshagent::verify_signature(parts[0], parts[1], parts[2]);
  return 0;
}
