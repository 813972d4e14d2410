// The plain types the network filter's loop shares with the credential
// broker (lib/credentials, whose bindings.h says which host gets which
// secret): how a connection to a bound host is spoken, and the run's
// placeholders the loop looks for where no binding applies. Nothing here
// holds a real value.
#pragma once

#include <string>

namespace pj::netproxy {

// How a bound host is spoken to. Plain HTTP puts the real value on the
// wire in clear, so it is only ever allowed for a host loopback port (a
// local model server: the bytes never leave the machine); the filter
// refuses a plain binding to any other host (credentials::Interceptor).
enum class Wire {
  tls,         // the jail's TLS terminated with the run's CA, the server's verified
  plain_http,  // no TLS either side: `http://127.0.0.1:PORT`, `[::1]`, `localhost`
};

// A placeholder of the run (bound or withheld) as the filter looks for
// it in the first bytes the jail sends to a host loopback port that no
// binding covers: found there, it went to a local server unsubstituted,
// and the end of the run says which [credentials] bind line would have
// sent the real value (Decision::unbound_credential).
struct Watched {
  std::string placeholder;
  std::string name;        // "auth.json ollama.key", "OLLAMA_API_KEY": for the report
  std::string credential;  // what [credentials] bind names: "ollama", "OLLAMA_API_KEY"
};

}  // namespace pj::netproxy
