// Every login of the real Pi (pinned and newest) under pi-jail, in a
// terminal, against stand-ins (login_flow.h), but Anthropic's browser
// login (login_callback_e2e_test.cc). The logins of Pi 1.4.0 and 1.6.0
// (pi-ai dist/auth/oauth/*.js; the same flows in both):
//
//   browser, fixed port  OpenAI Codex (1455), Sign in with ChatGPT (1455),
//                        Radius (1456), Anthropic (53692)
//   browser, any port    OpenRouter: the kernel picks the port in the
//                        jail; pi-jail cannot know it, the user pastes
//                        the redirect URL
//   device code          OpenAI Codex, Radius, GitHub Copilot (needs
//                        github.com), xAI, Kimi Code, Meta
//   pasted code          Anthropic's copy-code login (no network but the
//                        token endpoint: as its browser login's)
//   API key              every provider with a key: typed into Pi
//
// The host's auth.json holds an earlier login of each provider logged in
// to, but for a first login (no entry, or no auth.json at all: an API key
// and Anthropic's copy-code login); Pi sees placeholders only, each login
// completes in the jail, and the host's file gets the new tokens only when
// the user answers pi-jail's question with y.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "login_flow.h"
#include "pi_world.h"

using namespace pj::test;

namespace {

// An earlier OAuth login of `entry` in the host's auth.json, not expired
// (OpenRouter's: a key that never expires, no refresh token).
std::string earlier(const std::string& entry, const std::string& more = "") {
  const std::string old = "e2e-old-" + entry + "-" + unique_token() + "E2Eold0123456789abcdefghijklmnopqrstuvwxyz";
  if (entry == "openrouter")
    return R"("openrouter": {"type": "oauth", "access": "sk-or-v1-)" + old +
           R"(", "refresh": "", "expires": 9007199254740991})";
  return json_str(entry) + R"(: {"type": "oauth", "access": ")" + old + R"(-a", "refresh": ")" + old +
         R"(-r", "expires": 4102444800000)" + more + "}";
}

// The host's auth.json of earlier logins of `entries`.
std::string earlier_logins(const std::vector<std::string>& entries) {
  std::string out;
  for (const auto& e : entries) {
    std::string more;
    if (e == "openai-codex") more = R"(, "accountId": "acct-old")";
    if (e == "openai") more = R"(, "clientId": "e2e-old-client", "scopes": ["chatgpt.tokens.use.direct"])";
    out += (out.empty() ? "{" : ", ") + earlier(e, more);
  }
  return out + "}";
}

// The host's auth.json holds each of `entries`' new tokens in that
// entry, where Pi reads them.
void check_host_has(const JailedLogin& j, const IssuedTokens& issued, const std::vector<std::string>& entries) {
  const std::string host = j.host_auth();
  CAPTURE(host);
  for (const auto& e : entries) {
    CAPTURE(e);
    const auto& p = issued.of(e);
    CHECK(j.host_field(e, "access") == p.access);
    CHECK(j.host_field(e, "refresh") == p.refresh);
    CHECK(j.host_field(e, "type") == "oauth");
  }
}

// After a Radius login Pi offers to add Radius's MCP server to its agent
// dir (a fresh one has none): no.
void decline_radius_mcp(JailedLogin& j) {
  REQUIRE_MESSAGE(eventually([&] { return j.screen().find("Configure Radius MCP") != std::string::npos; }), j.screen());
  j.pick("No", "");
  REQUIRE_MESSAGE(eventually([&] { return j.screen().find("Configure Radius MCP") == std::string::npos; }), j.screen());
}

// Anthropic's copy-code login: the user pastes the code#state the page
// shows; the exchange names Anthropic's page as redirect URI.
void anthropic_copy_code_login(JailedLogin& j, const IssuedTokens& issued) {
  j.login("anthropic", "Select authentication method for Anthropic");
  j.pick("Sign in with an account", "Select Anthropic login method");
  j.pick("Copy code login", "Paste the code Anthropic shows");
  const std::string url = j.url("https://claude.ai/oauth/authorize?");
  CAPTURE(url);
  j.answer(issued.code + "#" + param(url, "state"), "Logged in to Anthropic");
}

// Pi never showed a real token of `entries` (it saw placeholders).
void check_screen_has_none(JailedLogin& j, const IssuedTokens& issued, const std::vector<std::string>& entries) {
  const std::string screen = j.screen();
  for (const auto& e : entries) {
    CAPTURE(e);
    CHECK(screen.find(issued.of(e).access) == std::string::npos);
  }
}

}  // namespace

