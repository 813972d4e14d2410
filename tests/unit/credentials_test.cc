// Credentials outside the jail, the supervisor's half (credentials.h,
// token_exchange.h): placeholders, bindings, the jail's auth.json, the
// token exchange's body rewriting, and who may bind what.
#include <doctest/doctest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "credentials/credentials.h"
#include "credentials/token_exchange.h"
#include "pi/agent_state.h"
#include "credentials/consent.h"
#include "policy/layer.h"
#include "policy/policy.h"
#include "util/json_value.h"
#include "temp_dir.h"

using namespace pj::credentials;
namespace json = pj::util::json;
using pj::credentials::Binding;
using pj::credentials::BoundHost;

namespace {

// A resolve context for workspace /w and home /home/u whose paths resolve to
// themselves: the credential rules read no file.
pj::policy::Context paths_as_written() {
  return {"/w", "/home/u", "/w", {}, [](const std::string& p) { return std::optional<std::string>(p); }, std::nullopt};
}

constexpr auto kRenewal = pj::credentials::ExchangeKind::renewal;
const std::string kApiKey = "sk-ant-api03-" + std::string(95, 'R') + "AA";  // the real shape: 108 characters
const std::string kAccess = "sk-ant-oat01-REALACCESSrealaccessREALACCESSrealaccess0123456789abcdef";
const std::string kRefresh = "sk-ant-ort01-REALREFRESHrealrefreshREALREFRESHrealrefresh0123456789ab";

bool only_from(std::string_view s, std::string_view alphabet) {
  return s.find_first_not_of(alphabet) == std::string_view::npos;
}
constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

Settings pi_settings() {
  Settings s;
  s.env_pass = {"PATH",           "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                "AZURE_OPENAI_*", "GROQ_API_KEY",      "AWS_ACCESS_KEY_ID"};
  return s;
}

pj::policy::Layer::CredentialHost extra(std::string cred, std::string host) {
  return {std::move(cred), pj::policy::Entry{std::move(host), {"user.toml", 3, 1}}};
}

std::string gzip(std::string_view s) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, s.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zstd(std::string_view s) {
  std::string out(ZSTD_compressBound(s.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), s.data(), s.size(), 3);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE(
    "a login's hosts: every provider's token endpoints and a stand-in's, and the hosts a login's tokens are "
    "bound to (the operator's for that provider too); none of a provider without an OAuth login") {
  Settings s;
  s.test_token_endpoints.push_back(*stand_in_endpoint("anthropic", "127.0.0.1", 8443, "/v1/oauth/token"));
  s.extra_hosts.push_back({"anthropic", pj::policy::Entry{"gateway.example:8443", {}}});
  s.extra_hosts.push_back({"groq", pj::policy::Entry{"groq-gateway.example", {}}});
  s.extra_hosts.push_back({"anthropic", pj::policy::Entry{"http://127.0.0.1:4000", {}}});  // a local proxy
  const LoginHosts l = login_hosts(s);
  auto has = [](const std::vector<BoundHost>& v, const std::string& name, uint16_t port = 443) {
    return std::find(v.begin(), v.end(), BoundHost{name, port}) != v.end();
  };
  for (const auto& p : providers())
    for (const auto& t : p.token_endpoints) {
      CAPTURE(t.host);
      CHECK(has(l.endpoints, t.host, t.port));
      for (const auto& h : p.hosts) CHECK(has(l.bound_later, h));
    }
  for (const char* h : {"platform.claude.com", "auth.openai.com", "github.com", "api.github.com", "auth.x.ai"})
    CHECK_MESSAGE(has(l.endpoints, h), h);
  CHECK(has(l.endpoints, "127.0.0.1", 8443));
  CHECK(has(l.bound_later, "api.anthropic.com"));
  CHECK(has(l.bound_later, "gateway.example", 8443));
  CHECK_FALSE(has(l.bound_later, "api.groq.com"));
  CHECK_FALSE(has(l.bound_later, "groq-gateway.example"));
  CHECK_FALSE(has(l.endpoints, "api.anthropic.com"));
  // A plain-HTTP bind needs no certificate (and the CA takes TLS hosts only).
  for (const auto& h : l.bound_later) CHECK(h.wire == pj::netproxy::Wire::tls);
  // Each once.
  for (const auto* v : {&l.endpoints, &l.bound_later})
    for (size_t i = 0; i < v->size(); ++i) CHECK(std::count(v->begin(), v->end(), (*v)[i]) == 1);
}

TEST_CASE("placeholders keep the provider's prefix and length, are random, and never the real value") {
  struct Case {
    std::string real, prefix;
  } cases[] = {
      {kApiKey, "sk-ant-api03-"},
      {kAccess, "sk-ant-oat01-"},
      {kRefresh, "sk-ant-ort01-"},
      {"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", "sk-proj-"},
      {"sk-abcdefghijklmnopqrstuvwxyz0123456789", "sk-"},
      {"gsk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF", "gsk_"},
      {"xai-abcdefghijklmnopqrstuvwxyz0123456789ABCDEF", "xai-"},
      {"AIzaSyAbcdefghijklmnopqrstuvwxyz012345", "AIza"},
      {"0123456789abcdef0123456789abcdef", ""},  // no marker: nothing of it kept
      {"short", ""},
      {"unused-", "unused-"},  // nothing after the marker (was an endless loop)
      {"", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.real);
    CHECK(placeholder_prefix(c.real) == c.prefix);
    std::set<std::string> seen;
    for (int i = 0; i < 50; ++i) {
      std::string p = make_placeholder(c.real);
      REQUIRE(p.starts_with(c.prefix));
      const std::string_view body = std::string_view(p).substr(c.prefix.size());
      CHECK(body.size() >= 32);                                          // >= 190 bits
      CHECK(p.size() == std::max(c.real.size(), c.prefix.size() + 32));  // the SDKs' length class
      CHECK(only_from(body, kAlnum));
      CHECK(p != c.real);
      if (c.real.size() > c.prefix.size()) CHECK(p.find(c.real.substr(c.prefix.size())) == std::string::npos);
      seen.insert(p);
    }
    CHECK(seen.size() == 50);
  }
  // The characters are spread over the whole alphabet (not a fixed pattern).
  std::set<char> chars;
  for (int i = 0; i < 20; ++i)
    for (char ch : make_placeholder(kApiKey).substr(13)) chars.insert(ch);
  CHECK(chars.size() > 55);
}

TEST_CASE("a placeholder is made for a value whose secret part is spelled inside its kept prefix") {
  // A token response may carry any string: "at--" keeps "at-", and its
  // secret part "-" is in that prefix, which no random draw can avoid.
  for (std::string real : {"at--", "ab-b-", "tok_k_"}) {
    CAPTURE(real);
    const std::string prefix = placeholder_prefix(real);
    std::string p = make_placeholder(real);
    REQUIRE(p.starts_with(prefix));
    CHECK(p.substr(prefix.size()).find(real.substr(prefix.size())) == std::string::npos);
    CHECK(p != real);
  }
}

TEST_CASE("a JWT placeholder keeps header and claims (Pi reads the Codex account id) and replaces the signature") {
  const std::string jwt =
      "eyJhbGciOiJSUzI1NiJ9.eyJhY2NvdW50IjoiYWNjIn0.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl";
  std::string p = make_placeholder(jwt);
  CHECK(p.starts_with("eyJhbGciOiJSUzI1NiJ9.eyJhY2NvdW50IjoiYWNjIn0."));
  CHECK(p.size() == jwt.size());
  CHECK(p.find("c2lnbmF0dXJl") == std::string::npos);
}

TEST_CASE("environment: provider keys become placeholders bound to the provider's hosts; the rest as decided") {
  Table table;
  Settings s = pi_settings();
  s.extra_hosts = {extra("anthropic", "llm.corp.example:8443")};
  const std::vector<std::string> env = {"PATH=/usr/bin",
                                        "ANTHROPIC_API_KEY=" + kApiKey,
                                        "ANTHROPIC_BASE_URL=https://llm.corp.example:8443",
                                        "AZURE_OPENAI_API_KEY=azure-secret-value-0123456789",
                                        "AZURE_OPENAI_BASE_URL=https://x.openai.azure.com",
                                        "MISTRAL_API_KEY=not-passed-by-the-policy",
                                        "GROQ_API_KEY="};
  Plan plan = plan_env(env, s, table);
  CHECK(plan.errors.empty());
  REQUIRE(plan.env.size() == 1);
  CHECK(plan.env[0].first == "ANTHROPIC_API_KEY");
  CHECK(plan.env[0].second.starts_with("sk-ant-api03-"));
  CHECK(plan.env[0].second != kApiKey);
  // Azure has no fixed host: not passed at all until an operator binds it.
  CHECK(plan.withheld == std::vector<std::string>{"AZURE_OPENAI_API_KEY"});
  auto b = table.by_placeholder(plan.env[0].second);
  REQUIRE(b);
  CHECK(b->real == kApiKey);
  CHECK(b->hosts == std::vector<BoundHost>{{"api.anthropic.com", 443}, {"llm.corp.example", 8443}});
  CHECK(table.size() == 1);
  // explain: provenance, never the secret.
  auto lines = explain_lines(plan.provenance);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  CHECK(all.find("ANTHROPIC_API_KEY: placeholder sk-ant-api03-<random> -> api.anthropic.com:443, llm.corp.example:8443 "
                 "(the profile's provider table, user.toml:3:1)") != std::string::npos);
  CHECK(all.find("AZURE_OPENAI_API_KEY: withheld") != std::string::npos);
  CHECK(all.find(kApiKey.substr(13)) == std::string::npos);
}

TEST_CASE(
    "environment: signed credentials are refused unless passed through; an operator may bind a variable of "
    "its own") {
  Table table;
  Settings s = pi_settings();
  Plan refused = plan_env({"AWS_ACCESS_KEY_ID=AKIAEXAMPLE"}, s, table);
  REQUIRE(refused.errors.size() == 1);
  CHECK(refused.errors[0].find("AWS_ACCESS_KEY_ID") != std::string::npos);
  CHECK(refused.errors[0].find("pass_through") != std::string::npos);
  CHECK(refused.errors[0].find("AKIAEXAMPLE") == std::string::npos);

  s.pass_through = {pj::policy::Entry{"AWS_ACCESS_KEY_ID", {"user.toml", 4, 1}}};
  s.extra_hosts = {extra("CORP_LLM_TOKEN", "llm.corp.example")};
  Plan ok =
      plan_env({"AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "CORP_LLM_TOKEN=tok_abcdefghijklmnopqrstuvwxyz012345"}, s, table);
  CHECK(ok.errors.empty());
  REQUIRE(ok.env.size() == 1);  // the pass-through one keeps the caller's value: not rewritten
  CHECK(ok.env[0].first == "CORP_LLM_TOKEN");
  CHECK(ok.env[0].second.starts_with("tok_"));
  REQUIRE(ok.provenance.size() == 2);
  CHECK(ok.provenance[0].treatment == "pass-through");
  CHECK(table.by_placeholder(ok.env[0].second)->hosts == std::vector<BoundHost>{{"llm.corp.example", 443}});
}

TEST_CASE("auth.json: the jail's copy holds placeholders, every other field kept; write-back gets the real values") {
  const std::string host =
      R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh + R"(","access":")" + kAccess +
      R"(","expires":1767225600000},"openai":{"type":"api_key","key":"sk-abcdefghijklmnopqrstuvwxyz0123456789"},)"
      R"("groq":{"type":"api_key","key":"!pass show groq"},"unknownprov":{"type":"api_key","key":"secret-of-unknown-origin"}})";
  Table table;
  std::vector<Provenance> prov;
  auto jail = synthesize_auth(host, pi_settings(), table, prov);
  REQUIRE(jail);
  for (const std::string& secret : {kRefresh, kAccess, std::string("sk-abcdefghijklmnopqrstuvwxyz0123456789"),
                                    std::string("secret-of-unknown-origin")})
    CHECK(jail->find(secret.substr(13)) == std::string::npos);
  auto doc = json::parse(*jail);
  REQUIRE(doc);
  const json::Value* a = doc->find("anthropic");
  REQUIRE(a);
  CHECK(a->find("access")->as_string()->starts_with("sk-ant-oat01-"));
  CHECK(a->find("refresh")->as_string()->starts_with("sk-ant-ort01-"));
  CHECK(a->find("expires")->as_number()->text() == "1767225600000");
  CHECK(*a->find("type")->as_string() == "oauth");
  CHECK(*doc->find("groq")->find("key")->as_string() == "!pass show groq");  // Pi runs it inside: nothing of ours
  // Bound to no host: withheld (a placeholder no host receives).
  const std::string withheld = *doc->find("unknownprov")->find("key")->as_string();
  CHECK(withheld != "secret-of-unknown-origin");
  CHECK(withheld.size() >= 32);
  // Refresh tokens go only to the token endpoints, access tokens only to the API.
  auto refresh = table.by_placeholder(*a->find("refresh")->as_string());
  REQUIRE(refresh);
  CHECK(refresh->hosts == std::vector<BoundHost>{{"platform.claude.com", 443}, {"console.anthropic.com", 443}});
  CHECK(table.by_placeholder(*a->find("access")->as_string())->hosts ==
        std::vector<BoundHost>{{"api.anthropic.com", 443}});

  // What the jail leaves (Pi rewrote it, new expiry) comes back with the
  // real values: never a placeholder into the host's file.
  std::string left = *jail;
  left.replace(left.find("1767225600000"), 13, "1767229200000");
  auto r = reveal_auth(left, *jail, table);
  REQUIRE(r);
  const std::string* revealed = &r->text;
  CHECK(r->held.empty());
  CHECK(revealed->find(kRefresh) != std::string::npos);
  CHECK(revealed->find(kAccess) != std::string::npos);
  CHECK(revealed->find("sk-ant-oat01-") == revealed->find(kAccess));
  CHECK(revealed->find("1767229200000") != std::string::npos);
  // The withheld key comes back too: the write-back never empties the host's entry (was "").
  CHECK(revealed->find("secret-of-unknown-origin") != std::string::npos);
  CHECK_FALSE(synthesize_auth("[1,2]", pi_settings(), table, prov));
  CHECK_FALSE(synthesize_auth("{nope", pi_settings(), table, prov));
}

TEST_CASE("token exchange: the request's placeholder refresh token becomes the real one, JSON or form-encoded") {
  auto table = std::make_shared<Table>();
  table->add({"auth.json anthropic.refresh",
              "sk-ant-ort01-PLACEHOLDERplaceholderPLACEHOLDER0123",
              kRefresh,
              {{"platform.claude.com", 443}}});
  table->add({"auth.json anthropic.access",
              "sk-ant-oat01-PLACEHOLDERplaceholderPLACEHOLDER0123",
              kAccess,
              {{"api.anthropic.com", 443}}});
  table->add({"auth.json xai.refresh",
              "xai-PLACEHOLDERplaceholderPLACEHOLDER0123",
              "real/xai+refresh=",
              {{"auth.x.ai", 443}}});
  OAuthExchange ex(table, pi_settings(), "", nullptr);
  CHECK(ex.is_token_endpoint("platform.claude.com", "/v1/oauth/token"));
  CHECK(ex.is_token_endpoint("auth.openai.com", "/oauth/token"));
  CHECK(ex.is_token_endpoint("api.github.com", "/copilot_internal/v2/token"));
  CHECK_FALSE(ex.is_token_endpoint("api.anthropic.com", "/v1/oauth/token"));
  CHECK_FALSE(ex.is_token_endpoint("platform.claude.com", "/v1/messages"));

  auto json_body = ex.request_body(
      "platform.claude.com", "/v1/oauth/token",
      R"({"grant_type":"refresh_token","client_id":"c","refresh_token":"sk-ant-ort01-PLACEHOLDERplaceholderPLACEHOLDER0123"})",
      {});
  REQUIRE(json_body);
  CHECK(json_body->body == R"({"grant_type":"refresh_token","client_id":"c","refresh_token":")" + kRefresh + "\"}");
  auto form =
      ex.request_body("auth.x.ai", "/oauth2/token",
                      "grant_type=refresh_token&refresh_token=xai-PLACEHOLDERplaceholderPLACEHOLDER0123&x=1", {});
  REQUIRE(form);
  CHECK(form->body == "grant_type=refresh_token&refresh_token=real%2Fxai%2Brefresh%3D&x=1");
  // The access token's placeholder is not bound to the token endpoint:
  // refused (403), and the message holds no secret.
  auto wrong = ex.request_body("platform.claude.com", "/v1/oauth/token",
                               R"({"refresh_token":"sk-ant-oat01-PLACEHOLDERplaceholderPLACEHOLDER0123"})", {});
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message().find("auth.json anthropic.access") != std::string::npos);
  CHECK(wrong.error().message().find(kAccess) == std::string::npos);
}

TEST_CASE("token exchange: responses are decoded (gzip, deflate, zstd), new tokens become new bound placeholders") {
  const std::string body =
      R"({"token_type":"Bearer","access_token":"sk-ant-oat01-NEWACCESSnewaccessNEWACCESS0123456789",)"
      R"("refresh_token":"sk-ant-ort01-NEWREFRESHnewrefreshNEWREFRESH0123456789","expires_in":28800,)"
      R"("account":{"uuid":"u-1","email_address":"a@example.com"}})";
  for (std::string enc : {"", "identity", "gzip", "zstd", "ZSTD"}) {
    CAPTURE(enc);
    auto table = std::make_shared<Table>();
    table->add(
        {"auth.json anthropic.refresh", "sk-ant-ort01-OLDPLACEHOLDER", kRefresh, {{"platform.claude.com", 443}}});
    (void)table->take_added();
    OAuthExchange ex(table, pi_settings(), "", nullptr);
    std::string wire = enc == "gzip" ? gzip(body) : enc.starts_with("z") || enc.starts_with("Z") ? zstd(body) : body;
    auto out = ex.response_body("platform.claude.com", "/v1/oauth/token", 200, enc, wire, kRenewal);
    REQUIRE(out);
    CHECK(out->find("NEWACCESS") == std::string::npos);
    CHECK(out->find("NEWREFRESH") == std::string::npos);
    auto doc = json::parse(*out);
    REQUIRE(doc);
    const std::string access = *doc->find("access_token")->as_string();
    const std::string refresh = *doc->find("refresh_token")->as_string();
    CHECK(access.starts_with("sk-ant-oat01-"));
    CHECK(refresh.starts_with("sk-ant-ort01-"));
    CHECK(doc->find("expires_in")->as_number()->text() == "28800");
    CHECK(*doc->find("account")->find("uuid")->as_string() == "u-1");
    // Registered for the rest of the run, and handed to the filter once.
    auto added = ex.take_new_bindings();
    REQUIRE(added.size() == 2);
    CHECK(table->by_placeholder(access)->real == "sk-ant-oat01-NEWACCESSnewaccessNEWACCESS0123456789");
    CHECK(table->by_placeholder(access)->hosts == std::vector<BoundHost>{{"api.anthropic.com", 443}});
    CHECK(table->by_placeholder(refresh)->hosts ==
          std::vector<BoundHost>{{"platform.claude.com", 443}, {"console.anthropic.com", 443}});
    CHECK(ex.take_new_bindings().empty());
  }
}

TEST_CASE("token exchange: fails closed on what it cannot read; an echoed real value is masked") {
  auto table = std::make_shared<Table>();
  table->add({"auth.json anthropic.refresh", "sk-ant-ort01-OLDPLACEHOLDER", kRefresh, {{"platform.claude.com", 443}}});
  OAuthExchange ex(table, pi_settings(), "", nullptr);
  const std::string body = R"({"access_token":"sk-ant-oat01-NEW0123456789abcdefghijklmnopqrstuvwxyz"})";
  auto br = ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "br", body, kRenewal);
  REQUIRE_FALSE(br);
  CHECK(br.error().message().find("\"br\"") != std::string::npos);
  CHECK_FALSE(ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "gzip", body, kRenewal));  // not gzip
  CHECK_FALSE(
      ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "zstd", zstd(body).substr(0, 10), kRenewal));
  CHECK_FALSE(ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "", "<html>" + body, kRenewal));
  CHECK_FALSE(ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "", "[" + body + "]", kRenewal));
  auto bomb = ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "gzip",
                               gzip(std::string(kMaxTokenBody + 10, ' ') + body), kRenewal);
  REQUIRE_FALSE(bomb);
  CHECK(bomb.error().message().find("larger than") != std::string::npos);
  // An error response that echoes the refresh token it was sent.
  auto echo = ex.response_body("platform.claude.com", "/v1/oauth/token", 400, "",
                               R"({"error":"invalid_grant","detail":{"sent":")" + kRefresh + "\"}}", kRenewal);
  REQUIRE(echo);
  CHECK(echo->find(kRefresh) == std::string::npos);
  CHECK(echo->find("sk-ant-ort01-OLDPLACEHOLDER") != std::string::npos);
}

