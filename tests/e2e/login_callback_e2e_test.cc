// The real Pi's browser login under pi-jail, in a terminal (pinned and
// newest): /login for Anthropic starts Pi's callback server on the
// jail's 127.0.0.1:53692; pi-jail serves that port on the host's
// loopback while it listens (supervisor/login_callbacks.h), so the test,
// playing the browser, requests http://localhost:53692/callback with the
// state of the authorize URL Pi shows, as Anthropic's redirect would.
// Pi then exchanges the code at its hard-coded token endpoint, which the
// network filter sends to a stand-in (--test-resolve, like the refresh
// test); the login is held for the user's consent at the end, and the
// host's auth.json gets its real tokens when the user says y. The other
// logins: login_flows_e2e_test.cc.
#include <doctest/doctest.h>

#include <string>

#include "harness.h"
#include "login_flow.h"
#include "pi_world.h"

using namespace pj::test;

TEST_CASE(
    "the real Pi's Anthropic /login in the jail: the browser's redirect to localhost:53692 reaches it, the code "
    "is exchanged through the filter, and the login replaces the host's only when the user agrees") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const auto issued = IssuedTokens::make({"anthropic"});
    const std::string& new_access = issued.of("anthropic").access;
    const std::string& new_refresh = issued.of("anthropic").refresh;
    const std::string old_access = "sk-ant-oat01-" + unique_token() + "E2EOLDaccess0123456789abcdefghijklmnopqrstu";
    const std::string old_refresh = "sk-ant-ort01-" + unique_token() + "E2EOLDrefresh0123456789abcdefghijklmnopqrst";
    REQUIRE_MESSAGE(run({"/usr/bin/curl", "-sS", "--max-time", "5", "http://127.0.0.1:53692/"}).status == 7,
                    "something on this host listens on 127.0.0.1:53692 already");
    // An earlier login, not expired: bound to Anthropic's hosts, so the
    // token endpoint's exchange passes through the credential filter.
    JailedLogin j(prefix,
                  R"({"anthropic":{"type":"oauth","refresh":")" + old_refresh + R"(","access":")" + old_access +
                      R"(","expires":4102444800000}})",
                  issued);

    // /login anthropic, an account, its browser login.
    j.login("anthropic", "Select authentication method for Anthropic");
    j.pick("Sign in with an account", "Select Anthropic login method");
    j.pick("Browser login", "paste the authorization code / redirect URL here");

    // Pi's callback server took its port in the jail: the redirect URI
    // names it (not the fallback port the kernel would pick).
    const std::string url = j.url("https://claude.ai/oauth/authorize?");
    CAPTURE(url);
    CHECK(param(url, "redirect_uri") == "http%3A%2F%2Flocalhost%3A53692%2Fcallback");
    const std::string state = param(url, "state");
    REQUIRE(state.size() >= 32);

    // The browser, redirected by Anthropic: once pi-jail serves the port
    // on the host (a few times a second), Pi answers it.
    const Outcome browser = j.browse("http://localhost:53692/callback?code=" + issued.code + "&state=" + state);
    CAPTURE(browser.err);
    CHECK(browser.status == 0);
    CHECK(browser.out.find("Signed in to Anthropic") != std::string::npos);
    REQUIRE_MESSAGE(j.logged_in("Anthropic"), j.screen());

    // The code went to the token endpoint through the filter, with the
    // redirect URI of the callback that brought it.
    const std::string seen = j.seen();
    CAPTURE(seen);
    CHECK(seen.find("POST /v1/oauth/token HTTP/1.1 host=platform.claude.com") != std::string::npos);
    CHECK(seen.find(issued.code) != std::string::npos);
    CHECK(seen.find("localhost:53692/callback") != std::string::npos);

    // Pi leaves; pi-jail asks whether the jail's login replaces the host's.
    j.leave({"anthropic"}, "y");
    const std::string host = j.host_auth();
    CAPTURE(host);
    CHECK(host.find(new_access) != std::string::npos);
    CHECK(host.find(new_refresh) != std::string::npos);
    CHECK(host.find(old_access) == std::string::npos);
    // Pi saw placeholders only: the real new tokens never reached its screen.
    CHECK(j.screen().find(new_access.substr(13)) == std::string::npos);
    // The run is over: the host's port is free again.
    CHECK(run({"/usr/bin/curl", "-sS", "--max-time", "5", "http://127.0.0.1:53692/"}).status == 7);
  }
}
