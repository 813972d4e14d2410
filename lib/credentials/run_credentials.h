// One run's credentials (credentials.h) put to work: the caller's
// provider variables replaced by placeholders in the request, Pi's
// auth.json given to the jail through placeholders (pi/private_dirs.h
// SecretFile), and what the network filter needs (Intercept).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "credentials/credentials.h"
#include "credentials/token_exchange.h"
#include "credentials/bindings.h"
#include "pi/login_consent.h"
#include "pi/private_dirs.h"
#include "policy/policy.h"
#include "runtime/request.h"
#include "util/json.h"
#include "util/result.h"

namespace pj::credentials {

class RunCredentials {
public:
  // From the resolved policy ([credentials], [env] pass) and the request:
  // rewrites r.host_env (placeholders in place of the real values, a
  // withheld variable removed, a variable an operator bound passed).
  // Fails, with the fix, on a signed credential that is passed but not
  // passed through.
  // `test_token_endpoints`: --test-token-endpoint values (test builds).
  static util::Result<RunCredentials> prepare(const policy::Policy* p, runtime::Request& r,
                                              const std::vector<std::string>& test_token_endpoints = {});

  // auth.json through placeholders (for PrivateCopies::stage).
  pi::SecretFile auth_file() const;
  // For explain, which stages nothing: the host's auth.json read and
  // judged as a run would, so that its bindings can be shown.
  void preview_auth();
  // The bindings so far and the token exchange, for the network filter.
  // When the program logs in (runtime::Request::logs_in), every
  // provider's token endpoint is intercepted too, bound or not: a /login
  // inside for a provider the run started without gets placeholders, and
  // its tokens wait for consent (see pi-jail.toml(5) [credentials]).
  Intercept intercept(std::function<void(const std::string&)> warn) const;
  // The token exchange intercept() made (null before): what the filter
  // process is sent, and what takes its reports.
  std::shared_ptr<OAuthExchange> exchange() const { return state_->exchange; }

  // Every API key and access token placeholder of the run (bound or
  // withheld), with the name [credentials] bind knows it by, for the
  // filter to look for on host loopback ports no binding covers.
  std::vector<netproxy::Watched> watched() const;

  // The logins the token exchange held back (pi/login_consent.h), and settling
  // them: written to the host's auth.json when `c` is Consent::given;
  // returns the notes ("applied:" / "refused:").
  std::vector<pi::HeldLogin> held_logins() const;
  std::vector<std::string> settle_logins(pi::Consent c) const;
  // [credentials] logins of the operators' policy.
  policy::LoginWriteBack logins_mode() const { return state_->logins; }

  const std::vector<Provenance>& provenance() const { return state_->provenance; }
  // "# credentials" lines for explain ("(none)" without a binding); never
  // a secret.
  std::vector<std::string> explain_lines() const;
  // Where a login inside is intercepted (host:port; the network filter
  // terminates TLS there): every provider's token endpoint when the
  // program logs in, else none.
  std::vector<std::string> login_endpoints() const;
  // The report's "credentials" object.
  void write_json(util::JsonWriter& j) const;

private:
  struct State {
    std::shared_ptr<Table> table = std::make_shared<Table>();
    Settings settings;
    std::vector<Provenance> provenance;
    std::string agent_dir;  // the private directory holding auth.json (Pi's agent dir), or empty
    std::shared_ptr<HeldLogins> held = std::make_shared<HeldLogins>();
    policy::LoginWriteBack logins = policy::LoginWriteBack::ask;
    bool logs_in = false;                     // runtime::Request::logs_in
    std::vector<MintingEndpoint> minting;     // refused by the filter
    std::shared_ptr<OAuthExchange> exchange;  // made by intercept()
  };
  RunCredentials() = default;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace pj::credentials