TEST_CASE("token exchange: the host's auth.json gets the new real tokens and expiry under Pi's lock") {
  const int64_t now = 1'800'000'000'000;
  NewTokens t{"new-access", "new-refresh", now + 3600'000 - 300'000, ""};
  auto next = apply_tokens(R"({"anthropic":{"type":"oauth","refresh":"old","access":"old","expires":1,"extra":"kept"},)"
                           R"("openai":{"type":"api_key","key":"k"}})",
                           "anthropic", t);
  REQUIRE(next);
  auto doc = json::parse(*next);
  REQUIRE(doc);
  CHECK(*doc->find("anthropic")->find("access")->as_string() == "new-access");
  CHECK(*doc->find("anthropic")->find("refresh")->as_string() == "new-refresh");
  CHECK(doc->find("anthropic")->find("expires")->as_number()->text() == std::to_string(now + 3300'000));
  CHECK(*doc->find("anthropic")->find("extra")->as_string() == "kept");
  CHECK(*doc->find("openai")->find("key")->as_string() == "k");
  // /login inside the jail: a new entry.
  auto login = apply_tokens(std::nullopt, "anthropic", t);
  REQUIRE(login);
  CHECK(*json::parse(*login)->find("anthropic")->find("type")->as_string() == "oauth");
  CHECK_FALSE(apply_tokens(std::string_view("not json"), "anthropic", t));

  // Against a real directory, through the exchange.
  namespace fs = std::filesystem;
  pj::test::TempDir tmp;
  const std::string dir = tmp.path;
  {
    std::ofstream(dir + "/auth.json") << R"({"anthropic":{"type":"oauth","refresh":"old","access":"old","expires":1}})";
  }
  auto table = std::make_shared<Table>();
  std::vector<std::string> warnings;
  OAuthExchange ex(table, pi_settings(), dir, [&](const std::string& w) { warnings.push_back(w); });
  auto out =
      ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "",
                       R"({"access_token":"sk-ant-oat01-HOSTNEWACCESS0123456789abcdefghijklmnop",)"
                       R"("refresh_token":"sk-ant-ort01-HOSTNEWREFRESH0123456789abcdefghijklmno","expires_in":3600})",
                       kRenewal);
  REQUIRE(out);
  CHECK(warnings.empty());
  std::stringstream host;
  host << std::ifstream(dir + "/auth.json").rdbuf();
  CHECK(host.str().find("sk-ant-oat01-HOSTNEWACCESS0123456789abcdefghijklmnop") != std::string::npos);
  CHECK(host.str().find("sk-ant-ort01-HOSTNEWREFRESH0123456789abcdefghijklmno") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/auth.json.lock"));
  CHECK((fs::status(dir + "/auth.json").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("[credentials]: operators bind and pass through; a project file can do neither (file:line)") {
  using namespace pj::policy;
  auto op = load_layer(
      "[credentials]\nbind = { anthropic = [\"llm.corp.example:8443\"], CORP_KEY = [\"a.example\"] }\n"
      "pass_through = [\"AWS_ACCESS_KEY_ID\"]\n",
      "user.toml", Authority::user);
  CHECK(op.errors.empty());
  REQUIRE(op.layer.cred_bind.size() == 2);
  CHECK(op.layer.cred_pass_through.size() == 1);
  auto bad = load_layer("[credentials]\nbind = { anthropic = [\"*.corp.example\"], \"a b\" = [\"x\"] }\nmystery = 1\n",
                        "user.toml", Authority::user);
  CHECK(bad.errors.size() == 3);

  auto proj =
      load_layer("[credentials]\nbind = { anthropic = [\"evil.example\"] }\npass_through = [\"OPENAI_API_KEY\"]\n",
                 ".pi/jail.toml", Authority::project);
  REQUIRE(proj.errors.empty());
  Context ctx = paths_as_written();
  auto r = resolve({op.layer, proj.layer}, ctx);
  REQUIRE(r.policy);
  CHECK(r.policy->credential_hosts().size() == 2);
  CHECK(r.policy->credential_pass_through().size() == 1);
  REQUIRE(r.refused.size() == 2);
  CHECK(r.refused[0].request.str() == ".pi/jail.toml:2:23");
  CHECK(r.refused[0].what == "credentials.bind anthropic evil.example");
  CHECK(r.refused[1].request.str() == ".pi/jail.toml:3:17");
}

TEST_CASE("[credentials] bind: http:// names a host loopback port only, with its port, and nothing but a host") {
  using namespace pj::policy;
  std::string why;
  CHECK(parse_bind_target("http://127.0.0.1:11434", why) == "http://127.0.0.1:11434");
  CHECK(parse_bind_target("HTTP://LocalHost:8080/", why) == "http://localhost:8080");
  CHECK(parse_bind_target("http://[::1]:1234", why) == "http://[::1]:1234");
  CHECK(parse_bind_target("http://127.0.0.2:1234", why) == "http://127.0.0.2:1234");
  CHECK(parse_bind_target("https://llm.corp.example:8443", why) == "llm.corp.example:8443");
  CHECK(parse_bind_target("llm.corp.example", why) == "llm.corp.example");
  for (const char* bad : {"http://10.0.0.1:8080", "http://llm.corp.example:80", "http://127.0.0.1",
                          "http://127.0.0.1:11434/v1", "http://user:pw@127.0.0.1:1", "ftp://127.0.0.1:21",
                          "http://*.example:80", "http://[::ffff:10.0.0.1]:80", "http://0.0.0.0:80"}) {
    CAPTURE(bad);
    why.clear();
    CHECK_FALSE(parse_bind_target(bad, why));
    CHECK_FALSE(why.empty());
  }
  auto l = load_layer("[credentials]\nbind = { ollama = [\"http://10.0.0.1:11434\"] }\n", "user.toml", Authority::user);
  REQUIRE(l.errors.size() == 1);
  CHECK(
      l.errors[0].str().starts_with("user.toml:2:20: credentials.bind.ollama: \"http://10.0.0.1:11434\": plain HTTP "
                                    "is allowed only to a host loopback port"));
}

TEST_CASE(
    "[credentials] bind: a plain-HTTP binding opens its port to the jail, traced to the bind; a deny of it or "
    "TLS wanted on it is an error") {
  using namespace pj::policy;
  Context ctx = paths_as_written();
  auto op =
      load_layer("[credentials]\nbind = { ollama = [\"http://127.0.0.1:11434\"] }\n", "user.toml", Authority::user);
  REQUIRE(op.errors.empty());
  auto r = resolve({op.layer}, ctx);
  REQUIRE(r.policy);
  REQUIRE(r.policy->net_allow().size() == 1);
  CHECK(r.policy->net_allow()[0].pattern.str() == "127.0.0.1:11434");
  CHECK(r.policy->net_allow()[0].src.str() == "user.toml:2:20");

  auto deny = load_layer("[network]\ndeny = [\"127.0.0.1:11434\"]\n", "system.toml", Authority::system);
  auto denied = resolve({deny.layer, op.layer}, ctx);
  CHECK_FALSE(denied.policy);
  REQUIRE(denied.errors.size() == 1);
  CHECK(denied.errors[0].str().find("user.toml:2:20: credentials.bind.ollama \"http://127.0.0.1:11434\" cannot be "
                                    "honoured: the deny rule \"127.0.0.1:11434\" (system.toml:2:9)") == 0);
  auto project = load_layer("[network]\ndeny = [\"127.0.0.1:11434\"]\n", ".pi/jail.toml", Authority::project);
  CHECK_FALSE(resolve({op.layer, project.layer}, ctx).policy);

  auto tls = load_layer("[credentials]\nbind = { ollama = [\"http://127.0.0.1:11434\"], other = [\"[::1]:11434\"] }\n",
                        "user.toml", Authority::user);
  REQUIRE(tls.errors.empty());
  auto both = resolve({tls.layer}, ctx);
  CHECK_FALSE(both.policy);
  REQUIRE(both.errors.size() == 1);
  CHECK(both.errors[0].message.find("other binds port 11434 for TLS") != std::string::npos);
}

TEST_CASE("[credentials] logins: an operator may let logins write back; a project file may not (file:line)") {
  using namespace pj::policy;
  Context ctx = paths_as_written();
  auto none = resolve({}, ctx);
  REQUIRE(none.policy);
  CHECK(none.policy->credential_logins() == LoginWriteBack::ask);
  auto op = load_layer("[credentials]\nlogins = \"write-back\"\n", "user.toml", Authority::user);
  REQUIRE(op.errors.empty());
  auto r = resolve({op.layer}, ctx);
  REQUIRE(r.policy);
  CHECK(r.policy->credential_logins() == LoginWriteBack::write_back);
  auto proj = load_layer("[credentials]\nlogins = \"write-back\"\n", ".pi/jail.toml", Authority::project);
  REQUIRE(proj.errors.empty());
  auto p = resolve({proj.layer}, ctx);
  REQUIRE(p.policy);
  CHECK(p.policy->credential_logins() == LoginWriteBack::ask);
  REQUIRE(p.refused.size() == 1);
  CHECK(p.refused[0].request.str() == ".pi/jail.toml:2:10");
  CHECK(load_layer("[credentials]\nlogins = \"always\"\n", "user.toml", Authority::user).errors.size() == 1);
}

TEST_CASE("login consent: only \"y\" or \"yes\" consents, and the question escapes what the jail chose") {
  using pj::pi::Consent;
  CHECK(pj::credentials::parse_answer("y\n") == Consent::given);
  CHECK(pj::credentials::parse_answer(" YES ") == Consent::given);
  CHECK(pj::credentials::parse_answer("") == Consent::refused);
  CHECK(pj::credentials::parse_answer("n") == Consent::refused);
  CHECK(pj::credentials::parse_answer("yy") == Consent::refused);
  const std::string q = pj::credentials::consent_question({{"anthropic", "a@b\x1b[2J"}});
  CHECK(q.find("anthropic") != std::string::npos);
  CHECK(q.find('\x1b') == std::string::npos);
  const std::string note = pj::pi::refusal_note({"evil\x1b]0;x\a", ""}, Consent::no_terminal);
  CHECK(note.starts_with("refused:"));
  CHECK(note.find('\x1b') == std::string::npos);
  CHECK(note.find("logins = \"write-back\"") != std::string::npos);
}

TEST_CASE("provider table: Anthropic's key-minting OAuth endpoints are marked for the filter to refuse") {
  // An OAuth token with scope org:create_api_key (Pi asks for it) buys a
  // new real API key at api.anthropic.com/api/oauth/claude_cli/create_api_key.
  const Provider* p = provider_by_id("anthropic");
  REQUIRE(p);
  CHECK(std::find(p->minting.begin(), p->minting.end(), "/api/oauth/") != p->minting.end());
  CHECK(std::find(p->hosts.begin(), p->hosts.end(), "api.anthropic.com") != p->hosts.end());
}

TEST_CASE("provider table: every provider with a key-minting endpoint has it refused unless an operator allows it") {
  auto refused = minting_refusals({});
  REQUIRE(refused);
  auto has = [&](const std::string& host, const std::string& prefix) {
    return std::any_of(refused->begin(), refused->end(), [&](const pj::credentials::MintingEndpoint& m) {
      return m.host == host && m.path_prefix == prefix;
    });
  };
  CHECK(has("api.anthropic.com", "/api/oauth/"));
  CHECK(has("api.openai.com", "/v1/organization/admin_api_keys"));
  CHECK(has("api.openai.com", "/v1/organization/projects/*/service_accounts"));
  CHECK(has("api.openai.com", "/v1/organization/projects/*/api_keys"));
  CHECK(has("openrouter.ai", "/api/v1/keys"));
  CHECK(has("api.cloudflare.com", "/client/v4/user/tokens"));
  CHECK(has("api.cloudflare.com", "/client/v4/accounts/*/tokens"));
  CHECK(has("api.fireworks.ai", "/v1/accounts/*/users/*/apiKeys"));
  // One allowed by an operator: only that one goes.
  pj::policy::Entry allow{"api.openai.com/v1/organization/admin_api_keys", {"system.toml", 3, 17}};
  auto fewer = minting_refusals({allow});
  REQUIRE(fewer);
  CHECK(fewer->size() + 1 == refused->size());
  // A misspelt one is an error naming its place and the known endpoints.
  auto bad = minting_refusals({{"api.openai.com/v1/organization/admin_keys", {"system.toml", 4, 1}}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("system.toml:4:1") != std::string::npos);
  CHECK(bad.error().message().find("openrouter.ai/api/v1/keys") != std::string::npos);
}

TEST_CASE("[credentials] allow_minting: an operator may allow a minting endpoint; a project file may not (file:line)") {
  using namespace pj::policy;
  auto op =
      load_layer("[credentials]\nallow_minting = [\"openrouter.ai/api/v1/keys\"]\n", "system.toml", Authority::system);
  CHECK(op.errors.empty());
  auto bad = load_layer("[credentials]\nallow_minting = [\"/api/v1/keys\"]\n", "system.toml", Authority::system);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].message.find("not HOST/PATH") != std::string::npos);
  auto proj = load_layer("[credentials]\nallow_minting = [\"api.openai.com/v1/organization/admin_api_keys\"]\n",
                         ".pi/jail.toml", Authority::project);
  REQUIRE(proj.errors.empty());
  Context ctx = paths_as_written();
  auto r = resolve({op.layer, proj.layer}, ctx);
  REQUIRE(r.policy);
  REQUIRE(r.policy->credential_allow_minting().size() == 1);
  CHECK(r.policy->credential_allow_minting()[0].text == "openrouter.ai/api/v1/keys");
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].request.str() == ".pi/jail.toml:2:18");
  CHECK(r.refused[0].what == "credentials.allow_minting api.openai.com/v1/organization/admin_api_keys");
}

TEST_CASE("auth.json write-back: a placeholder moved under another provider is never revealed there") {
  // The cred-attack review: the jail could write the Anthropic token's
  // placeholder as another provider's key; the write-back put the REAL
  // Anthropic token there, and the next run bound it to that provider's hosts.
  const std::string host =
      R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh + R"(","access":")" + kAccess +
      R"(","expires":1767225600000},"openai":{"type":"api_key","key":"sk-abcdefghijklmnopqrstuvwxyz0123456789"}})";
  Table table;
  std::vector<Provenance> prov;
  auto jail = synthesize_auth(host, pi_settings(), table, prov);
  REQUIRE(jail);
  auto doc = json::parse(*jail);
  REQUIRE(doc);
  const std::string access_ph = *doc->find("anthropic")->find("access")->as_string();
  const std::string openai_ph = *doc->find("openai")->find("key")->as_string();
  // Unchanged, it is revealed as before.
  auto same = reveal_auth(*jail, *jail, table);
  REQUIRE(same);
  CHECK(same->text.find(kAccess) != std::string::npos);
  // Moved: refused, the real value nowhere.
  std::string moved = *jail;
  moved.replace(moved.find(openai_ph), openai_ph.size(), access_ph);
  auto r = reveal_auth(moved, *jail, table);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("openai") != std::string::npos);
  CHECK(r.error().message().find(kAccess) == std::string::npos);
  // A new entry of another provider holding it: refused too.
  std::string added = *jail;
  added.insert(added.rfind('}'), R"(,"groq":{"type":"api_key","key":")" + access_ph + R"("})");
  CHECK_FALSE(reveal_auth(added, *jail, table));
}

