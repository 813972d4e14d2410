// Model credentials stay outside the jail (issue 17): the supervisor's
// half. For every credential a run would pass (the provider variables the
// policy passes, each secret in the host's auth.json) the jail gets a
// per-run placeholder with the provider's prefix; the real value stays in
// this process and goes only to the hosts the credential is bound to,
// put on the wire by the network filter (netproxy/intercept.h).
//
// Everything here is pure except make_placeholder (getrandom) and Table's
// lock; reading the host's files and writing auth.json back are done by
// the callers (linux_backend.cc, private_dirs.cc, token_exchange.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netproxy/intercept.h"
#include "policy/layer.h"
#include "util/result.h"

namespace pj::supervisor::credentials {

// A provider's OAuth token endpoint: the request whose body carries a
// refresh token, and whose response carries new tokens.
struct TokenEndpoint {
  std::string host;
  std::string path;
  std::string id;  // the auth.json key its tokens are stored under
  uint16_t port = 443;
};

// One row of the provider table: which variables hold its secrets, its
// auth.json key, where its secrets may go. Facts from Pi 1.4.0 and 1.6.0
// (@earendil-works/pi-ai dist/env-api-keys.js, dist/providers/*.models.js,
// dist/auth/oauth/*.js); the hosts match the pi profile's [network] allow.
struct Provider {
  std::vector<std::string> ids;    // auth.json keys (Pi's provider names); names for [credentials] bind
  std::vector<std::string> env;    // variable names; "XIAOMI_*": names with that prefix ending _KEY or _TOKEN
  std::vector<std::string> hosts;  // API hosts (443): API keys and OAuth access tokens go there
  std::vector<TokenEndpoint> token_endpoints;  // OAuth refresh tokens go there only
  // Path prefixes on `hosts` whose responses hand out new credentials
  // (Anthropic's create_api_key for an OAuth token): the filter refuses them.
  std::vector<std::string> minting = {};
};
const std::vector<Provider>& providers();

// The provider whose variable `name` is, or nullptr.
const Provider* provider_of_env(std::string_view name);
// The provider with auth.json key (Pi provider name) `id`, or nullptr.
const Provider* provider_by_id(std::string_view id);

// Credentials that are signed with (Bedrock SigV4) or mint tokens
// (Vertex service accounts): a placeholder cannot stand in for them. In
// this mode they are refused unless [credentials] pass_through names them.
inline constexpr std::string_view kSignedCredentials[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                         "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS"};

// The part of `real` a placeholder keeps: a known provider prefix
// ("sk-ant-api03-", "sk-ant-oat01-", "sk-", "gsk_", "xai-", ...), else a
// leading run of letters ending in '-' or '_' (at most 12 characters),
// else nothing. A JWT keeps its header and claims ("eyJ...eyJ...."): Pi
// reads claims (the Codex account id) from an access token.
std::string placeholder_prefix(std::string_view real);

// A new placeholder for `real`: its prefix, then random letters and digits
// (a JWT: a random signature in base64url), as long as `real` but with at
// least 32 random characters (190 bits); never equal to `real`.
std::string make_placeholder(std::string_view real);

// The run's bindings, shared by the supervisor and the network filter's
// token exchange (which adds new ones when tokens are refreshed). All
// members are thread-safe.
class Table {
public:
  void add(netproxy::Binding b);
  std::vector<netproxy::Binding> snapshot() const;
  // The binding whose placeholder is `placeholder` (exact), or nullopt.
  std::optional<netproxy::Binding> by_placeholder(std::string_view placeholder) const;
  // The placeholder standing for `real` (exact), or nullopt.
  std::optional<std::string> placeholder_of(std::string_view real) const;
  // The bindings added since the last call (the filter adds them).
  std::vector<netproxy::Binding> take_added();
  // A withheld secret (bound to no host): its placeholder is never
  // substituted, but write-back maps it back like the others.
  void add_withheld(std::string placeholder, std::string real);
  std::vector<std::pair<std::string, std::string>> withheld() const;
  size_t size() const;

private:
  mutable std::mutex mu_;
  std::vector<netproxy::Binding> bindings_;
  std::vector<std::pair<std::string, std::string>> withheld_;  // placeholder, real
  size_t taken_ = 0;
};

// What the operators said in [credentials] (policy.h), and the policy's
// [env] pass patterns (a credential is a candidate only when passed).
struct Settings {
  std::vector<policy::Layer::CredentialHost> extra_hosts;
  std::vector<policy::Entry> pass_through;
  std::vector<std::string> env_pass;  // names or NAME* prefixes
  // Test builds (--test-token-endpoint): loopback stand-ins for a
  // provider's token endpoint (`id`: the provider), beside the table's.
  std::vector<TokenEndpoint> test_token_endpoints;
};

// How one credential reaches the jail, for explain and the report.
struct Provenance {
  std::string name;         // "ANTHROPIC_API_KEY", "auth.json anthropic.refresh"
  std::string treatment;    // "placeholder", "pass-through", "withheld"
  std::string prefix;       // the placeholder's kept prefix (never the secret)
  std::vector<std::string> hosts;  // "api.anthropic.com:443"
  std::string why;          // "profile provider table", "policy.toml:3:1", ...
};

struct Plan {
  // Names and values replacing the caller's in the jail's environment
  // (placeholders, or nothing for a withheld one: `withheld` lists them).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> withheld;   // passed by the policy, but bound to no host: not passed
  std::vector<Provenance> provenance;
  std::vector<std::string> errors;     // the run must not start (125): each with its fix
};

// Decide for the caller's environment `host_env` ("NAME=value"): each
// passed provider variable gets a placeholder bound to its provider's
// hosts plus the operator's, registered in `table`; a signed credential
// is refused unless passed through; an operator's bind of a variable
// that is no provider's makes it a credential too.
Plan plan_env(const std::vector<std::string>& host_env, const Settings& s, Table& table);

// The jail's auth.json, synthesized from the host's: every secret (an
// api_key "key" literal, an oauth "access" and "refresh", a Copilot
// "token") replaced by a placeholder registered in `table` (access tokens
// and keys bound to the provider's hosts, refresh tokens to its token
// endpoints), every other field kept. A "!command" or "$VAR" key is kept
// as it is (Pi runs it inside the jail: no secret of the host's is in it).
// A provider that is in no table and not bound by the operator gets its
// secrets withheld (a placeholder no host receives), said in provenance.
// Fails on a host file that is not a JSON object of objects.
util::Result<std::string> synthesize_auth(std::string_view host_auth, const Settings& s, Table& table,
                                          std::vector<Provenance>& provenance);

// What the jail left in its auth.json, with every placeholder of `table`
// replaced by its real value, so that a write-back never puts a
// placeholder into the host's file. Unknown strings are left alone.
// Fails on text that is not JSON (the merge then refuses it).
util::Result<std::string> reveal_auth(std::string_view jail_auth, const Table& table);

// The hosts a binding of provider `p` (or of an operator-named variable)
// is sent to: its hosts, or its token endpoints' hosts for a refresh
// token, plus the operator's `extra_hosts` for one of `p->ids` or `name`.
std::vector<netproxy::BoundHost> bound_hosts(const Provider* p, std::string_view name, bool refresh,
                                             const Settings& s, std::vector<std::string>& why);

// One line per binding for explain: name, treatment, prefix, hosts, why.
std::vector<std::string> explain_lines(const std::vector<Provenance>& provenance);

}  // namespace pj::supervisor::credentials
