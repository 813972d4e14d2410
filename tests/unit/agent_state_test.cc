// Agent-dir write-back, the pure half: what the jail left in auth.json and
// settings.json goes back to the host only where it is data (pi/agent_state.h).
#include <doctest/doctest.h>

#include <string>

#include "pi/agent_state.h"
#include "json_helpers.h"
#include "util/json_value.h"

using namespace pj::pi::agent;
namespace json = pj::util::json;
using pj::test::parsed;
using pj::test::pi_form;

namespace {

bool noted(const Notes& notes, Notes::Kind kind, const std::string& part) {
  for (const auto& n : notes.items())
    if (n.kind == kind && n.text.find(part) != std::string::npos) return true;
  return false;
}

std::string all_notes(const Notes& notes) {
  std::string out;
  for (const auto& l : notes.lines()) out += l + "\n";
  return out;
}

const std::string kOAuth = R"({"type":"oauth","refresh":"r1","access":"a1","expires":1000,"accountId":"acc"})";
const std::string kGiven = R"({"anthropic":)" + kOAuth + R"(,"openai":{"type":"api_key","key":"sk-host"}})";

}  // namespace

TEST_CASE("auth: the planted '!command' api_key is refused and nothing is written") {
  Notes notes;
  std::string left =
      R"({"anthropic":)" + kOAuth +
      R"(,"openai":{"type":"api_key","key":"sk-host"},"x":{"type":"api_key","key":"!touch MARK; echo k"}})";
  auto out = merge_auth(kGiven, kGiven, left, notes);
  CHECK_FALSE(out.has_value());
  CHECK(noted(notes, Notes::Kind::refused, "provider \"x\": not written back: the key is a shell command"));
  // The secret never appears in a note.
  CHECK(all_notes(notes).find("touch") == std::string::npos);
}

TEST_CASE("auth: keys Pi would expand or run, and entries that are not data, are refused") {
  struct Case {
    const char* entry;
    const char* why;
  };
  const Case cases[] = {
      {R"({"type":"api_key","key":"!cat ~/.ssh/id_rsa"})", "shell command"},
      {R"({"type":"api_key","key":"$AWS_SECRET_ACCESS_KEY"})", "environment variables"},
      {R"({"type":"api_key","key":"sk-${HOME}"})", "environment variables"},
      {R"({"type":"api_key","key":"sk-1","env":{"CLOUDFLARE_ACCOUNT_ID":"evil"}})", "\"env\" is not data"},
      {R"({"type":"api_key","key":"sk-\u001b]52;c;x\u0007"})", "wrong type"},
      {R"({"type":"api_key","key":42})", "wrong type"},
      {R"({"type":"command","key":"sk"})", "not \"oauth\" or \"api_key\""},
      {R"({"key":"sk"})", "not \"oauth\" or \"api_key\""},
      {R"("sk-just-a-string")", "not a JSON object"},
      {R"({"type":"oauth","access":"a","refresh":"r"})", "\"expires\" is missing"},
      {R"({"type":"oauth","access":"a","refresh":"r","expires":1e400})", "\"expires\" has the wrong type"},
      {R"({"type":"oauth","access":"a","refresh":"r","expires":"soon"})", "\"expires\" has the wrong type"},
      {R"({"type":"oauth","access":"a","refresh":"r","expires":1,"enterpriseUrl":"evil.example"})",
       "\"enterpriseUrl\" is not data"},
      {R"({"type":"oauth","access":"a","refresh":"r","expires":1,"scopes":[1]})", "\"scopes\" has the wrong type"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.entry);
    Notes notes;
    auto out = merge_auth(kGiven, kGiven, std::string(R"({"newp":)") + c.entry + "}", notes);
    CHECK_FALSE(out.has_value());
    CHECK_MESSAGE(noted(notes, Notes::Kind::refused, c.why), all_notes(notes));
  }
}