namespace {

// The host's auth.json with a provider pi-jail binds to no host ("mycorp":
// its key withheld), the jail's copy, and the placeholders in it.
struct WithheldRig {
  const std::string host = R"({"anthropic":{"type":"api_key","key":")" + kApiKey +
                           R"("},"mycorp":{"type":"api_key","key":"mycorp-SECRETsecretSECRETsecret0123456789"}})";
  Table table;
  std::vector<Provenance> prov;
  std::string jail;
  std::string anthropic_ph, mycorp_ph;
  WithheldRig() {
    auto j = synthesize_auth(host, pi_settings(), table, prov);
    REQUIRE(j);
    jail = *j;
    auto doc = json::parse(jail);
    anthropic_ph = *doc->find("anthropic")->find("key")->as_string();
    mycorp_ph = *doc->find("mycorp")->find("key")->as_string();
  }
  std::string with(std::string_view from, std::string_view to) const {
    std::string out = jail;
    out.replace(out.find(from), from.size(), to);
    return out;
  }
};

}  // namespace

TEST_CASE("auth.json write-back: a withheld placeholder moved into another provider's entry is refused") {
  WithheldRig rig;
  auto r = reveal_auth(rig.with(rig.anthropic_ph, rig.mycorp_ph), rig.jail, rig.table);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("anthropic") != std::string::npos);
  CHECK(r.error().message().find("SECRETsecret") == std::string::npos);
}

