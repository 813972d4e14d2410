// Model credentials stay outside the jail: the host's
// half. For every credential a run would pass (the provider variables the
// policy passes, each secret in the host's auth.json) the jail gets a
// per-run placeholder with the provider's prefix; the real value stays in
// this process and goes only to the hosts the credential is bound to,
// put on the wire by the credential filter (bindings.h, interceptor.h).
//
// Everything here is pure except make_placeholder (getrandom) and Table's
// lock; reading the host's files and writing auth.json back are done by
// the callers (linux_backend.cc, pi/private_dirs.cc, token_exchange.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "credentials/bindings.h"
#include "policy/layer.h"
#include "util/result.h"

namespace pj::credentials {

// What makes an exchange at a token endpoint the provider's own renewal
// of the credential the host already has, which may update the host's
// auth.json without asking. Any other exchange there is a login.
enum class Renewal {
  refresh_grant,  // a body with grant_type=refresh_token carrying the current refresh placeholder
  header_token,   // request headers carrying the current refresh placeholder (Copilot's token GET)
  none,           // logins only (a device or authorization-code exchange)
};

// A provider's OAuth token endpoint: the request whose body carries a
// refresh token, and whose response carries new tokens.
struct TokenEndpoint {
  std::string host;
  std::string path;
  std::string id;  // the auth.json key its tokens are stored under
  uint16_t port = 443;
  Renewal renewal = Renewal::refresh_grant;
  // The auth.json field Pi stores the response's access_token in: "refresh"
  // for Copilot's and Meta's device logins, whose access_token is the
  // token that later buys the access token (bound and slotted as a refresh
  // token).
  std::string_view access_token_field = "access";
  // Renewal::header_token: the request field carrying the refresh token
  // (the only one a refresh placeholder is substituted in, Carriage).
  std::string_view renewal_header = {};
  // How long the access token it hands out lives when the response does
  // not say (no expires_in, no expires_at): Pi's own constant, which it
  // stores as `expires` from now (Meta's minted key: 24 hours); 0: none.
  int64_t access_lifetime_ms = 0;
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
  // (Anthropic's create_api_key for an OAuth token, OpenAI's admin keys
  // and service accounts, ...): the filter refuses them unless an operator
  // allows one ([credentials] allow_minting). "*" is any one segment.
  std::vector<std::string> minting = {};
};
const std::vector<Provider>& providers();

// The minting endpoints (Provider::minting on each of its hosts) the
// filter refuses: all of the table's but those `allowed` names
// ([credentials] allow_minting, "HOST/PATH" as the table lists it). An
// entry naming no endpoint of the table is an error that lists them.
util::Result<std::vector<MintingEndpoint>> minting_refusals(const std::vector<policy::Entry>& allowed);

// A refresh token's binding: substituted only in a token exchange of its
// hosts, in the body or the field the provider's header renewal names.
void carry_as_refresh(Binding& b, const Provider* p);

// The provider whose variable `name` is, or nullptr.
const Provider* provider_of_env(std::string_view name);
// The provider with auth.json key (Pi provider name) `id`, or nullptr.
const Provider* provider_by_id(std::string_view id);

// A loopback stand-in for provider `id`'s token endpoint at `path` (test
// builds): it renews as the provider's endpoint of the same path does;
// nullopt when `id` is no provider.
std::optional<TokenEndpoint> stand_in_endpoint(std::string_view id, std::string host, uint16_t port, std::string path);

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

// Where a placeholder may be turned back into its real value on
// write-back: the auth.json entry (provider key, exactly) and field it was
// made for. A placeholder seen anywhere else is refused (reveal_auth).
struct Slot {
  std::string entry;  // "anthropic"
  std::string field;  // "access", "refresh", "key", "token"
  bool operator==(const Slot&) const = default;
};

// The run's bindings, shared by the supervisor and the network filter's
// token exchange (which adds new ones when tokens are refreshed). All
// members are thread-safe.
class Table {
public:
  void add(Binding b);
  std::vector<Binding> snapshot() const;
  // The binding whose placeholder is `placeholder` (exact), or nullopt.
  std::optional<Binding> by_placeholder(std::string_view placeholder) const;
  // The placeholder standing for `real` (exact), or nullopt.
  std::optional<std::string> placeholder_of(std::string_view real) const;
  // The bindings added since the last call (the filter adds them).
  std::vector<Binding> take_added();
  // A withheld secret (bound to no host): its placeholder is never
  // substituted, but write-back maps it back in its own slot.
  void add_withheld(std::string placeholder, std::string real, Slot slot);
  // Record that `placeholder` (bound or withheld) stands in `slot`, with
  // its real value from `origin`. A placeholder may have several slots
  // (one variable's value also in auth.json).
  void add_slot(std::string placeholder, Slot slot, Origin origin);

