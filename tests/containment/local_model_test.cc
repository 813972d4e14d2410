// A key for a local model server on the host's loopback, in real jails: a
// plain-HTTP server on 127.0.0.1 logs what it receives; the operator's
// [credentials] bind names it with http://, or does not. Plain HTTP is
// substituted there and nowhere else.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "harness.h"
#include "stand_in.h"
#include "text.h"

using namespace pj::test;

namespace {

// Answers every request with the Authorization it received, in the body
// and in a field; every request head goes to the log.
const char* const kPlainHandler = R"PY(
class Handler(StandIn):
    def any(self):
        note(self.requestline + "\n" + str(self.headers) + "--\n")
        echo = ("seen authorization=%s\n" % self.headers.get("Authorization")).encode()
        self.send_response(200)
        self.send_header("X-Echo", self.headers.get("Authorization") or "")
        self.send_header("Content-Length", str(len(echo)))
        self.end_headers()
        self.wfile.write(echo)
)PY";

void user_policy(const Sandbox& sb, const std::string& text) {
  std::filesystem::create_directories(sb.home + "/.config/pi-jail");
  write_file(sb.home + "/.config/pi-jail/policy.toml", text);
}

// Sandbox::jail without -q: the end-of-run summary is what is checked.
Outcome jail_loud(const Sandbox& sb, const std::vector<std::string>& args, const std::vector<std::string>& extra,
                  const std::vector<std::string>& env) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--allow-read", probe_dir()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> vars{"HOME=" + sb.home};
  vars.insert(vars.end(), env.begin(), env.end());
  return run(argv, vars);
}

const std::string kReal = "localkey_REAL0123456789abcdefghijklmnopqrstu";

}  // namespace

TEST_CASE(
    "a key bound to http://127.0.0.1:PORT reaches the host's local server as the real key, in clear, by every "
    "way the jail may take; echoes come back as the placeholder") {
  Sandbox sb;
  StandInServer server(sb.base, "plain", kPlainHandler);
  const std::string url = "http://127.0.0.1:" + server.port();
  // The bind alone opens the port: no --allow-net.
  user_policy(sb, "[credentials]\nbind = { LOCAL_KEY = [\"" + url + "\"] }\n");
  const std::string no_proxy = "env -u NO_PROXY -u no_proxy ";
  auto o = sb.jail(
      {"/bin/sh", "-c",
       "echo \"key=$LOCAL_KEY\"; curl -sS -D - -H \"Authorization: Bearer $LOCAL_KEY\" " + url + "/direct && " +
           no_proxy + "curl -sS -x http://127.0.0.1:3128 -H \"Authorization: Bearer $LOCAL_KEY\" " + url +
           "/absolute && " + no_proxy + "curl -sS -p -x http://127.0.0.1:3128 -H \"Authorization: Bearer " +
           "$LOCAL_KEY\" " + url + "/connect && " + no_proxy +
           "curl -sS --socks5-hostname 127.0.0.1:1080 -H \"Authorization: Bearer $LOCAL_KEY\" " + url + "/socks"},
      {}, "", {"LOCAL_KEY=" + kReal});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = server.log();
  CAPTURE(seen);
  // The jail holds a placeholder; the server got the real key four times.
  CHECK(o.out.find("key=localkey_") == 0);
  CHECK(o.out.find("key=" + kReal) == std::string::npos);
  CHECK(count(seen, "Authorization: Bearer " + kReal + "\n") == 4);
  CHECK(count(seen, "--\n") == 4);
  // Its echoes, in the body and in a field, came back as the placeholder.
  CHECK(count(o.out, "seen authorization=Bearer localkey_") == 4);
  CHECK(o.out.find("X-Echo: Bearer localkey_") != std::string::npos);
  CHECK(o.out.find(kReal) == std::string::npos);

  // explain shows the binding, the port it opens (traced to the bind) and
  // the credential's placeholder going there, in text and JSON; never the key.
  const std::string policy = sb.home + "/.config/pi-jail/policy.toml";
  auto text =
      run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain"}, {"HOME=" + sb.home, "LOCAL_KEY=" + kReal});
  CAPTURE(text.out);
  CHECK(text.status == 0);
  CHECK(text.out.find("LOCAL_KEY -> " + url + " (plain HTTP, host loopback)") != std::string::npos);
  CHECK(text.out.find("allow           127.0.0.1:" + server.port()) != std::string::npos);
  CHECK(text.out.find(policy + ":2:23") != std::string::npos);
  CHECK(text.out.find("LOCAL_KEY: placeholder localkey_<random> -> " + url) != std::string::npos);
  auto json = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain", "--json"},
                  {"HOME=" + sb.home, "LOCAL_KEY=" + kReal});
  CAPTURE(json.out);
  CHECK(json.status == 0);
  CHECK(json.out.find("\"credential\": \"LOCAL_KEY\",\n        \"target\": \"" + url +
                      "\",\n        \"wire\": \"plain-http\"") != std::string::npos);
  CHECK((text.out + json.out).find(kReal) == std::string::npos);
}

