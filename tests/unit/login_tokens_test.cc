// Pi's logins inside the jail as the credential side sees them
// (token_exchange.h, credentials.h), provider by provider: the host's
// auth.json has an earlier login of the provider, so its token endpoint
// passes through the token exchange; the exchange of a new login gives
// the jail placeholders; Pi stores them where its OAuth module does
// (pi-ai dist/auth/oauth/*.js, Pi 1.4.0 and 1.6.0); the write-back
// reveals them in that entry and holds it for consent; with consent the
// host's file gets the real tokens in that entry. The e2e tests with the
// real Pi: tests/e2e/login_flows_e2e_test.cc.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "credentials/credentials.h"
#include "credentials/token_exchange.h"
#include "temp_dir.h"
#include "util/json_value.h"

using namespace pj::credentials;
namespace json = pj::util::json;

namespace {

// One exchange of a login: the endpoint, what it answers, and which of
// the answer's fields Pi stores as "access" and "refresh" ("" for a
// field Pi stores as an empty string: OpenRouter's refresh).
struct Exchange {
  std::string host, path;
  std::string response;
  std::string access_from, refresh_from;
  std::vector<std::string> header_placeholders = {};
};

// The run: the host's auth.json holds `entry` with old tokens (its
// refresh token `old_refresh`).
struct LoginRig {
  pj::test::TempDir tmp;
  std::shared_ptr<Table> table = std::make_shared<Table>();
  std::shared_ptr<HeldLogins> held = std::make_shared<HeldLogins>();
  std::string entry, host_before, jail;
  Settings settings;
  std::unique_ptr<OAuthExchange> ex;
  std::string stored_access, stored_refresh;  // what Pi stores, placeholders

  explicit LoginRig(std::string e, const std::string& old_refresh = "OLDrefresh0123456789abcdefghijklmnopqrstuvwxyz")
      : entry(std::move(e)) {
    host_before = R"({")" + entry +
                  R"(":{"type":"oauth","access":"OLDaccess0123456789abcdefghijklmnopqrstuvwxyz",)"
                  R"("refresh":")" +
                  old_refresh + R"(","expires":4102444800000}})";
    std::ofstream(tmp.path + "/auth.json") << host_before;
    std::vector<Provenance> prov;
    auto j = synthesize_auth(host_before, settings, *table, prov);
    REQUIRE(j);
    jail = *j;
    ex = std::make_unique<OAuthExchange>(table, settings, tmp.path, nullptr, held);
  }
  // The exchange as the filter makes it; Pi takes the fields it stores.
  void exchange(const Exchange& e) {
    CAPTURE(e.host + e.path);
    REQUIRE(ex->is_token_endpoint(e.host, e.path));
    auto req = ex->request_body(e.host, e.path, "grant_type=authorization_code&code=c", e.header_placeholders);
    REQUIRE(req);
    CHECK(req->kind == ExchangeKind::login);
    auto out = ex->response_body(e.host, e.path, 200, "", e.response, req->kind);
    REQUIRE(out);
    auto doc = json::parse(*out);
    REQUIRE(doc);
    CHECK(out->find("REAL") == std::string::npos);  // the jail gets placeholders
    if (!e.access_from.empty()) stored_access = *doc->find(e.access_from)->as_string();
    if (!e.refresh_from.empty()) stored_refresh = *doc->find(e.refresh_from)->as_string();
  }
  // The jail's auth.json as Pi leaves it: the entry holds the login.
  std::string left(const std::string& more = "") const {
    return R"({")" + entry + R"(":{"type":"oauth","access":")" + stored_access + R"(","refresh":")" + stored_refresh +
           R"(","expires":4102444899000)" + more + "}}";
  }
  std::string host_now() const {
    std::stringstream s;
    s << std::ifstream(tmp.path + "/auth.json").rdbuf();
    return s.str();
  }
  // The write-back reveals the login in its entry and holds it; with
  // consent the host's entry has `access` and `refresh` (real).
  // A device login of two exchanges (Copilot's, Meta's): the device
  // token, which Pi keeps as "refresh", then the token it buys, sent with
  // that one's placeholder in a header.
  void device_login(const Exchange& device, Exchange bought) {
    exchange(device);
    bought.header_placeholders = {stored_refresh};
    exchange(bought);
  }

  void check_consent(const std::string& access, const std::string& refresh, const std::string& more = "") {
    auto r = reveal_auth(left(more), jail, *table);
    REQUIRE_MESSAGE(r, r.error().message());
    REQUIRE(r->held.size() == 1);
    CHECK(r->held[0].entry == entry);
    CHECK(r->text.find(access) != std::string::npos);
    CHECK(r->text.find(refresh) != std::string::npos);
    CHECK(host_now() == host_before);  // nothing before consent
    REQUIRE(held->list().size() >= 1);
    for (const auto& l : held->list()) CHECK(l.id == entry);
    auto notes = apply_held(tmp.path, held->list());
    for (const auto& n : notes) CHECK(n.starts_with("applied:"));
    auto host = json::parse(host_now());
    REQUIRE(host);
    const json::Value* got = host->find(entry);
    REQUIRE(got);
    CHECK(*got->find("access")->as_string() == access);
    CHECK(*got->find("refresh")->as_string() == refresh);
    CHECK(*got->find("type")->as_string() == "oauth");
  }
};