TEST_CASE("auth: an OAuth refresh and a new API key are written back; the rest of the host file is kept") {
  Notes notes;
  std::string host = R"({"anthropic":)" + kOAuth +
                     R"(,"openai":{"type":"api_key","key":"sk-host"},"zz-host-only":{"type":"api_key","key":"k"}})";
  std::string left = R"({"anthropic":{"type":"oauth","refresh":"r2","access":"a2","expires":2000,"accountId":"acc"},)"
                     R"("openai":{"type":"api_key","key":"sk-host"},"xai":{"type":"api_key","key":"xai-key"}})";
  auto out = merge_auth(pi_form(host), pi_form(kGiven), pi_form(left), notes);
  REQUIRE(out.has_value());
  CHECK(*out ==
        pi_form(R"({"anthropic":{"type":"oauth","refresh":"r2","access":"a2","expires":2000,"accountId":"acc"},)"
                R"("openai":{"type":"api_key","key":"sk-host"},"zz-host-only":{"type":"api_key","key":"k"},)"
                R"("xai":{"type":"api_key","key":"xai-key"}})"));
  CHECK(noted(notes, Notes::Kind::applied, "provider \"anthropic\": updated (oauth)"));
  CHECK(noted(notes, Notes::Kind::applied, "provider \"xai\": added (api_key)"));
  CHECK(all_notes(notes).find("a2") == std::string::npos);
}

TEST_CASE("auth: a non-data field may ride along unchanged, e.g. Copilot's enterpriseUrl") {
  std::string given = R"({"github-copilot":{"type":"oauth","refresh":"r","access":"a","expires":1,)"
                      R"("enterpriseUrl":"ghe.corp.example"}})";
  std::string left = R"({"github-copilot":{"type":"oauth","refresh":"r","access":"a2","expires":2,)"
                     R"("enterpriseUrl":"ghe.corp.example","availableModelIds":["gpt-5"]}})";
  Notes notes;
  auto out = merge_auth(given, given, left, notes);
  REQUIRE(out.has_value());
  CHECK(parsed(*out) == parsed(left));
  // Dropping it would send the tokens to github.com instead: refused too.
  Notes dropped;
  CHECK_FALSE(merge_auth(given, given, R"({"github-copilot":{"type":"oauth","refresh":"r","access":"a2","expires":2}})",
                         dropped)
                  .has_value());
  CHECK(noted(dropped, Notes::Kind::refused, "\"enterpriseUrl\" is not data and was removed"));
  // A new login (the type changed) carries no field from the old entry.
  Notes relogin;
  auto out2 = merge_auth(
      kGiven, kGiven, R"({"anthropic":{"type":"api_key","key":"sk-new"},"openai":{"type":"api_key","key":"sk-host"}})",
      relogin);
  REQUIRE(out2.has_value());
  CHECK(*parsed(*out2).find("anthropic") == parsed(R"({"type":"api_key","key":"sk-new"})"));
}

TEST_CASE("auth: a removed provider is not removed from the host") {
  Notes notes;
  auto out = merge_auth(kGiven, kGiven, R"({"openai":{"type":"api_key","key":"sk-host"}})", notes);
  CHECK_FALSE(out.has_value());
  CHECK(noted(notes, Notes::Kind::refused, "provider \"anthropic\": removed in the jail"));
  Notes all_gone;
  CHECK_FALSE(merge_auth(kGiven, kGiven, "{}", all_gone).has_value());
  Notes file_gone;
  CHECK_FALSE(merge_auth(kGiven, kGiven, std::nullopt, file_gone).has_value());
  CHECK(noted(file_gone, Notes::Kind::refused, "is missing"));
}

TEST_CASE("auth: when the host changed the same provider during the run, the host's entry wins") {
  std::string host_now =
      R"({"anthropic":{"type":"oauth","refresh":"rH","access":"aH","expires":3000},"openai":{"type":"api_key","key":"sk-host"}})";
  std::string left =
      R"({"anthropic":{"type":"oauth","refresh":"rJ","access":"aJ","expires":2000},"openai":{"type":"api_key","key":"sk-jail"}})";
  Notes notes;
  auto out = merge_auth(host_now, kGiven, left, notes);
  REQUIRE(out.has_value());
  CHECK(*out->c_str() == '{');
  auto v = parsed(*out);
  CHECK(*v.find("anthropic") == *parsed(host_now).find("anthropic"));
  CHECK(*v.find("openai")->find("key")->as_string() == "sk-jail");
  CHECK(noted(notes, Notes::Kind::kept, "provider \"anthropic\": changed on the host during the run"));
  // And a provider the host added meanwhile is kept.
  Notes n2;
  auto out2 = merge_auth(R"({"new-on-host":{"type":"api_key","key":"h"}})", "{}",
                         R"({"other":{"type":"api_key","key":"j"}})", n2);
  REQUIRE(out2.has_value());
  CHECK(parsed(*out2) ==
        parsed(R"({"new-on-host":{"type":"api_key","key":"h"},"other":{"type":"api_key","key":"j"}})"));
}

