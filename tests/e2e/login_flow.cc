#include "login_flow.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "text.h"

namespace pj::test {

const std::vector<std::string> kLoginHosts = {
    "platform.claude.com",  // Anthropic
    "auth.openai.com",      // OpenAI Codex, Sign in with ChatGPT
    "radius.pi.dev",        // Radius
    "github.com",           // GitHub Copilot's device login
    "api.github.com",       // Copilot's token
    "api.individual.githubcopilot.com",
    "auth.x.ai",      // xAI
    "auth.kimi.com",  // Kimi Code
    "auth.meta.com",
    "api.meta.ai",    // Meta
    "openrouter.ai",  // OpenRouter
};

namespace {

// The providers' login endpoints of Pi 1.4.0 and 1.6.0 (pi-ai
// dist/auth/oauth/*.js), by host and path. Each answers only what a
// real one would answer Pi's requests of a login that the user approves
// at once: a device code is approved before the first poll; an
// authorization code is the test's (conf "code"); a token request
// carrying anything else is refused. Every request line, host,
// Authorization header and body goes to the log. Its argument: the JSON
// of IssuedTokens.
const char* const kLoginStandIn = R"PY(
import json, time, urllib.parse
conf = args[0]
DEVICE = {"device_code": "e2e-device-code", "user_code": "E2E-CODE", "expires_in": 600, "interval": 1}
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
class Handler(StandIn):
    def send(self, code, obj):
        out = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def any(self):
        c = json.load(open(conf))
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        host = (self.headers.get("Host") or "").split(":")[0]
        auth = self.headers.get("Authorization")
        note("%s host=%s auth=%s body=%s\n" % (self.requestline, host, auth, body.replace("\n", " ")))
        try:
            req = json.loads(body) if body.lstrip().startswith("{") else dict(urllib.parse.parse_qsl(body))
        except ValueError:
            req = {}
        t = c["tokens"]
        grant = req.get("grant_type")
        code_ok = grant == "authorization_code" and req.get("code") == c["code"]
        device_ok = grant == DEVICE_GRANT and req.get("device_code") == DEVICE["device_code"]
        def pair(p, **more):
            return dict({"token_type": "Bearer", "access_token": t[p]["access"], "refresh_token": t[p]["refresh"],
                         "expires_in": 3600}, **more)
        route = host + self.path.split("?")[0]
        if route == "platform.claude.com/v1/oauth/token" and code_ok:
            return self.send(200, pair("anthropic"))
        # OpenAI Codex: the browser's code, or the device login's.
        if route == "auth.openai.com/api/accounts/deviceauth/usercode":
            return self.send(200, {"device_auth_id": "e2e-device-auth", "user_code": DEVICE["user_code"], "interval": "1"})
        if route == "auth.openai.com/api/accounts/deviceauth/token" and req.get("device_auth_id") == "e2e-device-auth":
            return self.send(200, {"authorization_code": "e2e-device-auth-code", "code_verifier": "e2e-verifier"})
        if route == "auth.openai.com/oauth/token" and grant == "authorization_code" and \
                req.get("code") in (c["code"], "e2e-device-auth-code"):
            return self.send(200, pair("openai-codex"))
        # Sign in with ChatGPT: the client id the redirect brought.
        if route == "auth.openai.com/api/accounts/oauth/token" and code_ok and req.get("client_id") == c["issued_client"]:
            return self.send(200, pair("openai", id_token="e2e-id-token",
                             scope="openid profile email offline_access resource.invoke chatgpt.tokens.use.direct"))
        if route == "radius.pi.dev/v1/oauth":
            return self.send(200, {"authorizationEndpoint": "https://radius.pi.dev/oauth/authorize"})
        if route == "radius.pi.dev/v1/oauth/device":
            return self.send(200, dict(DEVICE, verification_uri="https://radius.pi.dev/device"))
        if route == "radius.pi.dev/v1/oauth/token" and (code_ok or device_ok):
            return self.send(200, pair("radius", scope="gateway offline_access"))
        # GitHub Copilot: the GitHub token (Pi's "refresh") buys a Copilot token.
        if route == "github.com/login/device/code":
            return self.send(200, dict(DEVICE, verification_uri="https://github.com/login/device"))
        if route == "github.com/login/oauth/access_token" and device_ok:
            return self.send(200, {"access_token": t["github-copilot"]["refresh"], "token_type": "bearer", "scope": "read:user"})
        if route == "api.github.com/copilot_internal/v2/token" and auth == "Bearer " + t["github-copilot"]["refresh"]:
            return self.send(200, {"token": t["github-copilot"]["access"], "expires_at": int(time.time()) + 1800})
        if route == "api.individual.githubcopilot.com/models":
            return self.send(200, {"data": [{"id": "gpt-4o", "model_picker_enabled": True, "policy": {"state": "enabled"},
                                             "capabilities": {"supports": {"tool_calls": True}}}]})
        if route == "auth.x.ai/oauth2/device/code":
            return self.send(200, dict(DEVICE, verification_uri="https://accounts.x.ai/device"))
        if route == "auth.x.ai/oauth2/token" and device_ok:
            return self.send(200, pair("xai"))
        if route == "auth.kimi.com/api/oauth/device_authorization":
            return self.send(200, dict(DEVICE, verification_uri="https://www.kimi.com/device",
                                       verification_uri_complete="https://www.kimi.com/device?user_code=E2E-CODE"))
        if route == "auth.kimi.com/api/oauth/token" and device_ok:
            return self.send(200, pair("kimi-coding"))
        # Meta: the identity token (Pi's "refresh") mints an API key.
        if route == "auth.meta.com/oidc/device/authorization/":
            return self.send(200, dict(DEVICE, verification_uri="https://auth.meta.com/device"))
        if route == "auth.meta.com/oidc/device/token/" and device_ok:
            return self.send(200, {"access_token": t["meta"]["refresh"], "token_type": "Bearer", "expires_in": 3600})
        if route == "api.meta.ai/muse-code/key" and auth == "Bearer " + t["meta"]["refresh"]:
            return self.send(200, {"api_key": t["meta"]["access"]})
        # OpenRouter: the code buys a key.
        if route == "openrouter.ai/api/v1/auth/keys" and req.get("code") == c["code"]:
            return self.send(200, {"key": t["openrouter"]["access"]})
        if grant:
            return self.send(400, {"error": "invalid_grant"})
        self.send(404, {"error": "not here"})
)PY";

// What Pi's TUI shows around a wrapped line: its margin and padding.
std::vector<std::string> screen_lines(const std::string& screen) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < screen.size();) {
    size_t end = screen.find('\n', at);
    if (end == std::string::npos) end = screen.size();
    std::string line = trim(screen.substr(at, end - at));
    line.erase(0, line.find_first_not_of(' '));
    lines.push_back(line);
    at = end + 1;
  }
  return lines;
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