// The host's auth.json `entry` expires a day from now (give or take a
// minute), as Pi stores a minted Meta key.
void check_expires_in_a_day(const std::string& host_auth, const std::string& entry) {
  auto host = json::parse(host_auth);
  REQUIRE(host);
  const json::Value* e = host->find(entry);
  REQUIRE(e);
  const json::Value* expires = e->find("expires");
  REQUIRE(expires);
  REQUIRE(expires->as_number());
  const double got = std::stod(expires->as_number()->text());
  const double now = static_cast<double>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  CHECK(got > now + 24 * 3600e3 - 60e3);
  CHECK(got < now + 24 * 3600e3 + 60e3);
}

constexpr const char* kPair = R"({"access_token":"REALaccess0123456789abcdefghijklmnopqrstuvwxyz",)"
                              R"("refresh_token":"REALrefresh0123456789abcdefghijklmnopqrstuvwxyz","expires_in":3600)";
const std::string kAccess = "REALaccess0123456789abcdefghijklmnopqrstuvwxyz";
const std::string kRefresh = "REALrefresh0123456789abcdefghijklmnopqrstuvwxyz";

}  // namespace

TEST_CASE("login in the jail: Sign in with ChatGPT's tokens are Pi's \"openai\" entry, held for consent there") {
  // pi-ai providers/openai.js (id "openai") logs in with
  // auth/oauth/openai-chatgpt.js.
  LoginRig rig("openai");
  rig.exchange({"auth.openai.com", "/api/accounts/oauth/token",
                std::string(kPair) + R"(,"id_token":"REALid0123456789","scope":"chatgpt.tokens.use.direct"})",
                "access_token", "refresh_token"});
  rig.check_consent(kAccess, kRefresh, R"(,"clientId":"issued","scopes":["chatgpt.tokens.use.direct"])");
  CHECK(provider_by_id("openai-chatgpt") == nullptr);  // no provider of Pi's is called so
}

TEST_CASE("the host's Sign in with ChatGPT login renews in the jail as the provider's own renewal") {
  // A refresh_token grant at its own token endpoint, carrying the "openai"
  // entry's refresh placeholder, gets the real token.
  LoginRig rig("openai");
  auto ph = rig.table->current_in(Slot{"openai", "refresh"});
  REQUIRE(ph);
  auto renew = rig.ex->request_body("auth.openai.com", "/api/accounts/oauth/token",
                                    "grant_type=refresh_token&client_id=c&refresh_token=" + ph->first, {});
  REQUIRE(renew);
  CHECK(renew->kind == ExchangeKind::renewal);
  CHECK(renew->body.find("OLDrefresh0123456789") != std::string::npos);
}

TEST_CASE("login in the jail: OpenAI Codex's tokens are Pi's \"openai-codex\" entry, held for consent there") {
  LoginRig rig("openai-codex");
  rig.exchange({"auth.openai.com", "/oauth/token", std::string(kPair) + "}", "access_token", "refresh_token"});
  rig.check_consent(kAccess, kRefresh, R"(,"accountId":"acct")");
}

