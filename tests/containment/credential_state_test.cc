// Model credentials never enter the jail, seen from inside a
// real jail: the environment, /proc/self/environ and Pi's auth.json hold
// placeholders only; what the jail leaves in auth.json goes back to the
// host with the real values; signed credentials and project binds are
// refused. (The substitution on the wire is the network filter's, tested
// with the TLS stand-in server.)
#include <doctest/doctest.h>

#include <filesystem>
#include <cctype>

#include "harness.h"
#include "stand_in.h"

using namespace pj::test;

namespace {

// The first `prefix` followed by at least one of [A-Za-z0-9] in `text`
// from `from`, with those characters; "" when there is none. (No regular
// expressions: GCC 12's -Wmaybe-uninitialized inside <regex> fails the
// sanitizer build.)
std::string token_after(const std::string& text, const std::string& prefix, size_t from = 0, size_t* end = nullptr) {
  for (size_t at = text.find(prefix, from); at != std::string::npos; at = text.find(prefix, at + 1)) {
    size_t e = at + prefix.size();
    while (e < text.size() && std::isalnum(static_cast<unsigned char>(text[e]))) ++e;
    if (e > at + prefix.size()) {
      if (end) *end = e;
      return text.substr(at, e - at);
    }
  }
  return "";
}

const std::string kKey = "sk-ant-api03-" + unique_token() + "KEYkeyKEYkeyKEYkeyKEYkey0123456789abcdefghij";
const std::string kAccess = "sk-ant-oat01-" + unique_token() + "ACCESSaccessACCESSaccess0123456789abcdefghij";
const std::string kRefresh = "sk-ant-ort01-" + unique_token() + "REFRESHrefreshREFRESHrefresh0123456789abcdefg";

// pi-jail -w ws [extra] -- /bin/sh -c script, from ws, HOME=home, the
// caller's key in the environment, the user's operator file in home.
Outcome jail_sh(const Sandbox& sb, const std::string& script, const std::vector<std::string>& extra = {},
                std::vector<std::string> env = {}) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  env.push_back("HOME=" + sb.home);
  env.push_back("XDG_CONFIG_HOME=" + sb.home + "/.config");
  env.push_back("ANTHROPIC_API_KEY=" + kKey);
  return run(argv, env);
}

