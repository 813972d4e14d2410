// Pi's agent dir under the pi profile, with the real Pi (the pinned
// version and the newest): what a jailed Pi plants there for later does not
// run in the next Pi, jailed or not; a Pi beside the jail, or after a
// SIGKILL of pi-jail, starts normally; the jailed Pi's system prompt is
// the unjailed one's; data settings are written back and code settings
// refused.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"
#include "pi_world.h"

using namespace pj::test;
namespace fs = std::filesystem;

namespace {

// A Pi extension that, when Pi loads it, creates `file`.
std::string extension_js(const std::string& file) {
  return "import fs from \"node:fs\";\nexport default function (pi) { fs.writeFileSync(" + json_str(file) +
         ", \"loaded\\n\"); }\n";
}
std::string extension_ts(const std::string& file) {
  return "import fs from \"node:fs\";\nexport default function (pi: unknown): void { fs.writeFileSync(" +
         json_str(file) + ", \"loaded\\n\"); }\n";
}

std::string write_step(const std::string& path, const std::string& content) {
  return tool("write", "{\"path\": " + json_str(path) + ", \"content\": " + json_str(content) + "}");
}

// The names in `dir` (sorted, space-separated); empty when it has none.
std::string names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

// Every entry under `dir` except sessions/ and what is in it: its path,
// type and size, one a line (what a run left behind shows as a difference).
std::string listing(const std::string& dir) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = fs::relative(it->path(), dir).string();
    if (rel == "sessions") {
      it.disable_recursion_pending();
      continue;
    }
    auto st = it->symlink_status();
    std::string kind = fs::is_symlink(st)        ? "link"
                       : fs::is_directory(st)    ? "dir"
                       : fs::is_regular_file(st) ? "file"
                                                 : "other";
    lines.push_back(rel + " " + kind + (kind == "file" ? " " + std::to_string(fs::file_size(it->path())) : ""));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The agent dir of a user who has two Pi packages installed, from npm and
// from git (settings.json lists them; they record in <ws>/loaded/ that Pi
// loaded them), and one literal API key.
void install_packages(const PiWorld& w) {
  fs::create_directories(w.sb.ws + "/marks");
  fs::create_directories(w.sb.ws + "/loaded");
  write_file(w.agent + "/auth.json", R"({"other": {"type": "api_key", "key": "literal-other"}})");
  write_file(w.agent + "/settings.json",
             R"({"retry": {"enabled": false}, "packages": ["npm:good", "git:github.com/good/ext"]})");
  fs::create_directories(w.agent + "/npm/node_modules/good/extensions");
  write_file(w.agent + "/npm/node_modules/good/package.json", R"({"name": "good", "version": "1.0.0"})");
  write_file(w.agent + "/npm/node_modules/good/extensions/good.js", extension_js(w.sb.ws + "/loaded/npm-good"));
  fs::create_directories(w.agent + "/git/github.com/good/ext/extensions");
  write_file(w.agent + "/git/github.com/good/ext/extensions/good.js", extension_js(w.sb.ws + "/loaded/git-good"));
}

// What a run plants in the agent dir for a later Pi to run, each creating
// its own mark in <ws>/marks when run: "!command" API keys in auth.json
// (for the provider the next Pi uses, and another), an extension at the
// top, a new npm package and a new git package that settings.json is made
// to list, an extension added to each installed package, fd and rg in
// tools/ (Pi moves them to bin/ at start) and rg in bin/ (first on the
// bash tool's PATH).
std::string planting_script(const PiWorld& w) {
  const std::string a = w.agent, m = w.sb.ws + "/marks/";
  auto sh = [&](const std::string& mark) { return "#!/bin/sh\ntouch " + m + mark + "\necho planted\n"; };
  std::string auth =
      "const fs = require('fs'); const f = process.argv[1];"
      "const j = JSON.parse(fs.readFileSync(f, 'utf8'));"
      "j.x = {type: 'api_key', key: '!touch " +
      m +
      "auth-x; echo k'};"
      "j.scripted = {type: 'api_key', key: '!touch " +
      m +
      "auth-scripted; echo test'};"
      "fs.writeFileSync(f, JSON.stringify(j)); console.log('auth-planted');";
  std::string settings =
      "const fs = require('fs'); const f = process.argv[1];"
      "const j = JSON.parse(fs.readFileSync(f, 'utf8'));"
      "j.packages.push('npm:evil', 'git:github.com/evil/x');"
      "fs.writeFileSync(f, JSON.stringify(j)); console.log('settings-planted');";
  return "[" + bash("node -e \"" + auth + "\" " + a + "/auth.json") + ", " +
         bash("node -e \"" + settings + "\" " + a + "/settings.json") + ", " +
         write_step(a + "/extensions/evil.ts", extension_ts(m + "ext-top")) + ", " +
         write_step(a + "/npm/node_modules/evil/package.json",
                    R"({"name": "evil", "version": "1.0.0", "pi": {"extensions": ["./index.js"]}})") +
         ", " + write_step(a + "/npm/node_modules/evil/index.js", extension_js(m + "npm-evil")) + ", " +
         write_step(a + "/npm/node_modules/good/extensions/evil.js", extension_js(m + "npm-good-evil")) + ", " +
         write_step(a + "/git/github.com/evil/x/extensions/x.ts", extension_ts(m + "git-evil")) + ", " +
         write_step(a + "/git/github.com/good/ext/extensions/x.ts", extension_ts(m + "git-good-x")) + ", " +
         write_step(a + "/tools/rg", sh("tools-rg")) + ", " + write_step(a + "/tools/fd", sh("tools-fd")) + ", " +
         write_step(a + "/bin/rg", sh("bin-rg")) + ", " +
         bash("chmod +x " + a + "/tools/rg " + a + "/tools/fd " + a + "/bin/rg; echo planted-all") + "]";
}

// The marks made so far (as names_in), removed.
std::string take_marks(const PiWorld& w) {
  std::string names = names_in(w.sb.ws + "/marks");
  fs::remove_all(w.sb.ws + "/marks");
  fs::create_directories(w.sb.ws + "/marks");
  return names;
}

// The next Pi's task: run rg and fd (bin/ is first on its PATH).
const char* const kNextScript =
    R"([{"tool": "bash", "args": {"command": "rg --version; fd --version; echo next-ran"}}])";

// The next Pi ran normally: its bash call answered, and it loaded the
// installed packages (so it would have loaded what was planted there).
void check_next_run(const PiWorld& w, const Outcome& o) {
  CAPTURE(o.err);
  CHECK(o.status == 0);
  auto r = w.tool_results();
  REQUIRE(r.size() == 1);
  CHECK(r[0].find("next-ran") != std::string::npos);
  CHECK(r[0].find("planted") == std::string::npos);
  CHECK(names_in(w.sb.ws + "/loaded") == "git-good npm-good");
  fs::remove_all(w.sb.ws + "/loaded");
  fs::create_directories(w.sb.ws + "/loaded");
}

}  // namespace