// A token unique to the test: `prefix`, the test's unique number, then
// letters enough for the placeholder's 32 random characters.
std::string token(const std::string& prefix) {
  return prefix + unique_token() + "E2Etoken0123456789abcdefghijklmnopqrstuvwxyz";
}

}  // namespace

IssuedTokens IssuedTokens::make(const std::vector<std::string>& entries) {
  IssuedTokens t{"e2e-code-" + unique_token(), "e2e-client-" + unique_token(), {}};
  for (const auto& e : entries) {
    Pair p{token("e2e-" + e + "-access-"), token("e2e-" + e + "-refresh-")};
    if (e == "anthropic") p = {token("sk-ant-oat01-"), token("sk-ant-ort01-")};
    // Codex's access token is a JWT whose claims name the account (Pi
    // reads it with atob: standard base64 letters only).
    if (e == "openai-codex")
      p.access =
          "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
          "eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjdC1lMmUifX0." +
          token("sig");
    if (e == "github-copilot") p.refresh = token("ghu_");
    if (e == "openrouter") p = {token("sk-or-v1-"), ""};
    t.pairs.emplace_back(e, p);
  }
  return t;
}

const IssuedTokens::Pair& IssuedTokens::of(const std::string& entry) const {
  for (const auto& [e, p] : pairs)
    if (e == entry) return p;
  throw std::runtime_error("no tokens issued for " + entry);
}

std::string IssuedTokens::json() const {
  std::string tokens;
  for (const auto& [e, p] : pairs)
    tokens += (tokens.empty() ? "" : ", ") + json_str(e) + ": {\"access\": " + json_str(p.access) +
              ", \"refresh\": " + json_str(p.refresh) + "}";
  return "{\"code\": " + json_str(code) + ", \"issued_client\": " + json_str(issued_client) + ", \"tokens\": {" +
         tokens + "}}";
}