TEST_CASE("login in the jail: Radius, xAI and Kimi Code device or browser logins are held in their own entries") {
  for (const auto& login : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"radius", "radius.pi.dev", "/v1/oauth/token"},
           {"xai", "auth.x.ai", "/oauth2/token"},
           {"kimi-coding", "auth.kimi.com", "/api/oauth/token"}}) {
    // Not a structured binding: clang 14 cannot capture one (CAPTURE).
    const auto& [entry, host, path] = login;
    CAPTURE(std::get<0>(login));
    LoginRig rig(entry);
    rig.exchange({host, path, std::string(kPair) + "}", "access_token", "refresh_token"});
    rig.check_consent(kAccess, kRefresh);
  }
}

TEST_CASE("login in the jail: OpenRouter's key is stored by Pi as the \"access\" of its \"openrouter\" entry") {
  // openrouter.js: {type: "oauth", access: body.key, refresh: "", expires:
  // MAX_SAFE_INTEGER}.
  LoginRig rig("openrouter", "");
  rig.exchange({"openrouter.ai", "/api/v1/auth/keys", R"({"key":"sk-or-v1-REALkey0123456789abcdefghijklmnopqrstuv"})",
                "key", ""});
  rig.check_consent("sk-or-v1-REALkey0123456789abcdefghijklmnopqrstuv", "");
}

TEST_CASE("login in the jail: GitHub Copilot's device login keeps the GitHub token and the Copilot token") {
  LoginRig rig("github-copilot");
  rig.device_login({"github.com", "/login/oauth/access_token",
                    R"({"access_token":"ghu_REALgithub0123456789abcdefghijkl"})", "", "access_token"},
                   {"api.github.com", "/copilot_internal/v2/token",
                    R"({"token":"REALcopilot0123456789abcdefghijklmn","expires_at":4102444800})", "token", ""});
  rig.check_consent("REALcopilot0123456789abcdefghijklmn", "ghu_REALgithub0123456789abcdefghijkl");
}

TEST_CASE("login in the jail: Meta's device login keeps the identity token and the minted API key") {
  // meta.js: the device login's access_token is the identity token, stored
  // as "refresh"; it mints the API key ("api_key"), stored as "access".
  LoginRig rig("meta");
  rig.device_login(
      {"auth.meta.com", "/oidc/device/token/",
       R"({"access_token":"REALidentity0123456789abcdefghijklm","expires_in":600})", "", "access_token"},
      {"api.meta.ai", "/muse-code/key", R"({"api_key":"REALmetakey0123456789abcdefghijklmno"})", "api_key", ""});
  rig.check_consent("REALmetakey0123456789abcdefghijklmno", "REALidentity0123456789abcdefghijklm");
  // The key's expiry is Pi's (now + 24 hours: the mint response says
  // none), not the identity token's 10 minutes: the host's Pi re-mints it
  // when Pi would.
  check_expires_in_a_day(rig.host_now(), "meta");
}

TEST_CASE("the host's Meta login re-mints its API key in the jail as the provider's own renewal") {
  // The identity token (Pi's "refresh") goes in the Authorization field
  // of the mint request, and only there.
  LoginRig rig("meta");
  auto identity = rig.table->current_in(Slot{"meta", "refresh"});
  REQUIRE(identity);
  auto b = rig.table->by_placeholder(identity->first);
  REQUIRE(b);
  CHECK(b->hosts == std::vector<BoundHost>{{"api.meta.ai", 443}, {"auth.meta.com", 443}});
  CHECK(b->carriage == Carriage::token_exchange);
  CHECK(b->header == "Authorization");
  auto mint = rig.ex->request_body("api.meta.ai", "/muse-code/key", "{}", {identity->first}, {"Bearer " + b->real});
  REQUIRE(mint);
  CHECK(mint->kind == ExchangeKind::renewal);
  auto out = rig.ex->response_body("api.meta.ai", "/muse-code/key", 200, "",
                                   R"({"api_key":"REALmetakey0123456789abcdefghijklmno"})", mint->kind);
  REQUIRE(out);
  CHECK(out->find("REALmetakey") == std::string::npos);
  CHECK(rig.host_now().find("REALmetakey0123456789abcdefghijklmno") != std::string::npos);  // written at once
  check_expires_in_a_day(rig.host_now(), "meta");
}