TEST_CASE("auth.json write-back: a withheld placeholder put into a new entry is refused") {
  WithheldRig rig;
  std::string added = rig.jail;
  added.insert(added.rfind('}'), R"(,"openai":{"type":"api_key","key":")" + rig.mycorp_ph + R"("})");
  CHECK_FALSE(reveal_auth(added, rig.jail, rig.table));
}

TEST_CASE("auth.json write-back: a placeholder moved to another field of its own entry is refused") {
  const std::string host = R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh + R"(","access":")" + kAccess +
                           R"(","expires":1767225600000}})";
  Table table;
  std::vector<Provenance> prov;
  auto jail = synthesize_auth(host, pi_settings(), table, prov);
  REQUIRE(jail);
  auto doc = json::parse(*jail);
  const std::string refresh_ph = *doc->find("anthropic")->find("refresh")->as_string();
  const std::string access_ph = *doc->find("anthropic")->find("access")->as_string();
  std::string swapped = *jail;
  swapped.replace(swapped.find(access_ph), access_ph.size(), refresh_ph);
  CHECK_FALSE(reveal_auth(swapped, *jail, table));
}

TEST_CASE("auth.json write-back: bound and withheld placeholders in their own slots are still revealed") {
  WithheldRig rig;
  auto r = reveal_auth(rig.jail, rig.jail, rig.table);
  REQUIRE(r);
  CHECK(r->held.empty());
  CHECK(r->text.find(kApiKey) != std::string::npos);
  CHECK(r->text.find("mycorp-SECRETsecretSECRETsecret0123456789") != std::string::npos);
}

