// The real Pi's browser login under pi-jail, in a terminal (pinned and
// newest): /login for Anthropic starts Pi's callback server on the
// jail's 127.0.0.1:53692; pi-jail serves that port on the host's
// loopback while it listens (supervisor/login_callbacks.h), so the test,
// playing the browser, requests http://localhost:53692/callback with the
// state of the authorize URL Pi shows, as Anthropic's redirect would.
// Pi then exchanges the code at its hard-coded token endpoint, which the
// network filter sends to a stand-in (--test-resolve, like the refresh
// test); the login is held for the user's consent at the end, and the
// host's auth.json gets its real tokens when the user says y.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cctype>
#include <string>
#include <vector>

#include "harness.h"
#include "pi_world.h"
#include "stand_in.h"
#include "text.h"

using namespace pj::test;

namespace {

constexpr int kCallbackPort = 53692;  // anthropic.js's CALLBACK_PORT

// Stands in for platform.claude.com's token endpoint: an authorization
// code exchange with the expected code buys the new tokens; anything else
// is refused. Every request line, host and body goes to the log. Its
// argument: a JSON file of the code it expects and the tokens it gives.
const char* const kStandIn = R"PY(
import json
conf = args[0]
class Handler(StandIn):
    def any(self):
        c = json.load(open(conf))
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        note("%s host=%s body=%s\n" % (self.requestline, self.headers.get("Host"), body.replace("\n", " ")))
        out, code = b'{"error":"not here"}', 404
        if self.path.startswith("/v1/oauth/token"):
            req = json.loads(body or "{}")
            if req.get("grant_type") == "authorization_code" and req.get("code") == c["expect_code"]:
                out, code = json.dumps({"token_type": "Bearer", "access_token": c["new_access"],
                    "refresh_token": c["new_refresh"], "expires_in": 28800}).encode(), 200
            else:
                out, code = b'{"error":"invalid_grant"}', 400
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
)PY";

// The authorize URL Pi shows, joined again from the lines the TUI
// wrapped it over (each line's margin and padding cut off).
std::string authorize_url(const std::string& screen) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < screen.size();) {
    size_t end = screen.find('\n', at);
    if (end == std::string::npos) end = screen.size();
    std::string line = trim(screen.substr(at, end - at));
    line.erase(0, line.find_first_not_of(' '));
    lines.push_back(line);
    at = end + 1;
  }
  std::string url;
  bool in = false;
  for (const auto& l : lines) {
    if (!in && l.starts_with("https://claude.ai/oauth/authorize?")) in = true;
    if (!in) continue;
    if (l.find("click to open") != std::string::npos || l.empty()) break;
    url += l;
  }
  return url;
}