TEST_CASE("auth and settings: invalid, huge or non-object output of the jail is refused as a whole") {
  std::string huge = R"({"anthropic":{"type":"api_key","key":")" + std::string(kMaxFileBytes, 'k') + "\"}}";
  std::string deep = std::string(100000, '[');
  const std::pair<std::string, const char*> bad[] = {
      {"{\"a\":", "is not valid JSON (line 1, column 6"},
      {"[1,2]", "is not a JSON object"},
      {"null", "is not a JSON object"},
      {"\"!rm -rf ~\"", "is not a JSON object"},
      {"{\"a\":1,\"a\":2}", "duplicate key"},
      {"{\"x\":\"\xff\"}", "invalid UTF-8"},
      {deep, "nested deeper than 64"},
      {huge, "is larger than 1048576 bytes"},
  };
  for (const auto& b : bad) {
    const std::string& left = b.first;
    const char* why = b.second;
    std::string shown = left.substr(0, 40);
    CAPTURE(shown);
    Notes a, s;
    CHECK_FALSE(merge_auth(kGiven, kGiven, left, a).has_value());
    CHECK_FALSE(merge_settings("{}", "{}", left, s).has_value());
    CHECK_MESSAGE(noted(a, Notes::Kind::refused, why), all_notes(a));
    CHECK(noted(s, Notes::Kind::refused, why));
  }
  // The host's own file unreadable as JSON: left alone too.
  Notes h;
  CHECK_FALSE(merge_auth("{oops", kGiven, R"({"n":{"type":"api_key","key":"k"}})", h).has_value());
  CHECK(noted(h, Notes::Kind::refused, "the host's is not valid JSON"));
}

TEST_CASE("settings: a theme built into Pi or in the host's themes/ is written back; any other name is not") {
  const std::string given = R"({"theme":"dark"})";
  const HostDir dir{{"solarized"}};
  for (const char* theme : {"light", "solarized", "light/dark", "solarized/dark"}) {
    CAPTURE(theme);
    Notes notes;
    const std::string left = std::string(R"({"theme":")") + theme + "\"}";
    auto out = merge_settings(given, given, left, notes, dir);
    REQUIRE(out.has_value());
    CHECK(*out == pi_form(left));
    CHECK(noted(notes, Notes::Kind::applied, "\"theme\": changed"));
  }
  for (const char* theme : {"../../../tmp/evil", "/tmp/evil", "evil", "light/../x", "a/b/c", "Dark", "toString", ""}) {
    CAPTURE(theme);
    Notes notes;
    const std::string left = std::string(R"({"theme":")") + theme + "\"}";
    CHECK_FALSE(merge_settings(given, given, left, notes, dir).has_value());
    CHECK(noted(notes, Notes::Kind::refused, "\"theme\": not written back: it names a theme neither built into Pi"));
  }
  Notes notes;
  CHECK_FALSE(merge_settings(given, given, R"({"theme":7})", notes, dir).has_value());
  CHECK(noted(notes, Notes::Kind::refused, "\"theme\": not written back"));
}