TEST_CASE("auth.json write-back: a literal new token in the jail's auth.json is held for consent") {
  WithheldRig rig;
  auto r = reveal_auth(rig.with(rig.anthropic_ph, "sk-ant-api03-JAILCHOSEjailchoseJAILCHOSE0123456789"), rig.jail,
                       rig.table);
  REQUIRE(r);
  REQUIRE(r->held.size() == 1);
  CHECK(r->held[0].entry == "anthropic");
  // An entry that was not there is held too.
  std::string added = rig.jail;
  added.insert(added.rfind('}'), R"(,"openai":{"type":"api_key","key":"sk-literal0123456789abcdef","email":"x@y"})");
  auto n = reveal_auth(added, rig.jail, rig.table);
  REQUIRE(n);
  REQUIRE(n->held.size() == 1);
  CHECK(n->held[0].entry == "openai");
  CHECK(n->held[0].account == "x@y");
  // Only an entry the merge would take is a login to ask about: a planted
  // "!command" key is refused by the merge itself.
  CHECK(pj::pi::agent::auth_entry_is_data(r->text, std::string_view(rig.host), "anthropic"));
  CHECK_FALSE(
      pj::pi::agent::auth_entry_is_data(n->text, std::string_view(rig.host), "openai"));  // "email" is no api_key data
  std::string planted = rig.jail;
  planted.insert(planted.rfind('}'), R"(,"x":{"type":"api_key","key":"!touch MARK"})");
  CHECK_FALSE(pj::pi::agent::auth_entry_is_data(planted, std::string_view(rig.host), "x"));
  // What may be written back meanwhile: the held entries as the host had them.
  auto kept = pj::pi::agent::hold_entries(r->text, std::string_view(rig.host), {"anthropic"});
  REQUIRE(kept);
  CHECK(kept->find(kApiKey) != std::string::npos);
  CHECK(kept->find("JAILCHOSE") == std::string::npos);
}

