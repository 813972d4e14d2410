// Credentials outside the jail: which real secret may go to which host,
// and in place of which placeholder (the broker's plain types, with no
// code behind them: lib/filterlink carries them to the filter process).
//
// The supervisor builds an Intercept (credentials.h, run_credentials.h)
// from the profile's provider table, the operator's [credentials] and the
// host's auth.json; the credential filter (interceptor.h), which the
// network filter's loop hands a connection whose checked target is a
// bound host (netproxy/credential_filter.h), terminates TLS only for it,
// substitutes placeholders in request header values (substitution.h),
// masks real values echoed back, and hands a provider's token-refresh
// exchange to the TokenExchange. Every other host stays an end-to-end
// tunnel.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netproxy/credential_types.h"
#include "util/result.h"

namespace pj::credentials {

// How a bound host is spoken to is the loop's own type: it serves the
// connection (netproxy/credential_types.h).
using netproxy::Wire;

// A host a credential may be sent to: a normalised name (no wildcard)
// and a port (443 unless the binding says otherwise).
struct BoundHost {
  std::string name;
  uint16_t port = 443;
  Wire wire = Wire::tls;
  bool operator==(const BoundHost&) const = default;
};

// One secret. `real` never leaves the supervisor except towards `hosts`
// and never appears in a log, report or error message; the jail sees
// only `placeholder` (the real value's provider prefix, then per-run
// randomness).
// Where in a request to its hosts a binding's placeholder is replaced.
enum class Carriage {
  any_header,      // API keys and access tokens: any request header
  token_exchange,  // refresh tokens: only in a token exchange, in its body
                   // (TokenExchange) or in Binding::header; anywhere else refused
};

struct Binding {
  std::string name;  // where it came from, for reports: "ANTHROPIC_API_KEY", "auth.json anthropic.refresh"
  std::string placeholder;
  std::string real;
  std::vector<BoundHost> hosts;
  Carriage carriage = Carriage::any_header;
  // Carriage::token_exchange: the one request header the provider's
  // renewal carries it in ("Authorization" for Copilot's token GET), or
  // empty: the body only.
  std::string header = {};
};

// The secret fields of Pi's credential types in auth.json ("key",
// "access", "refresh", and Copilot's "token"): where a placeholder may
// stand (credentials.h), and what the filter may say it put one in.
inline bool is_secret_field(std::string_view field) {
  return field == "key" || field == "access" || field == "refresh" || field == "token";
}

// Where a placeholder's real value came from, which decides whether the
// host's auth.json may take it without asking (consent.h).
enum class Origin : std::uint8_t {
  host,     // the host's own auth.json or environment at the start
  renewal,  // the provider's own renewal of a host credential
  login,    // any other token exchange: a login made inside the jail
};

// What one exchange at a token endpoint is: the provider's own renewal of
// the credential the host already has, or anything else (a login made
// inside the jail), whose tokens reach the host only with consent.
enum class ExchangeKind { renewal, login };

// A token request as it goes upstream.
struct ExchangeRequest {
  std::string body;  // placeholders of refresh tokens replaced by the real ones
  ExchangeKind kind = ExchangeKind::login;
  // A renewal's body is the filter's own, and so is its type: the request
  // goes with this Content-Type ("": the jail's, a login).
  std::string content_type;
};

// A provider's OAuth token endpoint: the only request whose body is
// rewritten, and whose response is rewritten before the jail sees it.
// Implemented by token_exchange.h (new placeholders; the host's auth.json
// written by the supervisor, from a report when the filter runs apart).
class TokenExchange {
public:
  virtual ~TokenExchange() = default;
  // Whether `host` (bound, normalised) and the request's path are a token
  // endpoint.
  virtual bool is_token_endpoint(std::string_view host, std::string_view path) const = 0;
  // Whether the path is the endpoint's own, byte for byte: the only
  // request a refresh token is carried in (another spelling may reach
  // another resource; its response is rewritten all the same).
  virtual bool is_exact_token_endpoint(std::string_view host, std::string_view path) const = 0;
  // The request body with the jail's placeholders for refresh tokens
  // replaced by the real ones, and what the exchange is (`header_placeholders`:
  // the placeholders substituted in the request's headers;
  // `authorization`: every value of its Authorization fields, as
  // substituted). A renewal's body is rebuilt from what it plainly says.
  // An error refuses the request (the filter answers 403 and records the
  // message, which never holds a secret).
  virtual util::Result<ExchangeRequest> request_body(std::string_view host, std::string_view path,
                                                     std::string_view body,
                                                     const std::vector<std::string>& header_placeholders,
                                                     const std::vector<std::string>& authorization = {}) = 0;
  // The upstream response body (`content_encoding` as sent: "", "gzip",
  // "deflate", "br", "zstd"), decoded, with every real token replaced by a
  // new placeholder (and, for a renewal, the host's auth.json updated; a
  // login's tokens are held for the user's consent); returned
  // identity-encoded. `kind`: what request_body() said of the request.
  // An error means the jail gets 502 and never the upstream body: fail
  // closed.
  virtual util::Result<std::string> response_body(std::string_view host, std::string_view path, int status,
                                                  std::string_view content_encoding, std::string_view body,
                                                  ExchangeKind kind) = 0;
  // The bindings response_body() made since the last call (new
  // placeholders for refreshed tokens, bound like the old ones): the
  // filter adds them to its own before it relays the response, so the
  // jail's next request with them is substituted. Thread-safe.
  virtual std::vector<Binding> take_new_bindings() { return {}; }
};

// An endpoint on a bound host that hands out NEW credentials in its
// response, e.g. Anthropic's /api/oauth/claude_cli/create_api_key, which
// Pi's OAuth token (scope org:create_api_key) may call: the filter cannot
// mask a secret it has never seen, so such a request is refused (403),
// whatever its spelling (path_under, substitution.h, normalises it).
struct MintingEndpoint {
  std::string host;         // normalised, like BoundHost::name (any port)
  std::string path_prefix;  // "/api/oauth/"
};

// What the credential filter trusts for upstream servers: operator and
// test settings, or the system's anchors as the supervisor read them;
// never anything the jail wrote.
struct UpstreamTrust {
  // The system's anchors: OpenSSL's default paths when nullopt, else
  // these certificates (PEM) in their place (a filter process that may
  // open no file is sent them).
  std::optional<std::string> roots_pem;
  // Extra anchors beside them, PEM: a file, or its content.
  std::string extra_ca_file;
  std::string extra_ca_pem;
};

// Everything the filter needs to substitute credentials for one run.
struct Intercept {
  std::vector<Binding> bindings;
  std::vector<MintingEndpoint> refused;
  std::shared_ptr<TokenExchange> exchange;  // may be null: no OAuth
  UpstreamTrust upstream;
  // Hosts served though no credential is bound to them (yet): the token
  // endpoints a login inside reaches, whose tokens the exchange turns into
  // placeholders (credentials.h LoginHosts); TLS only.
  std::vector<BoundHost> login_endpoints;
  // Hosts the run's CA must vouch for beside the bound ones: those a
  // login's new tokens are bound to later (for the CA that is made here).
  std::vector<BoundHost> bound_later;
  bool empty() const { return bindings.empty() && login_endpoints.empty(); }
};

}  // namespace pj::credentials