TEST_CASE("settings: data preferences are written back; code, destinations and unknown keys are not") {
  std::string given = R"({"defaultModel":"m1","lastChangelogVersion":"1.3.0","packages":["npm:a"],"theme":"dark"})";
  std::string left = R"({"defaultModel":"m2","lastChangelogVersion":"1.4.0","packages":["npm:a","npm:evil"],)"
                     R"("theme":"dark","extensions":["/tmp/x.js"],"shellPath":"/tmp/sh","npmCommand":["sh","-c","x"],)"
                     R"("httpProxy":"http://evil:8080","sessionDir":"/tmp","defaultProjectTrust":"always",)"
                     R"("frobnicate":true,"hideThinkingBlock":true})";
  Notes notes;
  auto out = merge_settings(given, given, left, notes);
  REQUIRE(out.has_value());
  CHECK(*out == pi_form(R"({"defaultModel":"m2","lastChangelogVersion":"1.4.0","packages":["npm:a"],"theme":"dark",)"
                        R"("hideThinkingBlock":true})"));
  for (const char* k : {"\"defaultModel\": changed", "\"lastChangelogVersion\": changed", "\"hideThinkingBlock\": set"})
    CHECK_MESSAGE(noted(notes, Notes::Kind::applied, k), k);
  for (const char* k : {"\"packages\": not written back: it lists packages", "\"extensions\": not written back",
                        "\"shellPath\": not written back", "\"npmCommand\"", "\"httpProxy\"", "\"sessionDir\"",
                        "\"defaultProjectTrust\"", "\"frobnicate\": not written back: it is not a setting"})
    CHECK_MESSAGE(noted(notes, Notes::Kind::refused, k), k);
}