namespace {

// A run whose host auth.json has Anthropic OAuth tokens, with the
// exchange writing the host's file in a temporary directory.
struct ExchangeRig {
  pj::test::TempDir tmp;
  std::string dir = tmp.path;
  std::shared_ptr<Table> table = std::make_shared<Table>();
  std::shared_ptr<HeldLogins> held = std::make_shared<HeldLogins>();
  std::string jail, refresh_ph;
  std::string host_before;
  ExchangeRig() {
    host_before =
        R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh + R"(","access":")" + kAccess + R"(","expires":1}})";
    std::ofstream(dir + "/auth.json") << host_before;
    std::vector<Provenance> prov;
    auto j = synthesize_auth(host_before, pi_settings(), *table, prov);
    REQUIRE(j);
    jail = *j;
    refresh_ph = *json::parse(jail)->find("anthropic")->find("refresh")->as_string();
  }
  std::string host_now() const {
    std::stringstream s;
    s << std::ifstream(dir + "/auth.json").rdbuf();
    return s.str();
  }
  // One exchange as the filter makes it: the request, then the response.
  std::string exchange(OAuthExchange& ex, const std::string& body) {
    auto req = ex.request_body("platform.claude.com", "/v1/oauth/token", body, {});
    REQUIRE(req);
    auto out = ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "",
                                R"({"access_token":"sk-ant-oat01-FROMSERVERaccess0123456789abcdefghij",)"
                                R"("refresh_token":"sk-ant-ort01-FROMSERVERrefresh0123456789abcdefghi",)"
                                R"("expires_in":3600,"account":{"email_address":"someone@example.com"}})",
                                req->kind);
    REQUIRE(out);
    return *out;
  }
};

}  // namespace

TEST_CASE("token exchange: a renewal with the current refresh placeholder is written to the host silently") {
  ExchangeRig rig;
  OAuthExchange ex(rig.table, pi_settings(), rig.dir, nullptr, rig.held);
  rig.exchange(ex, R"({"grant_type":"refresh_token","client_id":"c","refresh_token":")" + rig.refresh_ph + "\"}");
  CHECK(rig.host_now().find("FROMSERVERaccess") != std::string::npos);
  CHECK(rig.held->list().empty());
  // The renewed tokens renew again (their placeholder is now the current one).
  auto next_ph = rig.table->current_in(Slot{"anthropic", "refresh"});
  REQUIRE(next_ph);
  CHECK(next_ph->second == Origin::renewal);
  auto again = ex.request_body("platform.claude.com", "/v1/oauth/token",
                               R"({"grant_type":"refresh_token","refresh_token":")" + next_ph->first + "\"}", {});
  REQUIRE(again);
  CHECK(again->kind == pj::credentials::ExchangeKind::renewal);
}

TEST_CASE("token exchange: an authorization_code exchange is a login, held for consent, the host's file untouched") {
  ExchangeRig rig;
  OAuthExchange ex(rig.table, pi_settings(), rig.dir, nullptr, rig.held);
  const std::string out =
      rig.exchange(ex, R"({"grant_type":"authorization_code","code":"jail-chosen","client_id":"c"})");
  CHECK(out.find("FROMSERVER") == std::string::npos);  // the jail gets placeholders, usable for the run
  CHECK(rig.host_now() == rig.host_before);
  REQUIRE(rig.held->list().size() == 1);
  CHECK(rig.held->list()[0].id == "anthropic");
  CHECK(rig.held->list()[0].tokens.account == "someone@example.com");
  // Pi stores the login's placeholders: they are revealed, and held.
  auto doc = json::parse(out);
  std::string left = rig.jail;
  const std::string old_access = *json::parse(rig.jail)->find("anthropic")->find("access")->as_string();
  left.replace(left.find(old_access), old_access.size(), *doc->find("access_token")->as_string());
  left.replace(left.find(rig.refresh_ph), rig.refresh_ph.size(), *doc->find("refresh_token")->as_string());
  auto r = reveal_auth(left, rig.jail, *rig.table);
  REQUIRE(r);
  REQUIRE(r->held.size() == 1);
  CHECK(r->text.find("FROMSERVERaccess") != std::string::npos);
  // A refresh of the login's own tokens stays a login.
  auto renew = ex.request_body(
      "platform.claude.com", "/v1/oauth/token",
      R"({"grant_type":"refresh_token","refresh_token":")" + *doc->find("refresh_token")->as_string() + "\"}", {});
  REQUIRE(renew);
  CHECK(renew->kind == pj::credentials::ExchangeKind::login);
  // With consent, the held login reaches the host.
  auto notes = apply_held(rig.dir, rig.held->list());
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].starts_with("applied:"));
  CHECK(rig.host_now().find("FROMSERVERrefresh") != std::string::npos);
}

TEST_CASE("token exchange: a refresh_token grant without the current placeholder is a login") {
  ExchangeRig rig;
  OAuthExchange ex(rig.table, pi_settings(), rig.dir, nullptr, rig.held);
  rig.exchange(ex, R"({"grant_type":"refresh_token","refresh_token":"sk-ant-ort01-aliteraltokenthejailknows012345"})");
  CHECK(rig.host_now() == rig.host_before);
  CHECK(rig.held->list().size() == 1);
}

TEST_CASE("token exchange: a renewal says plainly it is one, at the endpoint's own path; else never a renewal") {
  ExchangeRig rig;
  OAuthExchange ex(rig.table, pi_settings(), rig.dir, nullptr, rig.held);
  auto kind = [&](const std::string& body) {
    auto r = ex.request_body("platform.claude.com", "/v1/oauth/token", body, {});
    REQUIRE(r);
    return r->kind;
  };
  const std::string ph = rig.refresh_ph;
  // Plain renewals, JSON and form (Pi's own shapes), rebuilt by the
  // filter: the real refresh token, the parameters as read, its own type.
  CHECK(kind(R"({"grant_type":"refresh_token","client_id":"c","refresh_token":")" + ph + "\"}") == kRenewal);
  CHECK(kind("grant_type=refresh_token&refresh_token=" + ph + "&client_id=c&scope=openid+profile") == kRenewal);
  auto json_renewal = ex.request_body(
      "platform.claude.com", "/v1/oauth/token",
      "{ \"grant_type\": \"refresh_token\",\n \"client_id\": \"c\", \"refresh_token\": \"" + ph + "\" }", {});
  REQUIRE(json_renewal);
  CHECK(json_renewal->body == R"({"grant_type":"refresh_token","client_id":"c","refresh_token":")" + kRefresh + "\"}");
  CHECK(json_renewal->content_type == "application/json");
  auto form_renewal = ex.request_body("platform.claude.com", "/v1/oauth/token",
                                      "grant_type=refresh_token&refresh_token=" + ph + "&resource=urn%3Ax", {});
  REQUIRE(form_renewal);
  CHECK(form_renewal->body == "grant_type=refresh_token&refresh_token=" + kRefresh + "&resource=urn%3Ax");
  CHECK(form_renewal->content_type == "application/x-www-form-urlencoded");
  // With a query (a server may read another grant there first), or at
  // another spelling of the path (a server may route it elsewhere), the
  // host's refresh token goes nowhere: refused.
  for (const char* path : {"/v1/oauth/token?grant_type=authorization_code&code=X", "/v1/oauth/token/",
                           "/u/a%5C..%5C..%5Cv1%5Coauth%5Ctoken"}) {
    CAPTURE(path);
    auto elsewhere = ex.request_body("platform.claude.com", path, "grant_type=refresh_token&refresh_token=" + ph, {});
    REQUIRE_FALSE(elsewhere);
    CHECK(elsewhere.error().message().find("goes only to /v1/oauth/token itself") != std::string::npos);
  }
  // Without a placeholder, another spelling is a login all the same.
  auto spelt = ex.request_body("platform.claude.com", "/v1/oauth/token/",
                               R"({"grant_type":"authorization_code","code":"X"})", {});
  REQUIRE(spelt);
  CHECK(spelt->kind == pj::credentials::ExchangeKind::login);
  CHECK(spelt->content_type.empty());
  // A second grant_type, however spelled, or a code: a server reads
  // whichever it likes, so these are not renewals; carrying the host's
  // refresh token, they are refused (it would be spent on another
  // exchange), and without it they are logins (held for consent).
  for (const std::string& body :
       {"grant_type=refresh_token&refresh_token=" + ph + "&grant%5Ftype=authorization_code&code=X&code_verifier=V",
        "grant%5Ftype=authorization_code&grant_type=refresh_token&refresh_token=" + ph,
        "grant_type=refresh_token&refresh_token=" + ph + ";grant_type=authorization_code",
        "grant_type=refresh_token&refresh_token=" + ph + "&code=X",
        "grant_type=refresh_token&refresh_token=" + ph + "&device%5Fcode=X",
        "grant_type=refresh_token&refresh_token=" + ph + "&refresh_token=" + ph,
        R"({"grant_type":"refresh_token","refresh_token":")" + ph + R"(","code":"X"})",
        R"({"grant_type":"refresh_token","refresh_token":")" + ph +
            R"(","x":"&grant_type=authorization_code&code=X&z="})",
        R"({"grant_type":"refresh_token","refresh_token":")" + ph + R"(","x":"&grant_type=authorization_code"})",
        // The placeholder beside the jail's own refresh token.
        R"({"grant_type":"refresh_token","refresh_token":"sk-ant-ort01-ATTACKERown0123","state":")" + ph + "\"}",
        "grant_type=refresh_token&refresh_token=sk-ant-ort01-ATTACKERown0123&client_id=c&x=" + ph,
        "grant_type=refresh_token&refresh_token=" + ph + "&client_id=" + ph,
        // Names in another case, a BOM, UTF-16, multipart.
        R"({"grant_type":"refresh_token","refresh_token":")" + ph + R"(","Grant_Type":"authorization_code"})",
        "\xEF\xBB\xBF{\"grant_type\":\"refresh_token\",\"refresh_token\":\"" + ph + "\"}",
        std::string("\0{\0\"", 4) + "grant_type=refresh_token&refresh_token=" + ph,
        "--B\r\nContent-Disposition: form-data; name=\"grant_type\"\r\n\r\nauthorization_code\r\n--B--&grant_type="
        "refresh_token&refresh_token=" +
            ph,
        // Not a string, or nothing but the grant.
        R"({"grant_type":"refresh_token","refresh_token":")" + ph + R"(","client_id":["c"]})",
        "grant_type=refresh_token&refresh_token=" + ph + "&client_id", std::string("grant_type=refresh_token")}) {
    CAPTURE(body);
    auto r = ex.request_body("platform.claude.com", "/v1/oauth/token", body, {});
    if (body.find(ph) != std::string::npos) {
      REQUIRE_FALSE(r);
      CHECK(r.error().message().find("is not plainly the provider's renewal") != std::string::npos);
      CHECK(r.error().message().find(kRefresh) == std::string::npos);
    } else {
      REQUIRE(r);
      CHECK(r->kind == pj::credentials::ExchangeKind::login);
    }
  }
}