// A query parameter's value ([A-Za-z0-9_%.-]: what Pi's URLSearchParams
// writes for a verifier or a redirect URI).
std::string param(const std::string& url, const std::string& name) {
  size_t at = url.find("&" + name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 2;
  size_t end = at;
  while (end < url.size() && (std::isalnum(static_cast<unsigned char>(url[end])) || url[end] == '_' ||
                              url[end] == '-' || url[end] == '%' || url[end] == '.'))
    ++end;
  return url.substr(at, end - at);
}

// Press `key` until the screen shows `text` (Pi ignores keys while its
// start-up is in progress; a guard of 20 tries, not a timing assertion).
bool pressed_until(Tmux& t, const std::string& key, const std::string& text) {
  for (int i = 0; i < 20; ++i) {
    t.send({key});
    for (int j = 0; j < 20; ++j) {
      if (t.screen().find(text) != std::string::npos) return true;
      ::usleep(50 * 1000);
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "the real Pi's Anthropic /login in the jail: the browser's redirect to localhost:53692 reaches it, the code "
    "is exchanged through the filter, and the login replaces the host's only when the user agrees") {
  for (const auto& version : pi_versions()) {
    const std::string& label = version.first;
    const std::string& prefix = version.second;
    CAPTURE(label);
    PiWorld w("[]", prefix);
    const std::string d = w.sb.base;
    const auto certs =
        TestCerts::signed_by_ca(d, "anthropic.pem", {"DNS:platform.claude.com", "DNS:api.anthropic.com"});
    const std::string old_access = "sk-ant-oat01-" + unique_token() + "E2EOLDaccess0123456789abcdefghijklmnopqrstu";
    const std::string old_refresh = "sk-ant-ort01-" + unique_token() + "E2EOLDrefresh0123456789abcdefghijklmnopqrst";
    const std::string new_access = "sk-ant-oat01-" + unique_token() + "E2ELOGINaccess0123456789abcdefghijklmnopqrs";
    const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "E2ELOGINrefresh0123456789abcdefghijklmnopq";
    const std::string code = "e2e-code-" + unique_token();
    const std::string conf = d + "/conf.json";
    write_file(conf, R"({"expect_code":")" + code + R"(","new_access":")" + new_access + R"(","new_refresh":")" +
                         new_refresh + "\"}");
    StandInServer server(d, "anthropic", certs, kStandIn, {conf});
    const std::string& port = server.port();
    // An earlier login, not expired: bound to Anthropic's hosts, so the
    // token endpoint's exchange passes through the credential filter.
    const std::string auth = w.agent + "/auth.json";
    write_file(auth, R"({"anthropic":{"type":"oauth","refresh":")" + old_refresh + R"(","access":")" + old_access +
                         R"(","expires":4102444800000}})");
    REQUIRE_MESSAGE(run({"/usr/bin/curl", "-sS", "--max-time", "5", "http://127.0.0.1:53692/"}).status == 7,
                    "something on this host listens on 127.0.0.1:53692 already");

    std::string env;
    for (const auto& e : w.env()) env += " '" + e + "'";
    Tmux t("env PS1='outer$ '" + env + " bash --norc --noprofile", 240, 60);
    REQUIRE(t.wait_for("outer$"));
    const std::string token = unique_token();
    t.type("cd " + w.sb.ws + " && " + pi_jail() + " --allow-net 127.0.0.1:" + w.port + " --test-upstream-ca " +
           certs.ca + " --test-resolve platform.claude.com:443=127.0.0.1:" + port +
           " --test-resolve api.anthropic.com:443=127.0.0.1:" + port +
           " -- pi --provider scripted --model m; echo LOGIN-DONE-$((6*7))-" + token);
    REQUIRE_MESSAGE(t.wait_for("(auto)"), t.screen());

    // /login, an account, Anthropic, its browser login.
    t.send({"-l", "/login"});
    REQUIRE_MESSAGE(pressed_until(t, "Enter", "Select authentication method"), t.screen());
    t.send({"Enter"});
    REQUIRE_MESSAGE(t.wait_for("Select provider"), t.screen());
    t.send({"-l", "Anthropic"});
    REQUIRE_MESSAGE(t.wait_for("> Anthropic"), t.screen());
    t.send({"Enter"});
    REQUIRE_MESSAGE(t.wait_for("Browser login"), t.screen());
    t.send({"Enter"});
    REQUIRE_MESSAGE(t.wait_for("paste the authorization code / redirect URL here"), t.screen());

    // Pi's callback server took its port in the jail: the redirect URI
    // names it (not the fallback port the kernel would pick).
    const std::string screen = t.screen();
    const std::string url = authorize_url(screen);
    CAPTURE(screen);
    CAPTURE(url);
    CHECK(param(url, "redirect_uri") == "http%3A%2F%2Flocalhost%3A53692%2Fcallback");
    const std::string state = param(url, "state");
    REQUIRE(state.size() >= 32);

    // The browser, redirected by Anthropic: once pi-jail serves the port
    // on the host (a few times a second), Pi answers it.
    const std::string callback =
        "http://localhost:" + std::to_string(kCallbackPort) + "/callback?code=" + code + "&state=" + state;
    Outcome browser;
    CHECK(eventually([&] {
      browser = run({"/usr/bin/curl", "-sS", "--max-time", "20", callback});
      return browser.status != 7;  // 7: nothing listens on the host's port yet
    }));
    CAPTURE(browser.err);
    CHECK(browser.status == 0);
    CHECK(browser.out.find("Signed in to Anthropic") != std::string::npos);
    REQUIRE_MESSAGE(t.wait_for("Logged in to Anthropic"), t.screen());

    // The code went to the token endpoint through the filter, with the
    // redirect URI of the callback that brought it.
    const std::string seen = server.log();
    CAPTURE(seen);
    CHECK(seen.find("POST /v1/oauth/token HTTP/1.1 host=platform.claude.com") != std::string::npos);
    CHECK(seen.find(code) != std::string::npos);
    CHECK(seen.find("localhost:53692/callback") != std::string::npos);

    // Pi leaves; pi-jail asks whether the jail's login replaces the host's.
    t.send({"C-d"});
    REQUIRE_MESSAGE(t.wait_for("[y/N]"), t.screen());
    CHECK(t.screen().find("provider \"anthropic\"") != std::string::npos);
    t.type("y");
    REQUIRE_MESSAGE(t.wait_for("LOGIN-DONE-42-" + token), t.screen());
    const std::string host = read_file(auth);
    CAPTURE(host);
    CHECK(host.find(new_access) != std::string::npos);
    CHECK(host.find(new_refresh) != std::string::npos);
    CHECK(host.find(old_access) == std::string::npos);
    // Pi saw placeholders only: the real new tokens never reached its screen.
    CHECK(t.screen().find(new_access.substr(13)) == std::string::npos);
    // The run is over: the host's port is free again.
    CHECK(run({"/usr/bin/curl", "-sS", "--max-time", "5", "http://127.0.0.1:53692/"}).status == 7);
  }
}