TEST_CASE(
    "the real Pi's browser logins in the jail: OpenAI Codex and Sign in with ChatGPT on localhost:1455 and "
    "Radius on 127.0.0.1:1456 reach Pi through the ports pi-jail serves, OpenRouter's pasted redirect URL "
    "works, and the host's auth.json gets the new tokens when the user says y") {
  const std::vector<std::string> entries{"openai-codex", "openai", "radius", "openrouter"};
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const auto issued = IssuedTokens::make(entries);
    for (const char* port : {"1455", "1456"})
      REQUIRE_MESSAGE(
          run({"/usr/bin/curl", "-sS", "--max-time", "5", std::string("http://127.0.0.1:") + port + "/"}).status == 7,
          "something on this host listens on 127.0.0.1:" << port << " already");
    JailedLogin j(prefix, earlier_logins(entries), issued);

    // OpenAI Codex, its browser login: Pi listens on the jail's 1455.
    j.login("openai-codex", "Select OpenAI Codex login method");
    j.pick("Browser login", "paste the authorization code / redirect URL here");
    std::string url = j.url("https://auth.openai.com/oauth/authorize?");
    CAPTURE(url);
    CHECK(param(url, "redirect_uri") == "http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback");
    Outcome browser =
        j.browse("http://localhost:1455/auth/callback?code=" + issued.code + "&state=" + param(url, "state"));
    CAPTURE(browser.err);
    CHECK(browser.status == 0);
    CHECK(browser.out.find("Signed in to OpenAI") != std::string::npos);
    REQUIRE_MESSAGE(j.logged_in("OpenAI Codex"), j.screen());

    // Sign in with ChatGPT: 1455 again, once Codex's server closed; the
    // redirect brings the client id OpenAI issued.
    j.login("openai", "Select authentication method for OpenAI");
    j.pick("Sign in with ChatGPT", "paste the final redirect URL here");
    url = j.url("https://auth.openai.com/api/accounts/authorize?");
    CAPTURE(url);
    CHECK(param(url, "redirect_uri") == "http%3A%2F%2F127.0.0.1%3A1455%2Fauth%2Fcallback");
    // The installation's id, which Pi made for this login (the host's
    // settings.json has none) and keeps in settings.json.
    const std::string host_id = param(url, "ext_agent_host_id");
    CHECK(host_id.starts_with("urn%3Auuid%3A"));
    browser = j.browse("http://127.0.0.1:1455/auth/callback?code=" + issued.code + "&state=" + param(url, "state") +
                       "&client_id=" + issued.issued_client);
    CAPTURE(browser.err);
    CHECK(browser.status == 0);
    CHECK(browser.out.find("ChatGPT authentication completed") != std::string::npos);
    REQUIRE_MESSAGE(j.logged_in("OpenAI"), j.screen());

    // Radius, its browser sign-in (1456): the callback itself exchanges
    // the code before it answers the browser.
    j.login("radius", "Select authentication method for Radius");
    j.pick("Sign in with an account", "Sign in to Radius");
    j.pick("Sign in with browser", "https://radius.pi.dev/oauth/authorize?");
    url = j.url("https://radius.pi.dev/oauth/authorize?");
    CAPTURE(url);
    CHECK(param(url, "redirect_uri") == "http%3A%2F%2F127.0.0.1%3A1456%2Foauth%2Fcallback");
    browser = j.browse("http://127.0.0.1:1456/oauth/callback?code=" + issued.code + "&state=" + param(url, "state"));
    CAPTURE(browser.err);
    CHECK(browser.status == 0);
    CHECK(browser.out.find("Signed in to Radius") != std::string::npos);
    REQUIRE_MESSAGE(j.logged_in("Radius"), j.screen());
    decline_radius_mcp(j);

    // OpenRouter: the kernel picks the callback's port in the jail, which
    // pi-jail does not serve; the user pastes the URL the browser could
    // not load.
    j.login("openrouter", "Select authentication method for OpenRouter");
    j.pick("Sign in with OpenRouter", "paste the authorization code / redirect URL here");
    url = j.url("https://openrouter.ai/auth?");
    CAPTURE(url);
    std::string callback = param(url, "callback_url");
    for (auto [from, to] : {std::pair{"%3A", ":"}, {"%2F", "/"}})
      for (size_t at; (at = callback.find(from)) != std::string::npos;) callback.replace(at, 3, to);
    CHECK(callback.starts_with("http://127.0.0.1:"));
    j.answer(callback + "?code=" + issued.code, "Logged in to OpenRouter");

    // Every code went to its token endpoint through the filter.
    const std::string seen = j.seen();
    CAPTURE(seen);
    CHECK(seen.find("POST /oauth/token HTTP/1.1 host=auth.openai.com") != std::string::npos);
    CHECK(seen.find("POST /api/accounts/oauth/token HTTP/1.1 host=auth.openai.com") != std::string::npos);
    CHECK(seen.find("POST /v1/oauth/token HTTP/1.1 host=radius.pi.dev") != std::string::npos);
    CHECK(seen.find("POST /api/v1/auth/keys HTTP/1.1 host=openrouter.ai") != std::string::npos);
    check_screen_has_none(j, issued, entries);

    j.leave(entries, "y");
    check_host_has(j, issued, entries);
    // The host's next ChatGPT login is the same installation's.
    CHECK("urn%3Auuid%3A" + j.host_setting("deviceId") == host_id);
  }
}