TEST_CASE("token exchange: another spelling of the token endpoint's path, or more after it, is the token endpoint") {
  OAuthExchange ex(std::make_shared<Table>(), pi_settings(), "", nullptr);
  for (const char* path :
       {"/v1/oauth/token", "/v1/oauth/token/", "//v1/oauth/token", "/v1//oauth/token", "/v1/%6fauth/token",
        "/v1/oauth/token;x=1", "/V1/OAuth/Token", "/v1/./oauth/token", "/x/../v1/oauth/token", "/v1/oauth/token?x=1",
        "/v1\\oauth\\token", "https://platform.claude.com/v1/oauth/token", "/v1/oauth/token.json", "/v1/oauth/token.",
        "/v1/oauth/token%00", "/v1/oauth/token%e2%80%8b", "/v1/oauth%2Ftoken", "/v1/oauth/tokens"}) {
    CAPTURE(path);
    CHECK(ex.is_token_endpoint("platform.claude.com", path));
  }
  CHECK_FALSE(ex.is_token_endpoint("platform.claude.com", "/v1/oauth"));
  CHECK_FALSE(ex.is_token_endpoint("platform.claude.com", "/v1/oauth/x/token"));
  CHECK_FALSE(ex.is_token_endpoint("platform.claude.com", "/v1/oauth/token/x"));
}

TEST_CASE("token exchange: a new token echoed under another name, or nested, reaches the jail as its placeholder") {
  ExchangeRig rig;
  OAuthExchange ex(rig.table, pi_settings(), rig.dir, nullptr, rig.held);
  auto req = ex.request_body("platform.claude.com", "/v1/oauth/token",
                             R"({"grant_type":"authorization_code","code":"c","client_id":"c"})", {});
  REQUIRE(req);
  const std::string access = "sk-ant-oat01-ECHOEDaccess0123456789abcdefghijklmn",
                    refresh = "sk-ant-ort01-ECHOEDrefresh0123456789abcdefghijklm";
  auto out = ex.response_body("platform.claude.com", "/v1/oauth/token", 200, "",
                              R"({"access_token":")" + access + R"(","refresh_token":")" + refresh + R"(","token":")" +
                                  access + R"(","id_token":")" + refresh + R"(","session":{"bearer":")" + access +
                                  R"(","list":[")" + refresh + R"("]},"expires_in":3600})",
                              req->kind);
  REQUIRE(out);
  CAPTURE(*out);
  CHECK(out->find("ECHOED") == std::string::npos);
  auto doc = json::parse(*out);
  REQUIRE(doc);
  const std::string access_ph = *doc->find("access_token")->as_string();
  CHECK(*doc->find("token")->as_string() == access_ph);
  CHECK(*doc->find("session")->find("bearer")->as_string() == access_ph);
  CHECK(*doc->find("id_token")->as_string() == *doc->find("refresh_token")->as_string());
}

namespace {

// The exchange split as the filter process runs it: the supervisor's
// exchange (its table, the host's file) and the filter's copy, seeded
// with the bound credentials and their slots, reporting each exchange.
struct SplitExchange {
  ExchangeRig rig;
  OAuthExchange supervisor{rig.table, pi_settings(), rig.dir, nullptr, rig.held};
  std::shared_ptr<Table> filter_table = std::make_shared<Table>();
  OAuthExchange filter{filter_table, pi_settings(), "", nullptr, nullptr};
  std::vector<ExchangeReport> reports;
  SplitExchange() {
    // Another provider's key the filter also holds: its placeholder must
    // never be slotted under anthropic.
    rig.table->add({"OPENAI_API_KEY",
                    "sk-PLACEHOLDERopenai0123456789abcdefghijk",
                    "sk-REALopenai0123456789abcdef",
                    {{"api.openai.com", 443}}});
    const auto bound = rig.table->snapshot();
    for (const auto& b : bound) filter_table->add(b);
    (void)filter_table->take_added();
    for (const auto& s : supervisor.seed(bound).slots) filter_table->add_slot(s.placeholder, s.slot, s.origin);
    filter.report_to([this](const ExchangeReport& e) {
      reports.push_back(e);
      return pj::util::Status{};
    });
  }
  ExchangeReport renewal() {
    rig.exchange(filter, R"({"grant_type":"refresh_token","refresh_token":")" + rig.refresh_ph + "\"}");
    REQUIRE(reports.size() == 1);
    return reports.back();
  }
};

}  // namespace

TEST_CASE("token exchange in the filter process: the supervisor takes a renewal's report as in one process") {
  SplitExchange x;
  const ExchangeReport e = x.renewal();
  // The filter wrote nothing: the supervisor does.
  CHECK(x.rig.host_now() == x.rig.host_before);
  CHECK(e.kind == pj::credentials::ExchangeKind::renewal);
  CHECK(e.bindings.size() == 2);
  REQUIRE(x.supervisor.accept(e));
  CHECK(x.rig.host_now().find("FROMSERVERaccess") != std::string::npos);
  CHECK(x.rig.held->list().empty());
  auto now = x.rig.table->current_in(Slot{"anthropic", "refresh"});
  REQUIRE(now);
  CHECK(now->second == Origin::renewal);
  CHECK(now->first == x.filter_table->current_in(Slot{"anthropic", "refresh"})->first);
  // The seed never carries a withheld secret's slot or value.
  auto table = std::make_shared<Table>();
  table->add_withheld("wh-PLACEHOLDER", "wh-REAL", Slot{"mystery", "key"});
  OAuthExchange ex(table, pi_settings(), "", nullptr);
  CHECK(ex.seed(table->snapshot()).slots.empty());
}