TEST_CASE(
    "plain HTTP is never bound to a host off the loopback: the bind line is refused at its position and "
    "nothing runs") {
  Sandbox sb;
  const std::string flag = sb.ws + "/ran";
  for (const std::string target : {"http://10.1.2.3:8080", "http://llm.corp.example:80", "http://127.0.0.1"}) {
    CAPTURE(target);
    user_policy(sb, "[credentials]\nbind = { LOCAL_KEY = [\"" + target + "\"] }\n");
    auto o = sb.jail({"/usr/bin/touch", flag}, {}, "", {"LOCAL_KEY=" + kReal});
    CAPTURE(o.err);
    CHECK(o.status == 125);
    CHECK(o.err.find("nothing was run") != std::string::npos);
    CHECK(o.err.find(sb.home + "/.config/pi-jail/policy.toml:2:") != std::string::npos);
    CHECK(o.err.find("credentials.bind.LOCAL_KEY: \"" + target + "\"") != std::string::npos);
    CHECK_FALSE(exists(flag));
  }
}

TEST_CASE(
    "a bind the jail could not use is an error before the run: a deny of its port, or TLS wanted on the "
    "same port") {
  Sandbox sb;
  const std::string flag = sb.ws + "/ran";
  user_policy(sb,
              "[credentials]\nbind = { LOCAL_KEY = [\"http://127.0.0.1:11434\"] }\n"
              "[network]\ndeny = [\"127.0.0.1:11434\"]\n");
  auto denied = sb.jail({"/usr/bin/touch", flag}, {}, "", {"LOCAL_KEY=" + kReal});
  CAPTURE(denied.err);
  CHECK(denied.status == 125);
  CHECK(denied.err.find("cannot be honoured: the deny rule \"127.0.0.1:11434\"") != std::string::npos);
  user_policy(
      sb, "[credentials]\nbind = { LOCAL_KEY = [\"http://127.0.0.1:11434\"], OTHER_KEY = [\"localhost:11434\"] }\n");
  auto both = sb.jail({"/usr/bin/touch", flag}, {}, "", {"LOCAL_KEY=" + kReal});
  CAPTURE(both.err);
  CHECK(both.status == 125);
  CHECK(both.err.find("OTHER_KEY binds port 11434 for TLS") != std::string::npos);
  CHECK_FALSE(exists(flag));
}