TEST_CASE("what a jailed Pi plants in the agent dir runs neither in the next jailed nor in the next unjailed Pi") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[]", prefix);
    install_packages(w);
    w.script(planting_script(w));
    auto planted = w.pi();
    CAPTURE(planted.err);
    CHECK(planted.status == 0);
    auto r = w.tool_results();
    REQUIRE(r.size() == 12);
    CHECK(r[0].find("auth-planted") != std::string::npos);  // inside, the copy took it
    CHECK(r[11].find("planted-all") != std::string::npos);
    // The installed packages are read-only inside.
    CHECK(r[5].find("EROFS") != std::string::npos);
    CHECK(r[7].find("EROFS") != std::string::npos);
    // Said on stderr: the "!command" keys and the package list were refused.
    CHECK(planted.err.find("pi-jail: WARNING: refused: auth.json: provider \"x\"") != std::string::npos);
    CHECK(planted.err.find("pi-jail: WARNING: refused: auth.json: provider \"scripted\"") != std::string::npos);
    CHECK(planted.err.find("WARNING: refused: settings.json: \"packages\"") != std::string::npos);
    // The planting Pi itself reads auth.json again for its next request and
    // runs the "!command" key it just planted: inside its own jail, where
    // it may. Only what the next Pis run counts.
    CHECK(take_marks(w) == "auth-scripted");

    w.script(kNextScript);
    check_next_run(w, w.pi());
    check_next_run(w, w.pi_unjailed());
    CHECK(names_in(w.sb.ws + "/marks") == "");
    for (std::string path : {"extensions", "tools", "bin", "npm/node_modules/evil", "git/github.com/evil",
                             "npm/node_modules/good/extensions/evil.js", "git/github.com/good/ext/extensions/x.ts"}) {
      CAPTURE(path);
      CHECK_FALSE(exists(w.agent + "/" + path));
    }
    CHECK(read_file(w.agent + "/auth.json").find("!touch") == std::string::npos);
    CHECK(read_file(w.agent + "/auth.json").find("literal-other") != std::string::npos);
    CHECK(read_file(w.agent + "/settings.json").find("evil") == std::string::npos);
  }
}

// The test above can see a planted file run: the same planting with no jail
// makes the next Pi run every one of them.
TEST_CASE("control: without the jail, the same planting runs in the next Pi") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[]", prefix);
    install_packages(w);
    w.script(planting_script(w));
    auto planted = w.pi({"--unsandboxed"});
    CAPTURE(planted.err);
    CHECK(planted.status == 0);
    CHECK(take_marks(w) == "auth-scripted");  // as in the jail, the planting Pi runs its own key
    w.script(kNextScript);
    auto next = w.pi_unjailed();
    CAPTURE(next.err);
    CHECK(next.status == 0);
    // All but two: the key for provider "x", which this Pi never asks
    // for, and tools/rg, which Pi deletes at start because bin/rg exists.
    CHECK(names_in(w.sb.ws + "/marks") ==
          "auth-scripted bin-rg ext-top git-evil git-good-x npm-evil npm-good-evil tools-fd");
  }
}

