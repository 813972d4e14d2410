// The real Pi refreshes an expired Anthropic OAuth token through the
// network filter (issues 17 and 19): Pi posts its (placeholder) refresh
// token to its hard-coded https://platform.claude.com/v1/oauth/token; the
// filter sends the real one (--test-resolve routes the allowed name to a
// loopback HTTPS stand-in that knows only the real tokens), rewrites the
// answer to new placeholders and writes the new real tokens to the host's
// auth.json; the next run starts from them.
#include <doctest/doctest.h>

#include "harness.h"
#include "pi_world.h"
#include "stand_in.h"
#include "text.h"

using namespace pj::test;

namespace {

// The stand-in for platform.claude.com and api.anthropic.com: the token
// endpoint answers (gzip, as Anthropic's does) only the real refresh
// token; /v1/messages answers a minimal Messages stream. Its argument: a
// JSON file of the tokens it expects and gives.
const char* const kStandIn = R"PY(
import gzip, json
conf = args[0]
SSE = "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(d)) for e, d in [
    ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-haiku-4-5", "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "stand-in-answer"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 1}}),
    ("message_stop", {"type": "message_stop"})]).encode()
class Handler(StandIn):
    def any(self):
        c = json.load(open(conf))
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        note("%s host=%s auth=%s body=%s\n" % (self.requestline, self.headers.get("Host"),
             self.headers.get("Authorization"), body[:300].replace("\n", " ")))
        ctype = "application/json"
        if self.path.startswith("/v1/oauth/token"):
            if json.loads(body).get("refresh_token") != c["expect_refresh"]:
                out, code = b'{"error":"invalid_grant"}', 400
            else:
                out, code = gzip.compress(json.dumps({"token_type": "Bearer", "access_token": c["new_access"],
                    "refresh_token": c["new_refresh"], "expires_in": 28800}).encode()), 200
        elif self.path.startswith("/copilot_internal/v2/token"):
            # Copilot's token GET: only the real GitHub token buys one.
            if self.headers.get("Authorization") != "Bearer " + c.get("expect_gh", "-"):
                out, code = b'{"message":"Bad credentials"}', 401
            else:
                import time
                out, code = json.dumps({"token": c["new_copilot"], "expires_at": int(time.time()) + 1800}).encode(), 200
        elif self.path.startswith("/models"):
            out, code = json.dumps({"data": [{"id": c.get("copilot_model", "-"), "model_picker_enabled": True,
                "policy": {"state": "enabled"}, "capabilities": {"supports": {"tool_calls": True}}}]}).encode(), 200
        elif self.path.startswith("/v1/messages"):
            out, code, ctype = SSE, 200, "text/event-stream"
        else:
            out, code = b'{"error":"not here"}', 404
        self.send_response(code)
        if out[:2] == b"\x1f\x8b": self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
)PY";

}  // namespace

TEST_CASE(
    "the real Pi refreshes an expired Anthropic OAuth token through the filter: the stand-in gets the real "
    "refresh token, the host's auth.json the new real tokens, Pi placeholders; the next run starts from them") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    write_file(w.agent + "/settings.json", R"({"retry": {"enabled": false}})");
    const std::string d = w.sb.base;
    const auto certs =
        TestCerts::signed_by_ca(d, "anthropic.pem", {"DNS:platform.claude.com", "DNS:api.anthropic.com"});
    const std::string access = "sk-ant-oat01-" + unique_token() + "E2EOLDaccess0123456789abcdefghijklmnopqrstu";
    const std::string refresh = "sk-ant-ort01-" + unique_token() + "E2EOLDrefresh0123456789abcdefghijklmnopqrst";
    const std::string new_access = "sk-ant-oat01-" + unique_token() + "E2ENEWaccess0123456789abcdefghijklmnopqrstu";
    const std::string new_refresh = "sk-ant-ort01-" + unique_token() + "E2ENEWrefresh0123456789abcdefghijklmnopqrst";
    const std::string conf = d + "/conf.json";
    write_file(conf, R"({"expect_refresh":")" + refresh + R"(","new_access":")" + new_access + R"(","new_refresh":")" +
                         new_refresh + "\"}");
    StandInServer server(d, "anthropic", certs, kStandIn, {conf});
    const std::string& port = server.port();
    // Expired long ago: Pi refreshes before its model call.
    write_file(w.agent + "/auth.json", R"({"anthropic":{"type":"oauth","refresh":")" + refresh + R"(","access":")" +
                                           access + R"(","expires":1767225600000}})");
    std::vector<std::string> argv{"/usr/bin/env", "-C", w.sb.ws};
    argv.insert(argv.end(), w.jail.begin(), w.jail.end());
    argv.insert(argv.end(), {"-w",
                             w.sb.ws,
                             "--allow-net",
                             "platform.claude.com:443",
                             "--allow-net",
                             "api.anthropic.com:443",
                             "--test-upstream-ca",
                             certs.ca,
                             "--test-resolve",
                             "platform.claude.com:443=127.0.0.1:" + port,
                             "--test-resolve",
                             "api.anthropic.com:443=127.0.0.1:" + port,
                             "--",
                             "pi",
                             "-p",
                             "--no-session",
                             "--provider",
                             "anthropic",
                             "--model",
                             "claude-haiku-4-5",
                             "go"});
    auto first = run(argv, w.env());
    CAPTURE(first.out);
    CAPTURE(first.err);
    std::string seen = server.log();
    CAPTURE(seen);
    CHECK(first.status == 0);
    CHECK(first.out.find("stand-in-answer") != std::string::npos);
    // Pi's refresh reached the stand-in with the real refresh token (the
    // stand-in refuses anything else), then its model call with the new
    // real access token.
    CHECK(seen.find("POST /v1/oauth/token HTTP/1.1 host=platform.claude.com") != std::string::npos);
    CHECK(seen.find("\"refresh_token\": \"" + refresh + "\"") + seen.find("\"refresh_token\":\"" + refresh + "\"") !=
          2 * std::string::npos);
    CHECK(seen.find("host=api.anthropic.com auth=Bearer " + new_access) != std::string::npos);
    CHECK(count(seen, "/v1/oauth/token") == 1);
    // Pi (its output) never saw a real token.
    for (const auto& secret : {access, refresh, new_access, new_refresh}) {
      CAPTURE(secret);
      CHECK((first.out + first.err).find(secret.substr(13)) == std::string::npos);
    }
    // The host's auth.json holds the new real tokens, a future expiry.
    const std::string host = read_file(w.agent + "/auth.json");
    CAPTURE(host);
    CHECK(host.find(new_access) != std::string::npos);
    CHECK(host.find(new_refresh) != std::string::npos);
    CHECK(host.find("1767225600000") == std::string::npos);
    // The next run starts from them: no refresh, its model call carries the
    // new real access token.
    auto next = run(argv, w.env());
    CAPTURE(next.out);
    CAPTURE(next.err);
    CHECK(next.status == 0);
    seen = server.log();
    CHECK(count(seen, "/v1/oauth/token") == 1);
    CHECK(count(seen, "host=api.anthropic.com auth=Bearer " + new_access) == 2);
  }
}

