// The OAuth token exchange as the network filter sees it
// (TokenExchange): Pi inside the jail refreshes its tokens
// itself, sending the placeholder of its refresh token; the filter asks
// this class for the request body with the real one, and for the response
// body with every new real token swapped for a new placeholder. When the
// exchange is the provider's own renewal (TokenEndpoint::renewal, carrying
// the current placeholder of a credential the host had), the new real
// tokens go to the host's auth.json at once (under Pi's lock), so a run
// killed after a refresh leaves the host with tokens that work. Any other
// exchange (a login inside the jail) is used for the rest of the run, and
// its tokens are held (HeldLogins) until the user consents at the end.
//
// The body transforms are pure (decode, rewrite_token_response,
// apply_tokens); OAuthExchange adds the table and the host file.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "credentials/credentials.h"
#include "credentials/bindings.h"
#include "pi/agent_state.h"
#include "util/result.h"

namespace pj::credentials {

// Pi's auth.json as data (lib/pi).
namespace agent = ::pj::pi::agent;

// The largest token response body, decoded.
inline constexpr size_t kMaxTokenBody = size_t{1} << 20;

// `body` decoded from `content_encoding` ("", "identity", "gzip",
// "x-gzip", "deflate" (zlib or raw), "zstd"); at most kMaxTokenBody bytes
// out. "br" and anything else is an error: the filter then answers 502.
util::Result<std::string> decode_body(std::string_view content_encoding, std::string_view body);

// The provider whose token endpoint host+path is (a query string ignored),
// or nullptr.
const Provider* token_endpoint_provider(std::string_view host, std::string_view path);

// The tokens a response carried (real values), for the host's auth.json.
struct NewTokens {
  std::optional<std::string> access, refresh;
  std::optional<int64_t> expires_ms;  // epoch milliseconds, Pi's formula (5 minutes early)
  std::string account;                // what the response says of the account (an email), or empty
};

// The tokens of logins made inside the jail, one per provider entry (a
// later exchange's tokens over an earlier's, the earlier's kept where the
// later gave none: Copilot's and Meta's logins take two exchanges),
// until the run's end decides (consent.h). Thread-safe.
class HeldLogins {
public:
  struct Login {
    std::string id;  // the auth.json entry
    NewTokens tokens;
  };
  void hold(Login l);
  std::vector<Login> list() const;

private:
  mutable std::mutex mu_;
  std::vector<Login> logins_;
};

// Rewrite a token endpoint's decoded JSON response: the values of
// access_token, refresh_token, id_token, token (Copilot), key
// (OpenRouter) and api_key (Meta) become new placeholders (added to
// `table`, bound like the provider's: refresh tokens to its token
// endpoints, the rest to its hosts), and any other string equal to a
// real value in `table` becomes its placeholder. Fails on a body that is not a JSON object: never
// passed on unread.
// The new placeholders stand in the provider entry of endpoint `t`
// (Table::add_slot, in the fields Pi stores them in), their values from
// `origin`.
util::Result<std::string> rewrite_token_response(std::string_view body, const Provider& p, const TokenEndpoint& t,
                                                 Origin origin, const Settings& s, Table& table, NewTokens& tokens,
                                                 int64_t now_ms);

// The host's auth.json with provider `id`'s entry given the new tokens
// (other fields kept; a missing entry made {"type": "oauth", ...}), or
// nullopt when it cannot be read as Pi's file (left alone).
agent::NewContent apply_tokens(agent::Content host_now, std::string_view id, const NewTokens& tokens);

// What one token exchange did, when it ran in the network filter process:
// the filter holds a copy of the bound part of the table (no withheld
// secret, no host file), so the supervisor, which owns the table and
// writes auth.json, is told after each exchange (filterlink TokenUpdate)
// and takes it with OAuthExchange::accept().
struct ExchangeReport {
  ExchangeKind kind = ExchangeKind::login;
  std::string host, path;  // the token endpoint
  std::string entry;       // its auth.json key
  bool ok = false;         // a 2xx response
  NewTokens tokens;
  std::vector<Binding> bindings;                           // new placeholders, bound
  std::vector<std::pair<std::string, std::string>> slots;  // placeholder, field (of `entry`)
};

class OAuthExchange final : public TokenExchange {
public:
  // `agent_dir`: the host's Pi agent dir, whose auth.json is updated;
  // empty: none is (tests). `warn` reports a failed host update (the jail
  // still gets its placeholders; the write-back at the end tries again).
  // `held`: where a login's tokens wait for the end of the run (may be
  // null: they are dropped, the host never gets them).
  OAuthExchange(std::shared_ptr<Table> table, Settings settings, std::string agent_dir,
                std::function<void(const std::string&)> warn, std::shared_ptr<HeldLogins> held = nullptr);