TEST_CASE("settings: values are checked against what Pi stores") {
  struct Case {
    const char* left;
    bool applied;
  };
  const Case cases[] = {
      {R"({"defaultThinkingLevel":"high"})", true},
      {R"({"defaultThinkingLevel":"ludicrous"})", false},
      {R"({"quietStartup":"header"})", true},
      {R"({"quietStartup":"loud"})", false},
      {R"({"outputPad":1.0})", true},
      {R"({"outputPad":2})", false},
      {R"({"defaultModel":"m\u001b[2J"})", false},
      {R"({"defaultModel":"m\u009b2J"})", false},
      {R"({"terminal":{"showImages":false,"images":false,"hyperlinks":"auto"}})", true},
      {R"({"terminal":{"images":true}})", false},
      {R"({"terminal":{"showImages":"yes"}})", false},
      {R"({"terminal":{"command":"x"}})", false},
      {R"({"markdown":{"codeBlockIndent":"  ","mermaid":"final"}})", true},
      {R"({"markdown":{"codeBlockIndent":"\u001b]52;c;eA==\u0007"}})", false},
      {R"({"images":{"autoResize":false}})", true},
      {R"({"images":{"blockImages":false}})", false},
      {R"({"compaction":{"enabled":false,"modelOverrides":{"a/b":{"reserveTokens":100}}}})", true},
      {R"({"compaction":{"reserveTokens":1.5}})", false},
      {R"({"retry":{"enabled":false,"provider":{"maxRetries":2}}})", true},
      {R"({"modelThinkingLevels":{"anthropic/claude":"low"}})", true},
      {R"({"modelThinkingLevels":{"anthropic/claude":"lots"}})", false},
      {R"({"httpIdleTimeoutMs":"disabled"})", true},
      {R"({"enabledModels":["claude-*",3]})", false},
      {R"({"extensionChangelogVersions":{"npm:pi-foo":"1.2.0","git:github.com/a/b":"0.1.0"}})", true},
      {R"({"extensionChangelogVersions":{"npm:pi-foo":["1.2.0"]}})", false},
      {R"({"extensionChangelogVersions":{"npm:pi-foo":"1.2\u001b[2J"}})", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.left);
    Notes notes;
    auto out = merge_settings("{}", "{}", c.left, notes);
    CHECK(out.has_value() == c.applied);
    if (c.applied) CHECK(parsed(*out) == parsed(c.left));
  }
  // A nested member that is not data may stay as given while data beside it changes.
  Notes n;
  auto out = merge_settings(R"({"images":{"blockImages":true}})", R"({"images":{"blockImages":true}})",
                            R"({"images":{"blockImages":true,"autoResize":false}})", n);
  REQUIRE(out.has_value());
  CHECK(parsed(*out) == parsed(R"({"images":{"blockImages":true,"autoResize":false}})"));
}

TEST_CASE("settings: removals apply only to data keys; the host's concurrent change wins") {
  std::string given = R"({"defaultModel":"m1","hideThinkingBlock":true,"extensions":["a.js"]})";
  Notes notes;
  auto out = merge_settings(R"({"defaultModel":"m-host","hideThinkingBlock":true,"extensions":["a.js"]})", given,
                            R"({"defaultModel":"m2"})", notes);
  REQUIRE(out.has_value());
  CHECK(*out == pi_form(R"({"defaultModel":"m-host","extensions":["a.js"]})"));
  CHECK(noted(notes, Notes::Kind::kept, "\"defaultModel\": changed on the host"));
  CHECK(noted(notes, Notes::Kind::applied, "\"hideThinkingBlock\": removed"));
  CHECK(noted(notes, Notes::Kind::refused, "\"extensions\": removed in the jail; not applied"));
}

TEST_CASE("settings: a deviceId Pi made in the jail goes back when the host has none; the host's is never changed") {
  const std::string id = "0f8c2a9e-5b7d-4c1e-9a3f-2d6b8e4c7a10";
  const std::string made = R"({"defaultModel":"m1","deviceId":")" + id + R"("})";
  {
    Notes notes;
    auto out = merge_settings(R"({"defaultModel":"m1"})", R"({"defaultModel":"m1"})", made, notes);
    REQUIRE(out.has_value());
    CHECK(parsed(*out) == parsed(made));
    CHECK(noted(notes, Notes::Kind::applied, "\"deviceId\": set"));
  }
  {
    // The host made its own meanwhile: the host's stays.
    const std::string host = R"({"deviceId":"11111111-2222-4333-8444-555555555555"})";
    Notes notes;
    CHECK_FALSE(merge_settings(host, "{}", R"({"deviceId":")" + id + R"("})", notes).has_value());
    CHECK(noted(notes, Notes::Kind::kept, "\"deviceId\": changed on the host during the run"));
  }
  for (const char* bad : {"not-a-uuid", "0f8c2a9e-5b7d-4c1e-9a3f-2d6b8e4c7a1", "0f8c2a9e-5b7d-4c1e-9a3f-2d6b8e4c7a1g",
                          "0f8c2a9e5b7d-4c1e-9a3f-2d6b8e4c7a10-", "0f8c2a9e-5b7d-4c1e-9a3f-2d6b8e4c7a10\\u001b"}) {
    CAPTURE(bad);
    Notes notes;
    CHECK_FALSE(merge_settings("{}", "{}", std::string(R"({"deviceId":")") + bad + "\"}", notes).has_value());
    CHECK(noted(notes, Notes::Kind::refused, "\"deviceId\": not written back: the value is not what Pi stores"));
  }
  Notes notes;
  CHECK_FALSE(merge_settings("{}", "{}", R"({"deviceId":7})", notes).has_value());
  CHECK(noted(notes, Notes::Kind::refused, "\"deviceId\": not written back"));
  // The host's own: never changed, never removed.
  const std::string given = R"({"deviceId":")" + id + R"("})";
  Notes changed;
  CHECK_FALSE(
      merge_settings(given, given, R"({"deviceId":"11111111-2222-4333-8444-555555555555"})", changed).has_value());
  CHECK(noted(changed, Notes::Kind::refused, "\"deviceId\": not written back: it is this installation's identity"));
  Notes removed;
  CHECK_FALSE(merge_settings(given, given, "{}", removed).has_value());
  CHECK(noted(removed, Notes::Kind::refused, "\"deviceId\": removed in the jail; not applied"));
}

TEST_CASE("notes: names the jail chose are escaped and shortened; their number is bounded") {
  std::string left = "{";
  for (int i = 0; i < 500; ++i) left += "\"k" + std::to_string(i) + "\":1,";
  left += "\"\\u001b[31mred" + std::string(100, 'x') + "\":1}";
  Notes notes;
  CHECK_FALSE(merge_settings("{}", "{}", left, notes).has_value());
  CHECK(notes.items().size() == Notes::kMaxNotes);
  CHECK(notes.omitted() == 401);
  CHECK(notes.lines().back() == "... and 401 more notes");
  Notes esc;
  CHECK_FALSE(merge_settings("{}", "{}", "{\"\\u001b[31mred" + std::string(100, 'x') + "\":1}", esc).has_value());
  REQUIRE(esc.items().size() == 1);
  const std::string& t = esc.items()[0].text;
  CHECK(t.find('\x1b') == std::string::npos);
  CHECK(t.find("\"\\x1b[31mred") != std::string::npos);  // util::printable's escape
  CHECK(t.find("...\"") != std::string::npos);
}