TEST_CASE(
    "a placeholder sent to a host loopback port that no binding covers is reported at the end with the bind "
    "line that fixes it") {
  Sandbox sb;
  StandInServer server(sb.base, "plain", kPlainHandler);
  const std::string port = server.port();
  // A credential of the run (bound elsewhere), and the local port allowed but not bound.
  user_policy(sb, "[credentials]\nbind = { LOCAL_KEY = [\"api.example\"] }\n");
  auto o = jail_loud(
      sb, {"/bin/sh", "-c", "curl -sS -H \"Authorization: Bearer $LOCAL_KEY\" http://127.0.0.1:" + port + "/v1"},
      {"--allow-net", "127.0.0.1:" + port}, {"LOCAL_KEY=" + kReal});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  const std::string seen = server.log();
  CAPTURE(seen);
  // The server got the placeholder (nothing substitutes there), never the key.
  CHECK(seen.find("Authorization: Bearer localkey_") != std::string::npos);
  CHECK(seen.find(kReal) == std::string::npos);
  CHECK(o.err.find("127.0.0.1:" + port + " got a placeholder, not the key") != std::string::npos);
  CHECK(o.err.find("a placeholder of LOCAL_KEY went to this host loopback port unsubstituted") != std::string::npos);
  CHECK(o.err.find("[credentials] bind = { LOCAL_KEY = [\"http://127.0.0.1:" + port + "\"] }") != std::string::npos);
  // The README's troubleshooting quotes the same lines (for Ollama's port).
  const std::string readme = read_file(data_dir() + "/README.md");
  CHECK(readme.find(
            "| `127.0.0.1:11434 got a placeholder, not the key (2\u00d7): a placeholder of auth.json ollama.key "
            "went to this host loopback port unsubstituted: no [credentials] bind covers it`") != std::string::npos);
  CHECK(readme.find("`  to send the real key there, in ~/.config/pi-jail/policy.toml: [credentials] bind = { ollama = "
                    "[\"http://127.0.0.1:11434\"] }`") != std::string::npos);

  // Without a placeholder in it, nothing is said.
  auto clean = jail_loud(sb, {"/bin/sh", "-c", "curl -sS http://127.0.0.1:" + port + "/v1"},
                         {"--allow-net", "127.0.0.1:" + port}, {"LOCAL_KEY=" + kReal});
  CAPTURE(clean.err);
  CHECK(clean.status == 0);
  CHECK(clean.err.find("got a placeholder") == std::string::npos);
}

TEST_CASE(
    "a key bound for TLS to a loopback port whose server speaks plain HTTP is refused with the bind that fixes "
    "it, never reset without a word") {
  Sandbox sb;
  StandInServer server(sb.base, "plain", kPlainHandler);
  const std::string hostport = "127.0.0.1:" + server.port();
  user_policy(sb, "[credentials]\nbind = { LOCAL_KEY = [\"" + hostport + "\"] }\n");
  auto o = jail_loud(
      sb, {"/bin/sh", "-c", "curl -sS -D - -H \"Authorization: Bearer $LOCAL_KEY\" http://" + hostport + "/v1"},
      {"--allow-net", hostport}, {"LOCAL_KEY=" + kReal});
  CAPTURE(o.err);
  CAPTURE(o.out);
  const std::string why = hostport +
                          " is bound for TLS, but the jail spoke plain HTTP to it; for a server without TLS "
                          "bind http://" +
                          hostport;
  CHECK(o.out.find("HTTP/1.1 502 ") == 0);
  CHECK(o.out.find("pi-jail: refused: " + why) != std::string::npos);
  CHECK(o.err.find(why) != std::string::npos);
  CHECK(server.log().empty());
}

// An OAuth provider's key bound to a local proxy over plain HTTP (LiteLLM
// in front of Anthropic): its logins are intercepted at the provider's
// token endpoints all the same, and the run's CA needs no certificate
// for the proxy. Before, every run stopped (125): the CA refused the
// plain-HTTP host.
TEST_CASE("an OAuth provider bound to http://127.0.0.1:PORT runs, and its key reaches the local proxy") {
  Sandbox sb;
  StandInServer server(sb.base, "plain", kPlainHandler);
  const std::string url = "http://127.0.0.1:" + server.port();
  user_policy(sb, "[credentials]\nbind = { anthropic = [\"" + url + "\"] }\n");
  const std::string key = "sk-ant-api03-" + unique_token() + "LOCALPROXYkey0123456789abcdefghij";
  auto o = sb.jail({"/bin/sh", "-c", "curl -sS -H \"x-api-key: $ANTHROPIC_API_KEY\" " + url + "/v1/messages"}, {}, "",
                   {"ANTHROPIC_API_KEY=" + key});
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  CHECK(server.log().find("x-api-key: " + key) != std::string::npos);
  CHECK(o.out.find(key) == std::string::npos);
}