TEST_CASE("a Pi beside a jailed run, and any Pi after pi-jail was SIGKILLed, starts and completes normally") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[]", prefix);
    const std::string nap = "3." + unique_token();  // a sleep of about 3 s, named for this test
    const std::string answer = "the second Pi answered";
    w.script("{\"m\": [" + bash("sleep " + nap + "; echo slept") + "], \"child\": [{\"text\": " + json_str(answer) +
             "}]}");
    auto answered = [&](const Outcome& o) {
      CAPTURE(o.err);
      CHECK(o.status == 0);
      CHECK(o.out.find(answer) != std::string::npos);
    };
    // What the host's own Pi keeps in its agent dir, once it has run.
    answered(w.pi_unjailed({}, "child"));
    const std::string before = listing(w.agent);

    // Beside a jailed Pi that is in its bash tool call.
    pid_t jailed = spawn(w.pi_argv(), w.env());
    REQUIRE(eventually([&] { return !host_processes_with("sleep " + nap).empty(); }));
    answered(w.pi_unjailed({}, "child"));
    CHECK(wait_status_guarded(jailed) == 0);
    REQUIRE(w.tool_results("m").size() == 1);
    CHECK(w.tool_results("m")[0].find("slept") != std::string::npos);
    CHECK(listing(w.agent) == before);

    // pi-jail SIGKILLed in the middle of the run: nothing is left in the
    // agent dir (no placeholder, no lock), and the next Pis, unjailed and
    // jailed, run normally.
    pid_t killed = spawn(w.pi_argv(), w.env());
    REQUIRE(eventually([&] { return !host_processes_with("sleep " + nap).empty(); }));
    ::kill(killed, SIGKILL);
    CHECK(wait_status_guarded(killed) == 128 + SIGKILL);
    CHECK(eventually([&] { return host_processes_with("sleep " + nap).empty(); }));
    CHECK(listing(w.agent) == before);
    answered(w.pi_unjailed({}, "child"));
    answered(w.pi({}, {}, "child"));
    CHECK(listing(w.agent) == before);
  }
}

TEST_CASE("a jailed Pi's system prompt is the unjailed one's for the same agent dir") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[{\"text\": \"hello\"}]", prefix);
    // The context files and skills Pi puts in its system prompt, from the
    // agent dir and the working folder.
    write_file(w.agent + "/AGENTS.md", "# Agent-dir rules\nAnswer in haiku.\n");
    fs::create_directories(w.agent + "/skills/demo");
    write_file(w.agent + "/skills/demo/SKILL.md",
               "---\nname: demo\ndescription: A demo skill for the system prompt test.\n---\nDo the demo.\n");
    write_file(w.sb.ws + "/AGENTS.md", "# Project rules\nRun the tests.\n");
    auto jailed = w.pi();
    CAPTURE(jailed.err);
    CHECK(jailed.status == 0);
    const std::string inside = w.system_prompt();
    auto unjailed = w.pi_unjailed();
    CAPTURE(unjailed.err);
    CHECK(unjailed.status == 0);
    const std::string outside = w.system_prompt();
    REQUIRE(!outside.empty());
    CHECK(outside.find("Answer in haiku.") != std::string::npos);
    CHECK(outside.find("Run the tests.") != std::string::npos);
    CHECK(outside.find("A demo skill for the system prompt test.") != std::string::npos);
    CHECK(inside == outside);
  }
}

TEST_CASE("a jailed Pi's data settings are written back, a package list is refused and said") {
  PiWorld w("[]");
  write_file(w.agent + "/settings.json", R"({"retry": {"enabled": false}, "lastChangelogVersion": "1.0.0"})");
  w.script("[" +
           bash("node -e \"const fs = require('fs'); const f = process.argv[1];"
                "const j = JSON.parse(fs.readFileSync(f, 'utf8')); j.lastChangelogVersion = '9.9.9';"
                "j.packages = ['evil']; fs.writeFileSync(f, JSON.stringify(j)); console.log('changed');\" " +
                w.agent + "/settings.json") +
           "]");
  auto o = w.pi();
  CAPTURE(o.err);
  CHECK(o.status == 0);
  REQUIRE(w.tool_results().size() == 1);
  CHECK(w.tool_results()[0].find("changed") != std::string::npos);
  std::string host = read_file(w.agent + "/settings.json");
  CAPTURE(host);
  CHECK(host.find("9.9.9") != std::string::npos);
  CHECK(host.find("1.0.0") == std::string::npos);
  CHECK(host.find("packages") == std::string::npos);
  CHECK(host.find("evil") == std::string::npos);
  CHECK(host.find("retry") != std::string::npos);
  CHECK(o.err.find("pi-jail: WARNING: refused: settings.json: \"packages\"") != std::string::npos);
}