  bool is_token_endpoint(std::string_view host, std::string_view path) const override;
  bool is_exact_token_endpoint(std::string_view host, std::string_view path) const override;
  util::Result<ExchangeRequest> request_body(std::string_view host, std::string_view path, std::string_view body,
                                             const std::vector<std::string>& header_placeholders,
                                             const std::vector<std::string>& authorization = {}) override;
  util::Result<std::string> response_body(std::string_view host, std::string_view path, int status,
                                          std::string_view content_encoding, std::string_view body,
                                          ExchangeKind kind) override;
  std::vector<Binding> take_new_bindings() override { return table_->take_added(); }

  // The filter process's side: each exchange is told to `report` (in
  // order, one at a time) instead of writing auth.json or holding a
  // login; when `report` fails (the supervisor could not be told), the
  // jail gets 502.
  void report_to(std::function<util::Status(const ExchangeReport&)> report) { report_ = std::move(report); }

  // The supervisor's side: what the filter process says an exchange did,
  // as untrusted input (a filter taken over holds the bound values, not
  // the rest). Each new binding must be named for the response's field,
  // have a placeholder of a placeholder's form that overlaps none of the
  // run's, a real value the run has nowhere else, and the endpoint's
  // provider's hosts for its kind (a refresh token: the token endpoints
  // only). A slot takes a new binding of its kind, or a placeholder
  // already in that very slot (an echo). Each token is the real value of
  // one of those slots. A renewal is believed only for an entry whose
  // current refresh token is the host's or a renewal of it, at most one a
  // minute; otherwise it is taken as a login, whose tokens wait for
  // consent. Then as response_body() would: the table updated, a
  // renewal's tokens written to auth.json, a login's held. An error:
  // nothing taken. What a run may add so is bounded.
  util::Status accept(const ExchangeReport& e);

  // What the filter process's copy of the exchange starts from: the slots
  // of the `bound` placeholders (a withheld one's never), and the
  // settings it needs (token endpoint stand-ins, the operator's hosts).
  struct Seed {
    struct SlotOf {
      std::string placeholder;
      Slot slot;
      Origin origin;
    };
    std::vector<SlotOf> slots;
    std::vector<TokenEndpoint> test_token_endpoints;
    std::vector<policy::Layer::CredentialHost> extra_hosts;
  };
  Seed seed(const std::vector<Binding>& bound) const;

private:
  // The endpoint host+path is (settings' test stand-ins first), or nullptr.
  const TokenEndpoint* endpoint(std::string_view host, std::string_view path) const;

  std::shared_ptr<Table> table_;
  Settings settings_;
  std::string agent_dir_;
  // Write a renewal's tokens to the host (waiting at most `lock_wait` for
  // Pi's lock), or hold a login's.
  void settle(const TokenEndpoint& t, ExchangeKind kind, const NewTokens& tokens, std::chrono::milliseconds lock_wait);
  util::Status check_report(const ExchangeReport& e, const TokenEndpoint& t) const;
  util::Status check_new_binding(const ExchangeReport& e, size_t i, const Provider& p,
                                 const std::vector<BoundHost>& api_hosts,
                                 const std::vector<BoundHost>& refresh_hosts) const;
  // The real values the report's slots put in refresh, and in the other fields.
  util::Result<std::pair<std::vector<std::string>, std::vector<std::string>>> check_slots(const ExchangeReport& e,
                                                                                          const TokenEndpoint& t) const;

  std::function<void(const std::string&)> warn_;
  std::shared_ptr<HeldLogins> held_;
  std::function<util::Status(const ExchangeReport&)> report_;
  std::mutex report_mu_;  // one reported exchange at a time: its messages stay together
  // What accept() took so far (its bounds), and each entry's last
  // believed renewal.
  size_t accepted_bytes_ = 0;
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> renewed_;
};

// Write held login tokens into the host's auth.json in `agent_dir`
// (under Pi's lock); what was written or not, as notes.
std::vector<std::string> apply_held(const std::string& agent_dir, const std::vector<HeldLogins::Login>& logins);

}  // namespace pj::credentials