void host_auth(const Sandbox& sb) {
  std::filesystem::create_directories(sb.home + "/.pi/agent");
  write_file(sb.home + "/.pi/agent/auth.json", R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh +
                                                   R"(","access":")" + kAccess + R"(","expires":1767225600000}})");
  std::filesystem::permissions(sb.home + "/.pi/agent/auth.json",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

bool holds_secret(const std::string& text) {
  for (const auto& s : {kKey, kAccess, kRefresh})
    if (text.find(s.substr(13, 24)) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("inside the jail only placeholders: env, /proc/self/environ, Pi's auth.json; the report names bindings") {
  Sandbox sb;
  host_auth(sb);
  const std::string report = sb.outside + "/report.json";
  auto o = jail_sh(sb,
                   "env; tr '\\0' '\\n' < /proc/self/environ; cat $HOME/.pi/agent/auth.json; "
                   // The needle split by "": the command line (in the report) must not hold it either.
                   "grep -rl " +
                       kKey.substr(13, 12) + "\"\"" + kKey.substr(25, 12) +
                       " $HOME /tmp /proc/self/environ . 2>/dev/null; echo done",
                   {"--report", report});
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  CHECK_FALSE(holds_secret(o.out));
  CHECK_FALSE(holds_secret(o.err));
  // The placeholders keep the provider's prefix and the real length.
  const std::string env_key = token_after(o.out, "ANTHROPIC_API_KEY=sk-ant-api03-");
  REQUIRE(!env_key.empty());
  CHECK(env_key.size() - std::string("ANTHROPIC_API_KEY=").size() == kKey.size());
  size_t end = 0;
  CHECK(!token_after(o.out, "\"access\": \"sk-ant-oat01-", 0, &end).empty());
  CHECK(o.out.substr(end, 1) == "\"");
  CHECK(!token_after(o.out, "\"refresh\": \"sk-ant-ort01-", 0, &end).empty());
  CHECK(o.out.substr(end, 1) == "\"");
  CHECK(o.out.find("\"expires\": 1767225600000") != std::string::npos);
  // The host's file is untouched; the report lists each binding, no secret.
  CHECK(read_file(sb.home + "/.pi/agent/auth.json").find(kRefresh) != std::string::npos);
  const std::string text = read_file(report);
  CHECK_FALSE(holds_secret(text));
  CHECK(text.find("\"name\": \"ANTHROPIC_API_KEY\"") != std::string::npos);
  CHECK(text.find("\"name\": \"auth.json anthropic.refresh\"") != std::string::npos);
  CHECK(text.find("\"platform.claude.com:443\"") != std::string::npos);
  auto v = validate_report(report);
  CAPTURE(v.out);
  CAPTURE(v.err);
  CHECK(v.status == 0);
}

TEST_CASE("what the jail leaves in auth.json goes back with the real values, never a placeholder") {
  Sandbox sb;
  host_auth(sb);
  // Pi rewrites the file (here: a later expiry) with the placeholders it holds.
  auto o = jail_sh(sb,
                   "f=$HOME/.pi/agent/auth.json; grep -o 'sk-ant-o[ar]t01-[A-Za-z0-9]*' $f; "
                   "sed 's/1767225600000/1767229200000/' $f > $f.new && mv $f.new $f && echo rewritten");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("rewritten") != std::string::npos);
  const std::string host = read_file(sb.home + "/.pi/agent/auth.json");
  CHECK(host.find("1767229200000") != std::string::npos);  // the jail's data change applied
  CHECK(host.find(kAccess) != std::string::npos);
  CHECK(host.find(kRefresh) != std::string::npos);
  size_t placeholders = 0;
  for (const char* prefix : {"sk-ant-oat01-", "sk-ant-ort01-"})
    for (size_t from = 0, end = 0;; from = end) {
      std::string t = token_after(o.out, prefix, from, &end);
      if (t.empty()) break;
      ++placeholders;
      CHECK(host.find(t) == std::string::npos);  // no placeholder reached the host
    }
  CHECK(placeholders == 2);
}

TEST_CASE("a signed credential an operator passes is refused (125) unless passed through; a project binds nothing") {
  Sandbox sb;
  std::filesystem::create_directories(sb.home + "/.config/pi-jail");
  write_file(sb.home + "/.config/pi-jail/policy.toml", "[env]\npass = [\"AWS_ACCESS_KEY_ID\"]\n");
  auto refused = jail_sh(sb, "echo ran", {}, {"AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CHECK(refused.status == 125);
  CHECK(refused.out.find("ran") == std::string::npos);
  CHECK(refused.err.find("AWS_ACCESS_KEY_ID") != std::string::npos);
  CHECK(refused.err.find("pass_through") != std::string::npos);
  CHECK(refused.err.find("AKIAREALVALUE0001") == std::string::npos);

  write_file(sb.home + "/.config/pi-jail/policy.toml",
             "[env]\npass = [\"AWS_ACCESS_KEY_ID\"]\n[credentials]\npass_through = [\"AWS_ACCESS_KEY_ID\"]\n");
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[credentials]\nbind = { anthropic = [\"evil.example\"] }\n");
  auto passed = jail_sh(sb, "echo $AWS_ACCESS_KEY_ID", {}, {"AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CAPTURE(passed.err);
  CHECK(passed.status == 0);
  CHECK(trim(passed.out) == "AKIAREALVALUE0001");
  CHECK(passed.err.find(".pi/jail.toml:2:23") != std::string::npos);
  CHECK(passed.err.find("credentials are bound to hosts by operators") != std::string::npos);
  auto explain = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain"},
                     {"HOME=" + sb.home, "XDG_CONFIG_HOME=" + sb.home + "/.config", "ANTHROPIC_API_KEY=" + kKey,
                      "AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CHECK(explain.out.find("ANTHROPIC_API_KEY: placeholder sk-ant-api03-<random> -> api.anthropic.com:443 (the "
                         "profile's provider table)") != std::string::npos);
  CHECK(explain.out.find("AWS_ACCESS_KEY_ID: pass-through") != std::string::npos);
  CHECK(explain.out.find("evil.example:443 (") == std::string::npos);
  CHECK_FALSE(holds_secret(explain.out + explain.err));
  CHECK(explain.out.find("AKIAREALVALUE0001") == std::string::npos);
}

namespace {

// A stand-in for Anthropic's token endpoint and API: POST
// /v1/oauth/token answers, gzip-compressed, new tokens when the body holds
// the expected real refresh token (else 400); any other request is
// answered with the Authorization it carried. Every request line,
// Authorization and body goes to the log. POST /v1/oauth/token with
// grant_type authorization_code and any code is a login: it answers new
// tokens too. Its argument: a JSON file of the tokens it expects and gives.
const char* const kTokenHandler = R"PY(
import gzip, json, re, urllib.parse
conf = args[0]
class Handler(StandIn):
    def any(self):
        c = json.load(open(conf))
        n = int(self.headers.get("Content-Length") or 0)
        if self.command == "GET" and self.path.startswith("/ignore-body"): n = 0  # its body reads as a request
        body = self.rfile.read(n).decode() if n else ""
        note("%s auth=%s body=%s\n" % (self.requestline, self.headers.get("Authorization"), body))
        # As lenient routers read a path (Rails: repeated and trailing
        # slashes), and a form as most parsers do (keys decoded, the last
        # of a repeated one wins).
        # The query's parameters win over the body's (Spring, Flask's
        # request.values).
        path, _, query = self.path.partition("?")
        path = re.sub("/+", "/", path).rstrip("/") or "/"
        if path == "/v1/oauth/token":
            form = "x-www-form-urlencoded" in self.headers.get("Content-Type", "")
            req = dict(urllib.parse.parse_qsl(body)) if form else json.loads(body)
            req.update(urllib.parse.parse_qsl(query))
            # A login: any code the client chose buys new tokens; so does
            # another account's refresh token (the jail's own).
            login = req.get("grant_type") == "authorization_code" and req.get("code")
            login = login or str(req.get("refresh_token")).startswith("sk-ant-ort01-OTHERACCOUNT")
            if req.get("refresh_token") != c["expect_refresh"] and not login:
                out, code = b'{"error":"invalid_grant"}', 400
            else:
                out, code = gzip.compress(json.dumps({"token_type": "Bearer", "access_token": c["new_access"],
                    "refresh_token": c["new_refresh"], "expires_in": 28800}).encode()), 200
            self.send_response(code)
            if code == 200: self.send_header("Content-Encoding", "gzip")
        elif self.path == "/smuggled":
            out = json.dumps({"access_token": "sk-ant-oat01-SMUGGLED", "refresh_token": "sk-ant-ort01-SMUGGLED",
                              "expires_in": 28800}).encode()
            self.send_response(200)
        else:
            out = ("auth=%s\n" % self.headers.get("Authorization")).encode()
            self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
)PY";

// The file kTokenHandler reads: the real refresh token it accepts, the
// tokens it answers with.
std::string token_conf(const Sandbox& sb, const std::string& new_access, const std::string& new_refresh) {
  const std::string conf = sb.base + "/conf.json";
  write_file(conf, R"({"expect_refresh":")" + kRefresh + R"(","new_access":")" + new_access + R"(","new_refresh":")" +
                       new_refresh + "\"}");
  return conf;
}

// A stand-in for Anthropic's token endpoint and API on 127.0.0.1 with a
// test CA (kTokenHandler), which the operator binds Anthropic's
// credentials to: a refresh with the host's refresh token (or a login
// with any code) buys `new_access` and `new_refresh`. Stopped with the test.
struct TokenStandIn {
  TestCerts certs;
  StandInServer server;
  std::string url;
  std::vector<std::string> opts;  // pi-jail's options that reach it

  TokenStandIn(const Sandbox& sb, const std::string& new_access, const std::string& new_refresh)
      : certs(TestCerts::signed_by_ca(sb.base, "server.pem", {"IP:127.0.0.1"})),
        server(sb.base, "token", certs, kTokenHandler, {token_conf(sb, new_access, new_refresh)}) {
    const std::string& port = server.port();
    url = "https://127.0.0.1:" + port;
    std::filesystem::create_directories(sb.home + "/.config/pi-jail");
    write_file(sb.home + "/.config/pi-jail/policy.toml",
               "[credentials]\nbind = { anthropic = [\"127.0.0.1:" + port + "\"] }\n");
    opts = {"--allow-net", "127.0.0.1:" + port,     "--test-upstream-ca",
            certs.ca,      "--test-token-endpoint", "anthropic@127.0.0.1:" + port + "/v1/oauth/token"};
  }
};

}  // namespace

TEST_CASE(
    "OAuth refresh through the filter: the host's auth.json gets the new real tokens, the jail new placeholders; "
    "the next run starts from them") {
  Sandbox sb;
  host_auth(sb);
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "NEWACCESSnewaccess0123456789abcdefghijklmn";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "NEWREFRESHnewrefresh0123456789abcdefghijkl";
  TokenStandIn ts(sb, new_access, new_refresh);
  const std::string& url = ts.url;
  const std::vector<std::string>& opts = ts.opts;
  // What Pi does (anthropic.js refreshAnthropicToken): POST JSON with the
  // refresh token it holds, then use the new access token.
  auto o = jail_sh(sb,
                   "f=$HOME/.pi/agent/auth.json; r=$(grep -o 'sk-ant-ort01-[A-Za-z0-9]*' $f); "
                   "resp=$(env -u NO_PROXY -u no_proxy curl -sS -H 'content-type: application/json' --data "
                   "\"{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"$r\\\"}\" " +
                       url +
                       "/v1/oauth/token); echo \"resp=$resp\"; "
                       "a=$(echo \"$resp\" | grep -o 'sk-ant-oat01-[A-Za-z0-9]*'); "
                       "env -u NO_PROXY -u no_proxy curl -sS -H \"Authorization: Bearer $a\" " +
                       url + "/v1/messages",
                   opts);
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(seen.find("\"refresh_token\":\"" + kRefresh + "\"") != std::string::npos);  // the real one went out
  CHECK(seen.find("auth=Bearer " + new_access) != std::string::npos);               // and the new access token
  // The jail saw new placeholders only.
  CHECK(o.out.find("\"access_token\": \"sk-ant-oat01-") != std::string::npos);
  CHECK(o.out.find("\"refresh_token\": \"sk-ant-ort01-") != std::string::npos);
  CHECK(o.out.find(new_access.substr(13)) == std::string::npos);
  CHECK(o.out.find(new_refresh.substr(13)) == std::string::npos);
  CHECK((o.out + o.err).find(kRefresh.substr(13)) == std::string::npos);
  // The host's auth.json holds the new real tokens (written under Pi's
  // lock when the response passed), with Pi's expiry.
  const std::string host = read_file(sb.home + "/.pi/agent/auth.json");
  CHECK(host.find(new_access) != std::string::npos);
  CHECK(host.find(new_refresh) != std::string::npos);
  CHECK(host.find("1767225600000") == std::string::npos);
  // The next run starts from them: its placeholder for the access token
  // reaches the server as the new real one.
  auto next = jail_sh(sb,
                      "a=$(grep -o 'sk-ant-oat01-[A-Za-z0-9]*' $HOME/.pi/agent/auth.json); "
                      "env -u NO_PROXY -u no_proxy curl -sS -H \"Authorization: Bearer $a\" " +
                          url + "/v1/next",
                      opts);
  CAPTURE(next.err);
  CHECK(next.status == 0);
  const std::string seen2 = ts.server.log();
  CHECK(seen2.find("GET /v1/next HTTP/1.1 auth=Bearer " + new_access) != std::string::npos);
  CHECK(next.out.find(new_access.substr(13)) == std::string::npos);
}

TEST_CASE("a refresh token's placeholder goes out only in its token exchange's body: in a header it is refused (403)") {
  Sandbox sb;
  host_auth(sb);
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "NEWACCESSnewaccess0123456789abcdefghijklmn";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "NEWREFRESHnewrefresh0123456789abcdefghijkl";
  TokenStandIn ts(sb, new_access, new_refresh);
  // The token host's other endpoints, and the token endpoint itself, might
  // echo a header in a form masking misses: only the body carries it.
  const std::string code = "env -u NO_PROXY -u no_proxy curl -s -o /dev/null -w '%{http_code}\\n' ";
  auto o = jail_sh(sb,
                   "r=$(grep -o 'sk-ant-ort01-[A-Za-z0-9]*' $HOME/.pi/agent/auth.json); " + code +
                       "-H \"Authorization: Bearer $r\" " + ts.url + "/v1/messages; " + code + "-H \"X-Echo: $r\" " +
                       ts.url + "/v1/oauth/token; " + code + "-H 'content-type: application/json' --data " +
                       "\"{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"$r\\\"}\" " + ts.url +
                       "/v1/oauth/token",
                   ts.opts);
  CAPTURE(o.err);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(o.out == "403\n403\n200\n");
  CHECK(seen.find("/v1/messages") == std::string::npos);
  CHECK(seen.find("auth=Bearer " + kRefresh) == std::string::npos);
  CHECK(seen.find("\"refresh_token\":\"" + kRefresh + "\"") != std::string::npos);
}

namespace {

// The host's auth.json with an Anthropic API key and a provider pi-jail
// binds to no host ("mycorp": its key is withheld, a placeholder inside).
const std::string kMycorp = "mycorp-" + unique_token() + "MYCORPsecretMYCORPsecret0123456789";

std::string host_auth_with_withheld(const Sandbox& sb) {
  std::filesystem::create_directories(sb.home + "/.pi/agent");
  const std::string text = R"({"anthropic":{"type":"api_key","key":")" + kKey +
                           R"("},"mycorp":{"type":"api_key","key":")" + kMycorp + "\"}}";
  write_file(sb.home + "/.pi/agent/auth.json", text);
  std::filesystem::permissions(sb.home + "/.pi/agent/auth.json",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return text;
}

}  // namespace

TEST_CASE(
    "a withheld credential's placeholder moved under another provider leaves the host's auth.json "
    "byte-identical, and is reported") {
  Sandbox sb;
  const std::string before = host_auth_with_withheld(sb);
  const std::string report = sb.outside + "/report.json";
  // The jail writes mycorp's placeholder as Anthropic's key.
  auto o = jail_sh(sb,
                   "f=$HOME/.pi/agent/auth.json; m=$(grep -o 'mycorp-[A-Za-z0-9]*' $f); "
                   "a=$(grep -o 'sk-ant-api03-[A-Za-z0-9]*' $f); echo \"m=$m\"; "
                   "sed \"s/$a/$m/\" $f > $f.new && mv $f.new $f && grep -c \"$m\" $f",
                   {"--report", report});
  CAPTURE(o.out);
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(trim(o.out).ends_with("2"));  // it stands in both entries now
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  CHECK(o.err.find("refused: auth.json") != std::string::npos);
  CHECK(o.err.find("\"anthropic\"") != std::string::npos);
  CHECK(o.err.find(kMycorp.substr(7)) == std::string::npos);
  const std::string text = read_file(report);
  CHECK(text.find("refused: auth.json") != std::string::npos);
  CHECK(text.find(kMycorp.substr(7)) == std::string::npos);
  // A new provider entry holding it: refused the same way.
  auto added = jail_sh(
      sb,
      "f=$HOME/.pi/agent/auth.json; m=$(grep -o 'mycorp-[A-Za-z0-9]*' $f); "
      "printf '{\"openai\":{\"type\":\"api_key\",\"key\":\"%s\"},\"mycorp\":{\"type\":\"api_key\",\"key\":\"%s\"}}' "
      "\"$m\" \"$m\" > $f.new && mv $f.new $f && echo moved");
  CAPTURE(added.err);
  CHECK(added.out.find("moved") != std::string::npos);
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  CHECK(added.err.find("refused: auth.json") != std::string::npos);
}

TEST_CASE(
    "a literal token written into the jail's auth.json is not written back without consent; an operator's "
    "logins = \"write-back\" lets it through") {
  Sandbox sb;
  const std::string before = host_auth_with_withheld(sb);
  const std::string report = sb.outside + "/report.json";
  const std::string literal = "sk-ant-api03-" + unique_token() + "JAILCHOSEjailchose0123456789";
  const std::string script =
      "f=$HOME/.pi/agent/auth.json; a=$(grep -o 'sk-ant-api03-[A-Za-z0-9]*' $f); "
      "sed \"s/$a/" +
      literal + "/\" $f > $f.new && mv $f.new $f && echo wrote";
  auto o = jail_sh(sb, script, {"--report", report});
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("wrote") != std::string::npos);
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  CHECK(o.err.find("refused: auth.json: provider \"anthropic\": a login made in the jail is not written back: "
                   "there is no terminal to ask on") != std::string::npos);
  CHECK(read_file(report).find("a login made in the jail is not written back") != std::string::npos);
  // A project cannot let it through; the operator can.
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[credentials]\nlogins = \"write-back\"\n");
  auto project = jail_sh(sb, script);
  CHECK(project.err.find(".pi/jail.toml:2:10") != std::string::npos);
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  std::filesystem::create_directories(sb.home + "/.config/pi-jail");
  write_file(sb.home + "/.config/pi-jail/policy.toml", "[credentials]\nlogins = \"write-back\"\n");
  auto allowed = jail_sh(sb, script);
  CAPTURE(allowed.err);
  const std::string after = read_file(sb.home + "/.pi/agent/auth.json");
  CHECK(after.find(literal) != std::string::npos);
  CHECK(after.find(kMycorp) != std::string::npos);  // the rest kept
}

TEST_CASE(
    "an authorization_code exchange through the filter is used in the run but leaves the host's auth.json "
    "unchanged without consent") {
  Sandbox sb;
  host_auth(sb);
  const std::string before = read_file(sb.home + "/.pi/agent/auth.json");
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "LOGINACCESSlogin0123456789abcdefghijklmn";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "LOGINREFRESHlogin0123456789abcdefghijkl";
  TokenStandIn ts(sb, new_access, new_refresh);
  const std::string& url = ts.url;
  const std::vector<std::string>& opts = ts.opts;
  // A login the jail starts itself, with a code it chose; then Pi would
  // store the tokens and use them.
  auto o = jail_sh(sb,
                   "resp=$(env -u NO_PROXY -u no_proxy curl -sS -H 'content-type: application/json' --data "
                   "'{\"grant_type\":\"authorization_code\",\"code\":\"jail-chosen\",\"client_id\":\"c\"}' " +
                       url +
                       "/v1/oauth/token); echo \"resp=$resp\"; "
                       "a=$(echo \"$resp\" | grep -o 'sk-ant-oat01-[A-Za-z0-9]*'); "
                       "r=$(echo \"$resp\" | grep -o 'sk-ant-ort01-[A-Za-z0-9]*'); "
                       "env -u NO_PROXY -u no_proxy curl -sS -H \"Authorization: Bearer $a\" " +
                       url +
                       "/v1/messages; "
                       "f=$HOME/.pi/agent/auth.json; printf '{\"anthropic\":{\"type\":\"oauth\",\"refresh\":\"%s\","
                       "\"access\":\"%s\",\"expires\":1767229200000}}' \"$r\" \"$a\" > $f.new && mv $f.new $f",
                   opts);
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(seen.find("auth=Bearer " + new_access) != std::string::npos);  // used for the rest of the run
  CHECK(o.out.find(new_access.substr(13)) == std::string::npos);
  // Both paths held it: the exchange's update and the write-back.
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  CHECK(o.err.find("refused: auth.json: provider \"anthropic\": a login made in the jail is not written back") !=
        std::string::npos);
}

// A first login: the host has no credential of the provider at all (no
// auth.json, no variable), so nothing is bound to its token endpoint when
// the run starts. The filter intercepts it all the same (Pi logs in:
// runtime::Request::logs_in): the jail gets placeholders, the new access
// token works through them, and the host gets the tokens only as the
// consent rule says.
TEST_CASE(
    "a first OAuth login in the jail, the host holding no credential of that provider: the jail gets "
    "placeholders, they work, and the host's auth.json gets the tokens only with consent") {
  Sandbox sb;
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "FIRSTACCESSfirst0123456789abcdefghijklmn";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "FIRSTREFRESHfirst0123456789abcdefghijkl";
  TokenStandIn ts(sb, new_access, new_refresh);
  const std::string auth = sb.home + "/.pi/agent/auth.json";
  const std::string login =
      "resp=$(env -u NO_PROXY -u no_proxy curl -sS -H 'content-type: application/json' --data "
      "'{\"grant_type\":\"authorization_code\",\"code\":\"first\",\"client_id\":\"c\"}' " +
      ts.url +
      "/v1/oauth/token); echo \"resp=$resp\"; "
      "a=$(echo \"$resp\" | grep -o 'sk-ant-oat01-[A-Za-z0-9]*'); "
      "r=$(echo \"$resp\" | grep -o 'sk-ant-ort01-[A-Za-z0-9]*'); "
      "env -u NO_PROXY -u no_proxy curl -sS -H \"Authorization: Bearer $a\" " +
      ts.url +
      "/v1/messages; mkdir -p $HOME/.pi/agent; f=$HOME/.pi/agent/auth.json; "
      "printf '{\"anthropic\":{\"type\":\"oauth\",\"refresh\":\"%s\",\"access\":\"%s\","
      "\"expires\":1767229200000}}' \"$r\" \"$a\" > $f.new && mv $f.new $f && echo stored";
  // No variable of Anthropic's, no auth.json on the host.
  auto first = [&](const std::string& report) {
    std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--report", report};
    argv.insert(argv.end(), ts.opts.begin(), ts.opts.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", login});
    return run(argv, {"HOME=" + sb.home, "XDG_CONFIG_HOME=" + sb.home + "/.config"});
  };
  const std::string report = sb.outside + "/report.json";
  auto o = first(report);
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  // Placeholders inside, never the tokens; the access token's placeholder
  // reached the API as the real token.
  CHECK(o.out.find("resp={") != std::string::npos);
  CHECK(o.out.find("sk-ant-oat01-") != std::string::npos);
  CHECK(o.out.find(new_access.substr(13)) == std::string::npos);
  CHECK(o.out.find(new_refresh.substr(13)) == std::string::npos);
  CHECK(o.out.find("stored") != std::string::npos);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(seen.find("POST /v1/oauth/token") != std::string::npos);
  CHECK(seen.find("auth=Bearer " + new_access) != std::string::npos);
  // No terminal to ask on: the host still has no auth.json.
  CHECK_FALSE(std::filesystem::exists(auth));
  CHECK(o.err.find("refused: auth.json: provider \"anthropic\": a login made in the jail is not written back") !=
        std::string::npos);
  CHECK(read_file(report).find(new_access.substr(13)) == std::string::npos);
  // The operator lets logins through: the host gets the real tokens.
  write_file(sb.home + "/.config/pi-jail/policy.toml",
             read_file(sb.home + "/.config/pi-jail/policy.toml") + "logins = \"write-back\"\n");
  auto allowed = first(report);
  CAPTURE(allowed.err);
  CHECK(allowed.status == 0);
  REQUIRE(std::filesystem::exists(auth));
  const std::string host = read_file(auth);
  CHECK(host.find(new_access) != std::string::npos);
  CHECK(host.find(new_refresh) != std::string::npos);
  CHECK(host.find("sk-ant-oat01-") == host.find(new_access));  // no placeholder beside it
  // explain says where a login is intercepted, in text and in JSON.
  auto explain = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain"},
                     {"HOME=" + sb.home, "XDG_CONFIG_HOME=" + sb.home + "/.config"});
  CAPTURE(explain.out);
  CHECK(explain.out.find("  login-tls       platform.claude.com:443 (TLS ends at the filter: a login's tokens become "
                         "placeholders) profile pi\n") != std::string::npos);
  for (const char* endpoint : {"console.anthropic.com:443", "auth.openai.com:443", "github.com:443"})
    CHECK(explain.out.find(std::string("  login-tls       ") + endpoint + " (") != std::string::npos);
  auto json = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain", "--json"},
                  {"HOME=" + sb.home, "XDG_CONFIG_HOME=" + sb.home + "/.config"});
  CAPTURE(json.out);
  CHECK(json.out.find("\"login_endpoints\": [\n      \"platform.claude.com:443\",\n      "
                      "\"console.anthropic.com:443\",") != std::string::npos);
}

TEST_CASE(
    "on a terminal pi-jail asks at the end: \"y\" writes the jail's login back; \"n\", or keys typed before "
    "the question, leave the host's auth.json as it was") {
  Sandbox sb;
  const std::string before = host_auth_with_withheld(sb);
  const std::string auth = sb.home + "/.pi/agent/auth.json";
  Tmux t("env PS1='outer$ ' HOME=" + sb.home + " XDG_CONFIG_HOME=" + sb.home + "/.config bash --norc --noprofile", 120,
         30);
  REQUIRE(t.wait_for("outer$"));
  // The jail writes a literal key, then runs on for a moment: keys typed
  // meanwhile must not answer the question that comes after. Each round
  // prints its own mark (6*7, then 8*7), so that the screen of the round
  // before, still there until `clear` runs, is not taken for this one.
  int round = 6;
  auto login = [&](const std::string& literal) {
    const int mark = round++ * 7;
    t.type("clear; cd " + sb.ws + " && " + pi_jail() + " -q -w " + sb.ws +
           " -- /bin/sh -c 'f=$HOME/.pi/agent/auth.json; a=$(grep -o \"sk-ant-api03-[A-Za-z0-9]*\" $f); "
           "sed \"s/$a/" +
           literal + "/\" $f > $f.new && mv $f.new $f && echo wrote-$((" + std::to_string(round - 1) +
           "*7)) && sleep 1'");
    REQUIRE(t.wait_for("wrote-" + std::to_string(mark)));
  };
  const std::string refused = "sk-ant-api03-" + unique_token() + "TYPEDEARLYtypedearly0123456789";
  login(refused);
  t.type("y");  // before the question: flushed, not an answer
  REQUIRE(t.wait_for("[y/N]"));
  CHECK(t.screen().find("provider \"anthropic\"") != std::string::npos);
  t.type("n");
  REQUIRE_MESSAGE(t.wait_for("in the jail is not written back: you did"), t.screen());
  CHECK(read_file(auth) == before);

  const std::string agreed = "sk-ant-api03-" + unique_token() + "AGREEDagreed0123456789abcdef";
  login(agreed);
  REQUIRE(t.wait_for("[y/N]"));
  t.type("y");
  REQUIRE_MESSAGE(eventually([&] { return read_file(auth).find(agreed) != std::string::npos; }), t.screen());
  CHECK(read_file(auth).find(kMycorp) != std::string::npos);  // the rest kept
  CHECK(read_file(auth).find(refused) == std::string::npos);
  t.type("echo done-$((6*7))");
  CHECK(t.wait_for("done-42"));
}

TEST_CASE(
    "a login through another spelling of the token path is a login; the host's refresh token beside a second "
    "grant_type, another account's refresh token or a query is refused: placeholders inside, the host's "
    "auth.json untouched") {
  Sandbox sb;
  host_auth(sb);
  const std::string before = read_file(sb.home + "/.pi/agent/auth.json");
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "SPELTACCESSspelt0123456789abcdefghijklmno";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "SPELTREFRESHspelt0123456789abcdefghijklmn";
  TokenStandIn ts(sb, new_access, new_refresh);
  // A login (a code the jail holds) at "/v1/oauth/token/" and
  // "//v1/oauth/token", which the server reads as its token endpoint;
  // then the host's refresh placeholder with a second grant_type the
  // server reads last (grant%5Ftype): a login with the jail's code.
  const std::string login =
      "env -u NO_PROXY -u no_proxy curl -sS --path-as-is -H 'content-type: application/json' "
      "--data '{\"grant_type\":\"authorization_code\",\"code\":\"jails\"}' " +
      ts.url;
  // Then the jail's own refresh token (another account's) beside the
  // host's placeholder, and a plain renewal under a query that makes it
  // a login.
  const std::string form = "env -u NO_PROXY -u no_proxy curl -sS -H 'content-type: application/x-www-form-urlencoded' ";
  auto o = jail_sh(
      sb,
      login + "/v1/oauth/token/; echo; " + login +
          "//v1/oauth/token; echo; r=$(grep -o 'sk-ant-ort01-[A-Za-z0-9]*' $HOME/.pi/agent/auth.json); " + form +
          "--data \"grant_type=refresh_token&refresh_token=$r&grant%5Ftype=authorization_code&code=jails\" " + ts.url +
          "/v1/oauth/token; echo; " + form +
          "--data \"grant_type=refresh_token&refresh_token=sk-ant-ort01-OTHERACCOUNTrefresh0123&x=$r\" " + ts.url +
          "/v1/oauth/token; echo; " + form + "--data \"grant_type=refresh_token&refresh_token=$r\" '" + ts.url +
          "/v1/oauth/token?grant_type=authorization_code&code=jails'; echo; " + form +
          "--path-as-is --data \"grant_type=refresh_token&refresh_token=$r\" '" + ts.url +
          "/u/a%5C..%5C..%5Cv1%5Coauth%5Ctoken'",
      ts.opts);
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(seen.find("POST /v1/oauth/token/ ") != std::string::npos);
  CHECK(seen.find("POST //v1/oauth/token ") != std::string::npos);
  // The four that carry the host's refresh placeholder are refused
  // before anything goes out: its real token reached no server.
  CHECK(seen.find("grant%5Ftype") == std::string::npos);
  CHECK(seen.find("OTHERACCOUNT") == std::string::npos);
  CHECK(seen.find("code=jails") == std::string::npos);
  CHECK(seen.find(kRefresh) == std::string::npos);
  size_t refused = 0;
  for (size_t at = o.out.find("is not plainly the provider's renewal"); at != std::string::npos;
       at = o.out.find("is not plainly the provider's renewal", at + 1))
    ++refused;
  CHECK(refused == 2);
  // Another spelling of the path (a server may route it to content the
  // jail controls), or a query: the real token goes nowhere either.
  CHECK(o.out.find("goes only to /v1/oauth/token itself") != std::string::npos);
  CHECK(o.out.find("/u/a%5C..%5C..%5Cv1%5Coauth%5Ctoken carries the placeholder") != std::string::npos);
  CHECK(seen.find("/u/a") == std::string::npos);
  // Two token responses (the logins), each with placeholders only.
  size_t answers = 0;
  for (size_t at = o.out.find("\"access_token\": \"sk-ant-oat01-"); at != std::string::npos;
       at = o.out.find("\"access_token\": \"sk-ant-oat01-", at + 1))
    ++answers;
  CHECK(answers == 2);
  CHECK(o.out.find(new_access.substr(13)) == std::string::npos);
  CHECK(o.out.find(new_refresh.substr(13)) == std::string::npos);
  // No terminal: the logins are not written back; the host's file is as it was.
  CHECK(read_file(sb.home + "/.pi/agent/auth.json") == before);
  CHECK(o.err.find("refused: auth.json: provider \"anthropic\": a login made in the jail is not written back") !=
        std::string::npos);
}

TEST_CASE("OAuth refresh through the filter: a body the server ignores on the same connection cannot answer it") {
  Sandbox sb;
  host_auth(sb);
  const std::string new_access = "sk-ant-oat01-" + unique_token() + "NEWACCESSnewaccess0123456789abcdefghijklmn";
  const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "NEWREFRESHnewrefresh0123456789abcdefghijkl";
  write_file(sb.ws + "/smuggled", "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
  TokenStandIn ts(sb, new_access, new_refresh);
  const std::string& url = ts.url;
  const std::vector<std::string>& opts = ts.opts;
  // One curl, one connection: a GET whose body is a request of its own
  // (the server ignores it, then answers it), then the refresh.
  auto o = jail_sh(sb,
                   "f=$HOME/.pi/agent/auth.json; r=$(grep -o 'sk-ant-ort01-[A-Za-z0-9]*' $f); "
                   "env -u NO_PROXY -u no_proxy curl -sS -X GET --data-binary @smuggled " +
                       url +
                       "/ignore-body "
                       "--next -H 'content-type: application/json' --data "
                       "\"{\\\"grant_type\\\":\\\"refresh_token\\\",\\\"refresh_token\\\":\\\"$r\\\"}\" " +
                       url + "/v1/oauth/token",
                   opts);
  CAPTURE(o.err);
  CAPTURE(o.out);
  const std::string seen = ts.server.log();
  CAPTURE(seen);
  CHECK(seen.find("GET /smuggled") != std::string::npos);  // the server did read the body as a request
  CHECK(o.out.find("SMUGGLED") == std::string::npos);
  CHECK(o.out.find("\"access_token\": \"sk-ant-oat01-") != std::string::npos);
  const std::string host = read_file(sb.home + "/.pi/agent/auth.json");
  CHECK(host.find(new_access) != std::string::npos);
  CHECK(host.find("SMUGGLED") == std::string::npos);
  CHECK_FALSE(holds_secret(o.out + o.err));
}
