// The real Pi with its key outside the jail (the filter's
// side): Pi's provider talks HTTPS to a scripted model server with its own
// test CA (trusted by the filter through --test-upstream-ca, never by the
// jail); Pi holds only the placeholder; the server receives the real key.
// Pi's openai-codex provider talks WebSocket: a key the server echoes in
// its frames reaches Pi as the placeholder.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.h"
#include "pi_world.h"
#include "text.h"

using namespace pj::test;

namespace {

// Whether `text` holds 16 or more consecutive characters of `secret`: the
// filter masks any such run, so none may reach the jail.
bool holds_part_of(const std::string& text, const std::string& secret) {
  for (size_t at = 0; at + 16 <= secret.size(); ++at)
    if (text.find(secret.substr(at, 16)) != std::string::npos) return true;
  return false;
}

// Every file below `dir`, joined.
std::string read_tree(const std::string& dir) {
  std::string all;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) all += read_file(e.path().string()) + "\n";
  return all;
}

}  // namespace

TEST_CASE("Pi's model calls go out with the real key; Pi, its tools and its environment see only the placeholder") {
  PiWorld w("[]");
  const std::string ph = "sk-e2e-PH" + unique_token() + unique_token();
  const std::string real = "sk-e2e-REAL" + unique_token() + unique_token();
  // A test CA and the model server's certificate for 127.0.0.1.
  const auto certs = TestCerts::signed_by_ca(w.sb.base, "model.pem", {"IP:127.0.0.1"});
  TlsModelServer server(w, certs, "tls-model");
  const std::string& port = server.port;
  // Pi's provider: HTTPS, the placeholder as its key.
  write_file(w.agent + "/models.json", R"({"providers": {"scripted": {"baseUrl": "https://127.0.0.1:)" + port +
                                           R"(/v1", "api": "openai-completions", "apiKey": ")" + ph +
                                           R"(", "models": [{"id": "m"}]}}})");
  w.script("[" + bash("env; cat ~/.pi/agent/models.json") + "]");
  const std::string report = w.sb.outside + "/r.json";
  auto vars = w.env();
  vars.push_back("PJ_TEST_BIND=E2E_KEY=" + ph + "=" + real + "@127.0.0.1:" + port);
  auto o =
      run(w.pi_argv({"--allow-net", "127.0.0.1:" + port, "--test-upstream-ca", certs.ca, "--report", report}), vars);
  server.stop();
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  const std::string seen = server.log();
  CAPTURE(seen);
  // Two model calls (the tool call, then the answer), each with the real key.
  const size_t calls = count(seen, "\"auth\": \"Bearer " + real + "\"");
  CHECK(calls == 2);
  CHECK(seen.find("Bearer " + ph) == std::string::npos);
  // What Pi's bash tool saw (its environment, the models.json it reads):
  // the jail's CA variables and the placeholder, never the real key.
  CHECK(seen.find("NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt") != std::string::npos);
  CHECK(seen.find(ph) != std::string::npos);
  // The real key only in the Authorization fields the server received.
  CHECK(count(seen, real) == calls);
  CHECK(o.out.find(real) == std::string::npos);
  CHECK(o.err.find(real) == std::string::npos);
  CHECK(read_file(report).find(real) == std::string::npos);
  CHECK(read_file(report).find("substituted E2E_KEY") != std::string::npos);
}