JailedLogin::JailedLogin(const std::string& prefix, const std::optional<std::string>& auth, const IssuedTokens& issued,
                         const std::vector<std::string>& jail_opts)
    : w("[]", prefix) {
  const std::string d = w.sb.base;
  std::vector<std::string> names;
  for (const auto& h : kLoginHosts) names.push_back("DNS:" + h);
  const auto certs = TestCerts::signed_by_ca(d, "logins.pem", names);
  write_file(d + "/issued.json", issued.json());
  server_ =
      std::make_unique<StandInServer>(d, "logins", certs, kLoginStandIn, std::vector<std::string>{d + "/issued.json"});
  if (auth) write_file(w.agent + "/auth.json", *auth);

  std::string env;
  for (const auto& e : w.env()) env += " '" + e + "'";
  term_ = std::make_unique<Tmux>("env PS1='outer$ '" + env + " bash --norc --noprofile", 240, 60);
  REQUIRE(term_->wait_for("outer$"));
  std::string cmd =
      "cd " + w.sb.ws + " && " + pi_jail() + " --allow-net 127.0.0.1:" + w.port + " --test-upstream-ca " + certs.ca;
  for (const auto& h : kLoginHosts) cmd += " --test-resolve " + h + ":443=127.0.0.1:" + server_->port();
  for (const auto& o : jail_opts) cmd += " '" + o + "'";
  // The line typed never shows what the shell prints when pi-jail ends.
  const std::string token = unique_token();
  term_->type(cmd + " -- pi --provider scripted --model m; echo LOGIN-DONE-$((6*7))-" + token);
  done_ = "LOGIN-DONE-42-" + token;
  REQUIRE_MESSAGE(term_->wait_for("(auto)"), term_->screen());
}

JailedLogin::~JailedLogin() = default;

void JailedLogin::login(const std::string& provider, const std::string& shows) {
  term_->send({"-l", "/login " + provider});
  REQUIRE_MESSAGE(pressed_until(*term_, "Enter", shows), term_->screen());
}

void JailedLogin::pick(const std::string& label, const std::string& shows) {
  for (int i = 0; i < 12 && term_->screen().find("→ " + label) == std::string::npos; ++i) {
    term_->send({"Down"});
    ::usleep(100 * 1000);
  }
  REQUIRE_MESSAGE(term_->screen().find("→ " + label) != std::string::npos, term_->screen());
  term_->send({"Enter"});
  if (!shows.empty()) REQUIRE_MESSAGE(term_->wait_for(shows), term_->screen());
}

void JailedLogin::answer(const std::string& line, const std::string& shows) {
  term_->type(line);
  if (!shows.empty()) REQUIRE_MESSAGE(term_->wait_for(shows), term_->screen());
}

std::string JailedLogin::url(const std::string& start) {
  std::string url;
  bool in = false;
  for (const auto& l : screen_lines(term_->screen())) {
    if (!in && l.starts_with(start)) in = true;
    if (!in) continue;
    if (l.find("click to open") != std::string::npos || l.empty()) break;
    url += l;
  }
  return url;
}

Outcome JailedLogin::browse(const std::string& url) {
  Outcome browser;
  CHECK(eventually([&] {
    browser = run({"/usr/bin/curl", "-sS", "--max-time", "20", url});
    return browser.status != 7;  // 7: nothing listens on the host's port yet
  }));
  return browser;
}

std::string JailedLogin::jail_auth_of(const IssuedTokens& issued, const std::string& entry) {
  // The tokens are in a file of the workspace, never on the command line:
  // the screen shows the line typed.
  const std::string needles = w.sb.ws + "/.e2e-issued-" + unique_token();
  const auto& p = issued.of(entry);
  write_file(needles, p.access + "\n" + (p.refresh.empty() ? p.access : p.refresh) + "\n");
  const std::string mark = unique_token();
  term_->type("!f=\"$PI_CODING_AGENT_DIR/auth.json\"; if grep -qF -f '" + needles +
              "' \"$f\"; then a=real; elif grep -q '\"" + entry + "\"' \"$f\"; then a=other; else a=none; fi; " +
              "echo \"AUTH-$a-$((6*7))-" + mark + "\"");
  std::string answer;
  eventually([&] {
    const std::string s = term_->screen();
    for (const char* a : {"real", "other", "none"})
      if (s.find(std::string("AUTH-") + a + "-42-" + mark) != std::string::npos) answer = a;
    return !answer.empty();
  });
  std::filesystem::remove(needles);
  return answer;
}