TEST_CASE(
    "the real Pi's device-code logins in the jail (OpenAI Codex, Radius, GitHub Copilot, xAI, Kimi Code, Meta), "
    "Anthropic's copy-code login and an API key typed into Pi complete, and the host's auth.json gets them when "
    "the user says y") {
  const std::vector<std::string> entries{"openai-codex", "radius", "github-copilot", "xai",
                                         "kimi-coding",  "meta",   "anthropic"};
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const auto issued = IssuedTokens::make(entries);
    // Copilot's device login is at github.com, which the pi profile does
    // not allow (it serves every repository besides).
    JailedLogin j(prefix, earlier_logins(entries), issued, {"--allow-net", "github.com:443"});

    j.login("openai-codex", "Select OpenAI Codex login method");
    j.pick("Device code login", "");
    REQUIRE_MESSAGE(j.logged_in("OpenAI Codex"), j.screen());

    j.login("radius", "Select authentication method for Radius");
    j.pick("Sign in with an account", "Sign in to Radius");
    j.pick("Sign in with device code", "");
    REQUIRE_MESSAGE(j.logged_in("Radius"), j.screen());
    decline_radius_mcp(j);

    // Copilot asks for a GitHub Enterprise domain first: none.
    j.login("github-copilot", "Select authentication method for GitHub Copilot");
    j.pick("Sign in with an account", "GitHub Enterprise URL/domain");
    j.answer("", "");
    REQUIRE_MESSAGE(j.logged_in("GitHub Copilot"), j.screen());

    // One menu choice each; the stand-in approves the device code at once.
    struct OneChoice {
      const char *entry, *menu, *choice, *shown;
    };
    for (const OneChoice& l : {OneChoice{"xai", "xAI", "Sign in with SuperGrok or X Premium", "xAI"},
                               OneChoice{"kimi-coding", "Kimi", "Sign in with Kimi Code", "Kimi For Coding"},
                               OneChoice{"meta", "Meta", "Sign in with Meta", "Meta"}}) {
      j.login(l.entry, std::string("Select authentication method for ") + l.menu);
      j.pick(l.choice, "");
      REQUIRE_MESSAGE(j.logged_in(l.shown), j.screen());
    }

    anthropic_copy_code_login(j, issued);

    // An API key typed into Pi: nothing goes out, the key is a login too.
    const std::string key = "gsk_e2e" + unique_token() + "E2EtypedKey0123456789abcdefghijklmnopqrstuvwxyz";
    j.login("groq", "Enter Groq API key");
    j.answer(key, "Saved API key for Groq");

    const std::string seen = j.seen();
    CAPTURE(seen);
    CHECK(seen.find("\"redirect_uri\":\"https://platform.claude.com/oauth/code/callback\"") != std::string::npos);
    // Each asked for a device code, then polled for its tokens (Copilot
    // and Meta: then bought the access token with them).
    for (const char* request :
         {"POST /api/accounts/deviceauth/usercode HTTP/1.1 host=auth.openai.com",
          "POST /api/accounts/deviceauth/token HTTP/1.1 host=auth.openai.com",
          "POST /v1/oauth/device HTTP/1.1 host=radius.pi.dev", "POST /login/device/code HTTP/1.1 host=github.com",
          "POST /login/oauth/access_token HTTP/1.1 host=github.com",
          "GET /copilot_internal/v2/token HTTP/1.1 host=api.github.com",
          "POST /oauth2/device/code HTTP/1.1 host=auth.x.ai", "POST /oauth2/token HTTP/1.1 host=auth.x.ai",
          "POST /api/oauth/device_authorization HTTP/1.1 host=auth.kimi.com",
          "POST /api/oauth/token HTTP/1.1 host=auth.kimi.com",
          "POST /oidc/device/authorization/ HTTP/1.1 host=auth.meta.com",
          "POST /oidc/device/token/ HTTP/1.1 host=auth.meta.com", "POST /muse-code/key HTTP/1.1 host=api.meta.ai"}) {
      CAPTURE(request);
      CHECK(seen.find(request) != std::string::npos);
    }
    check_screen_has_none(j, issued, entries);

    std::vector<std::string> asked = entries;
    asked.push_back("groq");
    j.leave(asked, "y");
    check_host_has(j, issued, entries);
    CHECK(j.host_field("groq", "key") == key);
    // Meta's minted key expires when Pi says (now + 24 hours: meta.js
    // API_KEY_LIFETIME_MS), not when the identity token does.
    const double meta_expires = std::stod(j.host_field("meta", "expires"));
    const double now_ms = static_cast<double>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    CHECK(meta_expires > now_ms + 23 * 3600e3);
    CHECK(meta_expires < now_ms + 24 * 3600e3 + 60e3);
  }
}