TEST_CASE("token exchange in the filter process: a forged report is refused whole, nothing taken") {
  SplitExchange x;
  const ExchangeReport good = x.renewal();
  const size_t bindings_before = x.rig.table->size();
  auto refused = [&](const ExchangeReport& e, std::string_view why) {
    auto st = x.supervisor.accept(e);
    REQUIRE_FALSE(st);
    CAPTURE(st.error().message());
    CHECK(st.error().message().find(why) != std::string::npos);
    CHECK(x.rig.table->size() == bindings_before);
    CHECK(x.rig.host_now() == x.rig.host_before);
  };
  auto index_of = [](const ExchangeReport& e, std::string_view key) {
    for (size_t i = 0; i < e.bindings.size(); ++i)
      if (e.bindings[i].name.ends_with(key)) return i;
    FAIL("no binding for " << key);
    return size_t{0};
  };
  const size_t access = index_of(good, ".access_token"), refresh = index_of(good, ".refresh_token");
  const std::string openai_ph = "sk-PLACEHOLDERopenai0123456789abcdefghijk",
                    openai_real = "sk-REALopenai0123456789abcdef";
  ExchangeReport e = good;
  e.bindings[access].hosts = {{"evil.example", 443}};
  refused(e, "bound to a host not of provider anthropic");
  // Another provider's real value under a new placeholder, slotted and
  // written as anthropic's access token.
  e = good;
  e.bindings[access].real = openai_real;
  e.tokens.access = openai_real;
  refused(e, "a value the run holds already");
  // Another provider's placeholder slotted here (an echo of a slot it is not in).
  e = good;
  e.slots.emplace_back(openai_ph, "access");
  refused(e, "for a credential not in it");
  // A refresh token slotted as an access token (it would go to API hosts).
  e = good;
  for (auto& [ph, field] : e.slots)
    if (ph == good.bindings[refresh].placeholder) field = "access";
  refused(e, "not of its kind");
  // An access token given as the refresh token the host is to store.
  e = good;
  e.tokens.refresh = e.bindings[access].real;
  refused(e, "that the exchange did not slot");
  e = good;
  e.tokens.access = "sk-ant-oat01-atokentheexchangeneverbound";
  refused(e, "that the exchange did not slot");
  // Placeholders that would corrupt the write-back: an existing one, a
  // word that stands in the file ("oauth"), one inside another's.
  e = good;
  e.bindings[access].placeholder = x.rig.refresh_ph;
  refused(e, "not a new placeholder");
  e = good;
  e.bindings[access].placeholder = "oauth";
  refused(e, "not a new placeholder");
  e = good;
  e.bindings[access].placeholder = x.rig.refresh_ph.substr(0, x.rig.refresh_ph.size() - 1);
  refused(e, "not a new placeholder");
  e = good;
  e.bindings[access].name = "token response openai.access_token";
  refused(e, "not named for a token response of anthropic");
  e = good;
  e.entry = "openai-codex";
  refused(e, "entry openai-codex is not the endpoint's (anthropic)");
  e = good;
  e.slots.emplace_back(e.bindings[access].placeholder, "type");
  refused(e, "a slot in field");
  // The report itself, untouched, is taken.
  CHECK(x.supervisor.accept(good));
}

TEST_CASE("token exchange in the filter process: renewals are believed at most once a minute per entry") {
  SplitExchange x;
  REQUIRE(x.supervisor.accept(x.renewal()));
  const std::string after_first = x.rig.host_now();
  CHECK(after_first.find("FROMSERVERaccess") != std::string::npos);
  // A second renewal at once (new tokens, the current placeholder): held.
  ExchangeReport again = x.reports.back();
  for (auto& b : again.bindings) {
    b.placeholder = b.placeholder.substr(0, b.placeholder.size() - 8) + "ZZZZZZZZ";
    b.real += "-2";
  }
  for (auto& [ph, field] : again.slots) ph = ph.substr(0, ph.size() - 8) + "ZZZZZZZZ";
  again.tokens.access = *again.tokens.access + "-2";
  again.tokens.refresh = *again.tokens.refresh + "-2";
  REQUIRE(x.supervisor.accept(again));
  CHECK(x.rig.host_now() == after_first);
  REQUIRE(x.rig.held->list().size() == 1);
}

TEST_CASE("token exchange in the filter process: a renewal the supervisor cannot believe is held as a login") {
  SplitExchange x;
  // The filter says renewal, for an entry whose refresh token came from a
  // login inside the jail: the host's file is not written.
  x.rig.table->add_slot(x.rig.refresh_ph, Slot{"anthropic", "refresh"}, Origin::login);
  REQUIRE(x.supervisor.accept(x.renewal()));
  CHECK(x.rig.host_now() == x.rig.host_before);
  REQUIRE(x.rig.held->list().size() == 1);
  CHECK(x.rig.held->list()[0].id == "anthropic");
}

TEST_CASE("token exchange in the filter process: a renewal reported at another spelling of the path is held") {
  SplitExchange x;
  // A filter that says renewal for a path a server may route elsewhere
  // (its response is no renewal's): the host's file is not written.
  ExchangeReport e = x.renewal();
  e.path = "/u/a%5C..%5C..%5Cv1%5Coauth%5Ctoken";
  REQUIRE(x.supervisor.accept(e));
  CHECK(x.rig.host_now() == x.rig.host_before);
  REQUIRE(x.rig.held->list().size() == 1);
  CHECK(x.rig.held->list()[0].id == "anthropic");
}

TEST_CASE("token exchange: Copilot's token GET renews only with the current GitHub-token placeholder in a header") {
  auto table = std::make_shared<Table>();
  std::vector<Provenance> prov;
  auto jail = synthesize_auth(R"({"github-copilot":{"type":"oauth","refresh":"ghu_REALgithubTOKEN0123456789abcdef",)"
                              R"("access":"tid=1;exp=2;sig","expires":1}})",
                              pi_settings(), *table, prov);
  REQUIRE(jail);
  const std::string gh_ph = *json::parse(*jail)->find("github-copilot")->find("refresh")->as_string();
  OAuthExchange ex(table, pi_settings(), "", nullptr);
  // As the filter sees it: the placeholder substituted in the one Authorization field.
  const std::string real = "ghu_REALgithubTOKEN0123456789abcdef";
  auto renew = ex.request_body("api.github.com", "/copilot_internal/v2/token", "", {gh_ph}, {"Bearer " + real});
  REQUIRE(renew);
  CHECK(renew->kind == pj::credentials::ExchangeKind::renewal);
  CHECK(ex.request_body("api.github.com", "/copilot_internal/v2/token", "", {gh_ph}, {"token " + real})->kind ==
        pj::credentials::ExchangeKind::renewal);
  auto other = ex.request_body("api.github.com", "/copilot_internal/v2/token", "", {});
  REQUIRE(other);
  CHECK(other->kind == pj::credentials::ExchangeKind::login);
  // A second Authorization field (a server reads the first or the last),
  // the placeholder in another field, a query, or more than the token: logins.
  for (const auto& c : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"/copilot_internal/v2/token", {"Bearer gho_ATTACKER0123456789", "Bearer " + real}},
           {"/copilot_internal/v2/token", {"Bearer " + real, "Bearer gho_ATTACKER0123456789"}},
           {"/copilot_internal/v2/token", {"Bearer gho_ATTACKER0123456789"}},
           {"/copilot_internal/v2/token", {"Bearer " + real + " x"}},
           {"/copilot_internal/v2/token", {"Basic " + real}},
           {"/copilot_internal/v2/token?token=gho_ATTACKER", {"Bearer " + real}}}) {
    const std::string& path = c.first;  // a structured binding cannot be captured (CAPTURE) in C++20
    CAPTURE(path);
    auto r = ex.request_body("api.github.com", path, "", {gh_ph}, c.second);
    REQUIRE(r);
    CHECK(r->kind == pj::credentials::ExchangeKind::login);
  }
  // The device login's exchange is always a login.
  auto device = ex.request_body("github.com", "/login/oauth/access_token", "grant_type=refresh_token", {gh_ph});
  REQUIRE(device);
  CHECK(device->kind == pj::credentials::ExchangeKind::login);
}

TEST_CASE("token exchange: Copilot's device login gives a GitHub token Pi stores as \"refresh\", bound like one") {
  auto table = std::make_shared<Table>();
  auto held = std::make_shared<HeldLogins>();
  OAuthExchange ex(table, pi_settings(), "", nullptr, held);
  auto out = ex.response_body("github.com", "/login/oauth/access_token", 200, "",
                              R"({"access_token":"ghu_DEVICELOGINgithubTOKEN0123456789","token_type":"bearer"})",
                              pj::credentials::ExchangeKind::login);
  REQUIRE(out);
  const std::string ph = *json::parse(*out)->find("access_token")->as_string();
  CHECK(table->by_placeholder(ph)->hosts ==
        std::vector<BoundHost>{{"api.github.com", 443}, {"github.com", 443}});  // it buys Copilot tokens there
  auto current = table->current_in(Slot{"github-copilot", "refresh"});
  REQUIRE(current);
  CHECK(current->first == ph);
  CHECK(current->second == Origin::login);
  REQUIRE(held->list().size() == 1);
  CHECK(*held->list()[0].tokens.refresh == "ghu_DEVICELOGINgithubTOKEN0123456789");
  CHECK_FALSE(held->list()[0].tokens.access);
  // Its Copilot token GET is a login's too.
  auto next = ex.request_body("api.github.com", "/copilot_internal/v2/token", "", {ph});
  REQUIRE(next);
  CHECK(next->kind == pj::credentials::ExchangeKind::login);
}