bool JailedLogin::logged_in(const std::string& name) {
  // "Logged in to NAME. Credentials saved ..." (or "NAME, but ...", or
  // "NAME (legacy)" in Pi 1.4.0): what follows tells "OpenAI" from
  // "OpenAI Codex".
  return eventually([&] {
    const std::string s = term_->screen();
    for (const char* after : {".", ",", " ("})
      if (s.find("Logged in to " + name + after) != std::string::npos) return true;
    return false;
  });
}

std::string JailedLogin::leave(const std::vector<std::string>& entries, const std::string& reply) {
  term_->send({"C-d"});
  REQUIRE_MESSAGE(term_->wait_for("[y/N]"), term_->screen());
  const std::string question = term_->screen();
  CAPTURE(question);
  for (const auto& e : entries) {
    CAPTURE(e);
    CHECK(question.find("provider \"" + e + "\"") != std::string::npos);
  }
  term_->type(reply);
  REQUIRE_MESSAGE(term_->wait_for(done_), term_->screen());
  // What pi-jail said of the agent dir's write-back: nothing refused but
  // the logins the user refused (a field Pi writes at a login, such as
  // settings.json's deviceId, goes back too).
  const std::string end = term_->screen();
  CAPTURE(end);
  std::string said;  // the screen's lines joined again: a long message wraps
  for (const auto& line : screen_lines(end)) said += line;
  for (size_t at = said.find("pi-jail: "); at != std::string::npos;) {
    const size_t next = said.find("pi-jail: ", at + 1);
    const std::string message = said.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (message.find("not written back") != std::string::npos) {
      CAPTURE(message);
      CHECK(reply != "y");
      CHECK(message.find("auth.json") != std::string::npos);
      CHECK(message.find("you did not agree") != std::string::npos);
    }
    at = next;
  }
  return question;
}

std::string JailedLogin::host_auth() const { return read_file(w.agent + "/auth.json"); }

bool JailedLogin::host_has_auth() const { return exists(w.agent + "/auth.json"); }

unsigned JailedLogin::host_auth_mode() const {
  struct stat st {};
  if (::lstat((w.agent + "/auth.json").c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::vector<std::string> JailedLogin::host_entries() const {
  auto o = run({"/usr/bin/python3", "-c",
                "import json, sys; print('\\n'.join(sorted(json.load(open(sys.argv[1])))), end='')",
                w.agent + "/auth.json"});
  std::vector<std::string> out;
  if (o.status != 0) return {"(not JSON: " + o.err + ")"};
  for (size_t at = 0; at < o.out.size();) {
    size_t end = o.out.find('\n', at);
    if (end == std::string::npos) end = o.out.size();
    out.push_back(o.out.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::string JailedLogin::host_entry(const std::string& entry) const {
  auto o = run({"/usr/bin/python3", "-c",
                "import json, sys; print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2]), sort_keys=True), "
                "end='')",
                w.agent + "/auth.json", entry});
  return o.status == 0 ? o.out : "(not JSON: " + o.err + ")";
}

std::string JailedLogin::host_field(const std::string& entry, const std::string& field) const {
  // Python's JSON reader: the file must be JSON, the entry an object.
  auto o = run({"/usr/bin/python3", "-c",
                "import json, sys; e = json.load(open(sys.argv[1])).get(sys.argv[2]); "
                "print(e.get(sys.argv[3], '(none)') if isinstance(e, dict) else '(no entry)', end='')",
                w.agent + "/auth.json", entry, field});
  return o.status == 0 ? o.out : "(not JSON: " + o.err + ")";
}

std::string JailedLogin::host_setting(const std::string& name) const {
  auto o = run({"/usr/bin/python3", "-c",
                "import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], '(none)'), end='')",
                w.agent + "/settings.json", name});
  return o.status == 0 ? o.out : "(not JSON: " + o.err + ")";
}

std::string param(const std::string& url, const std::string& name) {
  size_t at = url.find("&" + name + "=");
  if (at == std::string::npos) at = url.find("?" + name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 2;
  size_t end = at;
  while (end < url.size() && (std::isalnum(static_cast<unsigned char>(url[end])) || url[end] == '_' ||
                              url[end] == '-' || url[end] == '%' || url[end] == '.'))
    ++end;
  return url.substr(at, end - at);
}

}  // namespace pj::test