TEST_CASE(
    "the real Pi renews an expired GitHub Copilot token through the filter: the host's auth.json gets it "
    "without a question, Pi only placeholders") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    write_file(w.agent + "/settings.json", R"({"retry": {"enabled": false}})");
    const std::string d = w.sb.base;
    const auto certs =
        TestCerts::signed_by_ca(d, "copilot.pem", {"DNS:api.github.com", "DNS:api.individual.githubcopilot.com"});
    const std::string gh = "ghu_" + unique_token() + "E2EgithubTOKEN0123456789";
    const std::string old_copilot = "tid=" + unique_token() + ";exp=1;sku=e2e;8kp=1:OLD" + unique_token();
    const std::string new_copilot = "tid=" + unique_token() + ";exp=2;sku=e2e;8kp=1:NEW" + unique_token();
    const std::string model = "claude-fable-5";
    const std::string conf = d + "/conf.json";
    write_file(conf, R"({"expect_gh":")" + gh + R"(","new_copilot":")" + new_copilot + R"(","copilot_model":")" +
                         model + R"(","expect_refresh":"-"})");
    StandInServer server(d, "copilot", certs, kStandIn, {conf});
    const std::string& port = server.port();
    // Expired long ago: Pi renews the Copilot token before its model call.
    write_file(w.agent + "/auth.json", R"({"github-copilot":{"type":"oauth","refresh":")" + gh + R"(","access":")" +
                                           old_copilot + R"(","expires":1767225600000}})");
    std::vector<std::string> argv{"/usr/bin/env", "-C", w.sb.ws};
    argv.insert(argv.end(), w.jail.begin(), w.jail.end());
    argv.insert(argv.end(), {"-w",
                             w.sb.ws,
                             "--allow-net",
                             "api.github.com:443",
                             "--allow-net",
                             "api.individual.githubcopilot.com:443",
                             "--test-upstream-ca",
                             certs.ca,
                             "--test-resolve",
                             "api.github.com:443=127.0.0.1:" + port,
                             "--test-resolve",
                             "api.individual.githubcopilot.com:443=127.0.0.1:" + port,
                             "--",
                             "pi",
                             "-p",
                             "--no-session",
                             "--provider",
                             "github-copilot",
                             "--model",
                             model,
                             "go"});
    auto first = run(argv, w.env());
    CAPTURE(first.out);
    CAPTURE(first.err);
    const std::string seen = server.log();
    CAPTURE(seen);
    CHECK(first.status == 0);
    // The renewal carried the real GitHub token (the stand-in answers only it).
    CHECK(seen.find("GET /copilot_internal/v2/token HTTP/1.1 host=api.github.com auth=Bearer " + gh) !=
          std::string::npos);
    for (const auto& secret : {gh, new_copilot}) {
      CAPTURE(secret);
      CHECK((first.out + first.err).find(secret) == std::string::npos);
    }
    // A renewal, not a login: the host's auth.json has the new Copilot
    // token at once, and nothing was refused or asked.
    const std::string host = read_file(w.agent + "/auth.json");
    CAPTURE(host);
    CHECK(host.find(new_copilot) != std::string::npos);
    CHECK(host.find(gh) != std::string::npos);
    CHECK(first.err.find("a login made in the jail") == std::string::npos);
  }
}