  // One placeholder in one slot, for write-back.
  struct Issued {
    std::string placeholder;
    std::string real;
    Slot slot;
    Origin origin;
  };
  std::vector<Issued> issued() const;
  // How far the table has grown, and what was added since (a token
  // exchange's new bindings and slots, sent to the supervisor when the
  // exchange runs in the filter process).
  struct Mark {
    size_t bindings = 0, slots = 0;
  };
  Mark mark() const;
  std::vector<Binding> bindings_since(const Mark& m) const;
  std::vector<std::pair<std::string, Slot>> slots_since(const Mark& m) const;
  // Whether `s` is any placeholder of this run (bound, withheld, slotted).
  bool is_placeholder(std::string_view s) const;
  // Whether `s` holds a placeholder of this run or is part of one.
  bool overlaps_placeholder(std::string_view s) const;
  // Whether `real` is the real value of a binding or a withheld secret.
  bool holds_real(std::string_view real) const;
  // Whether `placeholder` stands in `slot` already.
  bool has_slot(std::string_view placeholder, const Slot& slot) const;
  // The newest placeholder standing in `slot` and where its value came
  // from, or nullopt: the "current" refresh placeholder a provider's
  // renewal must carry.
  std::optional<std::pair<std::string, Origin>> current_in(const Slot& slot) const;
  size_t size() const;

private:
  // Whether `pred(placeholder, real)` holds for a binding or a withheld
  // secret (under mu_).
  template <typename Pred>
  bool any_secret(Pred pred) const {
    for (const auto& b : bindings_)
      if (pred(b.placeholder, b.real)) return true;
    for (const auto& [placeholder, real] : withheld_)
      if (pred(placeholder, real)) return true;
    return false;
  }

  mutable std::mutex mu_;
  std::vector<Binding> bindings_;
  std::vector<std::pair<std::string, std::string>> withheld_;           // placeholder, real
  std::vector<std::pair<std::string, std::pair<Slot, Origin>>> slots_;  // placeholder, where
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
  std::string name;                // "ANTHROPIC_API_KEY", "auth.json anthropic.refresh"
  std::string treatment;           // "placeholder", "pass-through", "withheld"
  std::string prefix;              // the placeholder's kept prefix (never the secret)
  std::vector<std::string> hosts;  // "api.anthropic.com:443"
  std::string why;                 // "profile provider table", "policy.toml:3:1", ...
};

struct Plan {
  // Names and values replacing the caller's in the jail's environment
  // (placeholders, or nothing for a withheld one: `withheld` lists them).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> withheld;  // passed by the policy, but bound to no host: not passed
  std::vector<Provenance> provenance;
  std::vector<std::string> errors;  // the run must not start (125): each with its fix
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

// A provider entry of the jail's auth.json that changes which credential
// the host's Pi uses, beyond the provider's own renewal: a new entry, a
// secret field holding a value the host never had (a literal the jail
// wrote, or a placeholder of a login made inside). Written back only with
// the user's consent (consent.h).
struct HeldEntry {
  std::string entry;    // the provider key, as the jail wrote it (escape before showing)
  std::string account;  // what the entry says of the account (email, accountId), or empty
};

// What the jail left in its auth.json, with every placeholder of `table`
// turned back into its real value.
struct RevealedAuth {
  std::string text;
  std::vector<HeldEntry> held;
};

// What the jail left in its auth.json (`jail_auth`; `given_jail`: the
// copy it was given), with every placeholder of `table` replaced by its
// real value where it stands in its own slot (Table::add_slot), so that a
// write-back never puts a placeholder into the host's file. A placeholder
// anywhere else (another provider's entry, another field, a new entry,
// nested deeper) fails the whole file, naming the entry, never the value:
// the jail must not move a secret under a name whose hosts the next run
// would bind it to. Unknown strings are left alone. Fails on text that
// is not JSON (the merge then refuses it).
util::Result<RevealedAuth> reveal_auth(std::string_view jail_auth, std::string_view given_jail, const Table& table);

// The hosts a binding of provider `p` (or of an operator-named variable)
// is sent to: its hosts, or its token endpoints' hosts for a refresh
// token, plus the operator's `extra_hosts` for one of `p->ids` or `name`.
std::vector<BoundHost> bound_hosts(const Provider* p, std::string_view name, bool refresh, const Settings& s,
                                   std::vector<std::string>& why);

// What a login inside the jail reaches, for a run whose program logs in
// to providers (runtime::Request::logs_in): `endpoints`, every provider's
// token endpoints (and the settings' stand-ins), which the filter then
// intercepts with no credential bound, so that a first login's tokens
// become placeholders as a renewal's do; `bound_later`, the hosts such a
// login's new tokens are bound to (the providers' API hosts and the
// operator's for them), for which the run's CA must vouch from the start.
struct LoginHosts {
  std::vector<BoundHost> endpoints;
  std::vector<BoundHost> bound_later;
};
LoginHosts login_hosts(const Settings& s);

// One line per binding for explain: name, treatment, prefix, hosts, why.
std::vector<std::string> explain_lines(const std::vector<Provenance>& provenance);

}  // namespace pj::credentials