TEST_CASE(
    "the real Pi's openai-codex turn goes over a WebSocket through the filter: the stand-in gets the real "
    "access token, and its echo in a frame reaches Pi only as the placeholder") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    // The stand-in for chatgpt.com (model_server.py's Codex WebSocket) echoes
    // the bearer token of the upgrade in its answer, split across two frames.
    w.script(R"([{"text": "codex-echo:$TOKEN:end"}])");
    const auto certs = TestCerts::signed_by_ca(w.sb.base, "chatgpt.pem", {"DNS:chatgpt.com"});
    TlsModelServer server(w, certs, "codex");
    const std::string& port = server.port;
    // A ChatGPT access token is a JWT whose claims name the account (Pi
    // reads it from them); its placeholder keeps header and claims.
    const std::string claims =
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hh"
        "dGdwdF9hY2NvdW50X2lkIjoiYWNjdC1lMmUifSwiZXhwIjo0MTAyNDQ0ODAwfQ.";
    const std::string signature =
        "E2Esig" + unique_token() + "Xy_" + unique_token() + "-Zq" + unique_token() + unique_token();
    const std::string access = claims + signature;
    const std::string refresh = "rt_E2E" + unique_token() + "refresh0123456789abcdefghijklmnop";
    write_file(w.agent + "/auth.json", R"({"openai-codex":{"type":"oauth","access":")" + access + R"(","refresh":")" +
                                           refresh + R"(","expires":4102444800000,"accountId":"acct-e2e"}})");
    const std::string report = w.sb.outside + "/r.json";
    std::vector<std::string> argv{"/usr/bin/env", "-C", w.sb.ws};
    argv.insert(argv.end(), w.jail.begin(), w.jail.end());
    argv.insert(argv.end(), {"-w", w.sb.ws, "--allow-net", "chatgpt.com:443", "--test-upstream-ca", certs.ca,
                             "--test-resolve", "chatgpt.com:443=127.0.0.1:" + port, "--report", report, "--", "pi",
                             "-p", "--provider", "openai-codex", "--model", "gpt-5.6-luna", "go"});
    auto o = run(argv, w.env());
    server.stop();
    CAPTURE(o.out);
    CAPTURE(o.err);
    const std::string seen = server.log();
    CAPTURE(seen);
    CHECK(o.status == 0);
    // The turn went over a WebSocket (no SSE fallback), upgraded with the
    // real token and without the compression Pi offers (the filter strips it).
    CHECK(count(seen, R"({"transport": "websocket", "path": "/backend-api/codex/responses", "auth": "Bearer )" +
                          access + R"(", "extensions": null})") == 1);
    CHECK(count(seen, R"("model": "gpt-5.6-luna", "step": 0, "transport": "websocket")") == 1);
    CHECK(seen.find(R"("transport": "sse")") == std::string::npos);
    // Pi printed the echo: the placeholder (the claims kept), never the real token.
    const size_t echo = o.out.find("codex-echo:");
    REQUIRE(echo != std::string::npos);
    const std::string echoed = o.out.substr(echo + 11, o.out.find(":end", echo) - echo - 11);
    CHECK(echoed.starts_with(claims));
    CHECK(echoed.size() >= claims.size() + 32);
    CHECK(echoed != access);
    CHECK_FALSE(holds_part_of(o.out + o.err, signature));
    // The session Pi kept holds the same echo, and nothing of the real token.
    const std::string sessions = read_tree(w.agent + "/sessions/" + pi_session_dir(w.sb.ws));
    CHECK(sessions.find("codex-echo:" + echoed + ":end") != std::string::npos);
    CHECK_FALSE(holds_part_of(sessions, signature));
    CHECK_FALSE(holds_part_of(sessions, refresh));
    const std::string r = read_file(report);
    CHECK_FALSE(holds_part_of(r, signature));
  }
}

namespace {

// Pi's provider for the scripted server with no key of its own in
// models.json: Pi takes it from auth.json, as for a local model server.
void key_in_auth_json(const PiWorld& w, const std::string& real) {
  write_file(w.agent + "/models.json", R"({"providers": {"scripted": {"baseUrl": "http://127.0.0.1:)" + w.port +
                                           R"(/v1", "api": "openai-completions", "models": [{"id": "m"}]}}})");
  write_file(w.agent + "/auth.json", R"({"scripted": {"type": "api_key", "key": ")" + real + R"("}})");
  sh_ok("chmod 600 " + w.agent + "/auth.json");
}

}  // namespace

TEST_CASE(
    "a local model server on a host loopback port gets the real key from Pi's auth.json when the operator binds "
    "it with http://; Pi sees only the placeholder") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[" + bash("cat ~/.pi/agent/auth.json") + "]", prefix);
    const std::string real = "localkey_REAL" + unique_token() + unique_token();
    key_in_auth_json(w, real);
    std::filesystem::create_directories(w.sb.home + "/.config/pi-jail");
    write_file(w.sb.home + "/.config/pi-jail/policy.toml",
               "[credentials]\nbind = { scripted = [\"http://127.0.0.1:" + w.port + "\"] }\n");
    auto o = w.pi();
    CAPTURE(o.err);
    CAPTURE(o.out);
    CHECK(o.status == 0);
    CHECK(o.out.find("done") != std::string::npos);
    const std::string seen = read_file(w.sb.base + "/model-log.jsonl");
    CAPTURE(seen);
    // Both model calls carried the real key; the tool's view of auth.json
    // (in the second call) held only the placeholder.
    CHECK(count(seen, "\"auth\": \"Bearer " + real + "\"") == 2);
    CHECK(count(seen, real) == 2);
    CHECK(seen.find("localkey_") != std::string::npos);
    CHECK(o.out.find(real) == std::string::npos);
    CHECK(o.err.find(real) == std::string::npos);
    CHECK(o.err.find("got a placeholder") == std::string::npos);
    // The host's auth.json keeps the real key.
    CHECK(read_file(w.agent + "/auth.json").find(real) != std::string::npos);
  }
}

TEST_CASE(
    "without a binding, the local model server gets a placeholder, and the end of the run names the bind line "
    "that sends the key") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    const std::string real = "localkey_REAL" + unique_token() + unique_token();
    key_in_auth_json(w, real);
    auto o = w.pi();
    CAPTURE(o.err);
    CAPTURE(o.out);
    CHECK(o.status == 0);
    const std::string seen = read_file(w.sb.base + "/model-log.jsonl");
    CAPTURE(seen);
    CHECK(seen.find("\"auth\": \"Bearer localkey_") != std::string::npos);
    CHECK(seen.find(real) == std::string::npos);
    CHECK(o.err.find("127.0.0.1:" + w.port + " got a placeholder, not the key") != std::string::npos);
    CHECK(o.err.find("a placeholder of auth.json scripted.key went to this host loopback port unsubstituted") !=
          std::string::npos);
    CHECK(o.err.find("[credentials] bind = { scripted = [\"http://127.0.0.1:" + w.port + "\"] }") != std::string::npos);
    CHECK(read_file(w.agent + "/auth.json").find(real) != std::string::npos);
  }
}