TEST_CASE(
    "a login in the jail that the user refuses leaves the host's auth.json as it was: xAI's device login and an "
    "OpenAI API key typed into Pi, answered n") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const auto issued = IssuedTokens::make({"xai"});
    const std::string before = earlier_logins({"xai"});
    JailedLogin j(prefix, before, issued);

    j.login("xai", "Select authentication method for xAI");
    j.pick("Sign in with SuperGrok or X Premium", "");
    REQUIRE_MESSAGE(j.logged_in("xAI"), j.screen());

    const std::string key = "sk-proj-e2e" + unique_token() + "E2EtypedKey0123456789abcdefghijklmnopqrstuvwxyz";
    j.login("openai", "Select authentication method for OpenAI");
    j.pick("Sign in with an API key", "Enter OpenAI API key");
    j.answer(key, "Saved API key for OpenAI");

    j.leave({"xai", "openai"}, "n");
    const std::string host = j.host_auth();
    CAPTURE(host);
    CHECK(host == before);
    CHECK(host.find(key) == std::string::npos);
  }
}

// A first login: the host has never logged in to the provider (no entry
// in its auth.json, or no auth.json at all). Groq's API key typed into
// Pi, and Anthropic's copy-code login, whose token endpoint nothing of the
// host's is bound to when the run starts: the filter intercepts it all the
// same, so Pi in the jail holds placeholders, never the tokens. Answered y
// and n.
TEST_CASE(
    "a first login in the jail of a provider the host's auth.json has no entry for (or with no auth.json at all), "
    "an API key and an OAuth login: Pi inside holds placeholders for the OAuth tokens; on y the host's file gains "
    "exactly those entries, mode 0600, the rest as it was; on n it stays byte for byte as it was, or absent") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const std::string others = earlier_logins({"xai"});
    for (const bool had_file : {true, false})
      for (const std::string reply : {"y", "n"}) {
        CAPTURE(had_file);
        CAPTURE(reply);
        const auto issued = IssuedTokens::make({"anthropic"});
        JailedLogin j(prefix, had_file ? std::optional<std::string>(others) : std::nullopt, issued);
        const std::string xai_before = had_file ? j.host_entry("xai") : "";

        const std::string key = "gsk_e2e" + unique_token() + "E2EfirstKey0123456789abcdefghijklmnopqrstuvwxyz";
        j.login("groq", "Enter Groq API key");
        j.answer(key, "Saved API key for Groq");

        anthropic_copy_code_login(j, issued);
        CHECK(j.seen().find("POST /v1/oauth/token HTTP/1.1 host=platform.claude.com") != std::string::npos);
        // Pi stored the login, as placeholders.
        CHECK(j.jail_auth_of(issued, "anthropic") == "other");
        check_screen_has_none(j, issued, {"anthropic"});

        j.leave({"groq", "anthropic"}, reply);
        if (reply == "n") {
          if (had_file)
            CHECK(j.host_auth() == others);
          else
            CHECK_FALSE(j.host_has_auth());
          continue;
        }
        REQUIRE(j.host_has_auth());
        CHECK(j.host_field("groq", "key") == key);
        CHECK(j.host_field("groq", "type") == "api_key");
        check_host_has(j, issued, {"anthropic"});
        CHECK(j.host_auth_mode() == 0600);
        const std::vector<std::string> want = had_file ? std::vector<std::string>{"anthropic", "groq", "xai"}
                                                       : std::vector<std::string>{"anthropic", "groq"};
        CHECK(j.host_entries() == want);
        if (had_file) CHECK(j.host_entry("xai") == xai_before);
      }
  }
}
