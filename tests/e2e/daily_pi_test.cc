// A day's work with the real Pi (pinned and newest) under pi-jail: a
// dotfiles setup where ~/.pi is a symlink, an agent dir that cannot be
// made, settings changed in one run kept for the next.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"
#include "pi_world.h"

using namespace pj::test;
namespace fs = std::filesystem;

TEST_CASE("a symlinked ~/.pi (dotfiles): the jailed Pi finds its agent dir and its models") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[" + bash("echo agent=$PI_CODING_AGENT_DIR") + "]", prefix);
    // ~/.pi -> <base>/dotfiles/pi, the agent dir (models.json) inside it.
    fs::create_directories(w.sb.base + "/dotfiles");
    fs::rename(w.sb.home + "/.pi", w.sb.base + "/dotfiles/pi");
    fs::create_directory_symlink(w.sb.base + "/dotfiles/pi", w.sb.home + "/.pi");
    auto o = w.pi();
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(o.err.find("Unknown provider") == std::string::npos);
    REQUIRE(w.tool_results().size() == 1);
    CHECK(w.tool_results()[0].find("agent=" + fs::canonical(w.sb.base + "/dotfiles/pi/agent").string()) !=
          std::string::npos);
  }
}

TEST_CASE("an agent dir that cannot be made stops the run (125) with the reason and the fix") {
  Sandbox sb;
  // A dangling ~/.pi link (dotfiles not checked out): nothing can be made
  // under it, for root as for anyone.
  fs::create_directory_symlink(sb.base + "/not-checked-out/pi", sb.home + "/.pi");
  auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CAPTURE(o.err);
  CHECK(o.status == 125);
  CHECK(o.err.find("pi-jail: error: Pi's agent dir " + sb.home + "/.pi/agent cannot be made: mkdir " + sb.home +
                   "/.pi/agent") != std::string::npos);
  CHECK(o.err.find("fix:") != std::string::npos);
  CHECK(o.err.find("ENOENT") != std::string::npos);
  CHECK(o.err.find("WARNING") == std::string::npos);
}

namespace {

// Pi's TUI, jailed, in a real terminal: once it is ready, presses Ctrl-T
// (show/hide thinking blocks) until Pi takes it (Pi ignores keys while its
// start-up is in progress; a guard of 20 tries, not a timing assertion),
// then exits with Ctrl-D. Returns the screen as it was after Ctrl-T.
std::string tui_ctrl_t(const PiWorld& w, const std::string& path_extra = "",
                       const std::string& err_file = "/dev/null") {
  std::string env;
  for (const auto& e : w.env()) env += " '" + e + (e.rfind("PATH=", 0) == 0 ? path_extra : "") + "'";
  Tmux t("env PS1='outer$ '" + env + " bash --norc --noprofile", 120, 35);
  REQUIRE(t.wait_for("outer$"));
  // Shown when pi-jail has exited (the typed line has $((6*7)), not 42).
  std::string token = unique_token(), done = "TUI-DONE-42-" + token;
  t.type("cd " + w.sb.ws + " && " + pi_jail() + " --allow-net 127.0.0.1:" + w.port +
         " -- pi --provider scripted --model m 2>" + err_file + "; echo TUI-DONE-$((6*7))-" + token);
  REQUIRE_MESSAGE(t.wait_for("(auto)"), t.screen());
  bool taken = false;
  for (int i = 0; i < 20 && !taken; ++i) {
    t.send({"C-t"});
    for (int j = 0; j < 20 && !taken; ++j) {
      taken = t.screen().find("Thinking blocks: ") != std::string::npos;
      if (!taken) usleep(50 * 1000);
    }
  }
  std::string screen = t.screen();
  CHECK_MESSAGE(taken, screen);
  t.send({"C-d"});
  REQUIRE_MESSAGE(t.wait_for(done), t.screen());
  return screen;
}

// `json` without spaces and newlines (the values compared have none).
std::string compact(std::string json) {
  std::erase_if(json, [](char c) { return c == ' ' || c == '\n'; });
  return json;
}

}  // namespace

TEST_CASE("a TUI setting changed in one jailed run (Ctrl-T) is there in the next; What's New shows once") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    const std::string version = pi_version_in(prefix);
    PiWorld w("[]", prefix);
    // A user who last saw 1.3.0's notes, condensed to one line.
    write_file(w.agent + "/settings.json",
               R"({"retry": {"enabled": false}, "collapseChangelog": true, "lastChangelogVersion": "1.3.0"})");
    std::string first = tui_ctrl_t(w);
    CHECK_MESSAGE(first.find("Updated to v" + version) != std::string::npos, first);
    CHECK_MESSAGE(first.find("Thinking blocks: hidden") != std::string::npos, first);
    std::string host = compact(read_file(w.agent + "/settings.json"));
    CAPTURE(host);
    CHECK(host.find("\"hideThinkingBlock\":true") != std::string::npos);
    CHECK(host.find("\"lastChangelogVersion\":\"" + version + "\"") != std::string::npos);
    // The next run: the notes are not shown again; thinking was hidden, so
    // Ctrl-T now shows it.
    std::string second = tui_ctrl_t(w);
    CHECK_MESSAGE(second.find("Updated to v") == std::string::npos, second);
    CHECK_MESSAGE(second.find("Thinking blocks: visible") != std::string::npos, second);
    host = compact(read_file(w.agent + "/settings.json"));
    CHECK(host.find("\"hideThinkingBlock\":false") != std::string::npos);
  }
}

TEST_CASE("settings a jailed Pi writes that load or run code are not carried back, and are reported") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    write_file(w.agent + "/settings.json", R"({"retry": {"enabled": false}})");
    w.script("[" +
             bash("node -e \"const fs = require('fs'); const f = process.argv[1];"
                  "const j = JSON.parse(fs.readFileSync(f, 'utf8')); j.hideThinkingBlock = true;"
                  "j.shellPath = '/tmp/evil'; j.extensions = ['/tmp/evil.js']; j.npmCommand = ['evil'];"
                  "fs.writeFileSync(f, JSON.stringify(j)); console.log('changed');\" " +
                  w.agent + "/settings.json") +
             "]");
    auto o = w.pi();
    CAPTURE(o.err);
    CHECK(o.status == 0);
    REQUIRE(w.tool_results().size() == 1);
    CHECK(w.tool_results()[0].find("changed") != std::string::npos);
    std::string host = compact(read_file(w.agent + "/settings.json"));
    CAPTURE(host);
    CHECK(host.find("\"hideThinkingBlock\":true") != std::string::npos);
    CHECK(host.find("evil") == std::string::npos);
    for (const char* key : {"shellPath", "extensions", "npmCommand"})
      CHECK(o.err.find(std::string("pi-jail: WARNING: refused: settings.json: \"") + key + "\"") != std::string::npos);
  }
}

TEST_CASE("fd and rg on PATH outside the system directories (~/.cargo/bin) are shown to Pi: it downloads nothing") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    // Stand-ins where `cargo install` puts them: Pi only asks --version.
    std::string bin = w.sb.home + "/.cargo/bin";
    fs::create_directories(bin);
    for (const char* name : {"fd", "rg"}) {
      write_file(bin + "/" + name, "#!/bin/sh\necho \"$0 1.0.0\"\n");
      fs::permissions(bin + "/" + name, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
    }
    fs::permissions(w.sb.home, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
    std::string err = w.sb.base + "/jail-stderr";
    std::string screen = tui_ctrl_t(w, ":" + bin, err);
    CHECK_MESSAGE(screen.find("Downloading") == std::string::npos, screen);
    std::string said = read_file(err);
    CAPTURE(said);
    CHECK(said.find("github.com") == std::string::npos);
    CHECK(said.find("Pi downloads fd and rg") == std::string::npos);
  }
}

TEST_CASE("without fd and rg where Pi looks, one note at start says why and the fix") {
  Sandbox sb;
  std::string bin = sb.base + "/bin";
  fs::create_directories(sb.base + "/opt");
  fs::create_directories(bin);
  write_file(sb.base + "/opt/rg", "#!/bin/sh\n");
  fs::permissions(sb.base + "/opt/rg", fs::perms::owner_all);
  fs::create_symlink(sb.base + "/opt/rg", bin + "/rg");
  // A stand-in named pi (the note is for Pi only).
  write_file(bin + "/pi", "#!/bin/sh\nexit 0\n");
  fs::permissions(bin + "/pi", fs::perms::owner_all);
  // Pi's TUI (a terminal on stdin) is where Pi looks for them.
  std::string err_file = sb.base + "/err";
  {
    Tmux t("env HOME=" + sb.home + " PATH=" + bin + " " + pi_jail() + " -w " + sb.ws + " -- pi 2>" + err_file +
           "; echo DONE-$((6*7)); sleep 60");
    REQUIRE_MESSAGE(t.wait_for("DONE-42"), t.screen());
  }
  Outcome o{0, "", read_file(err_file)};
  CAPTURE(o.err);
  CHECK(o.err.find("pi-jail: Pi downloads fd and rg from github.com when it cannot find them, and the jail refuses "
                   "that (Pi then warns at start): fd is not on PATH; " +
                   bin + "/rg is a link to " + sb.base + "/opt/rg") != std::string::npos);
  CHECK(o.err.find("apt install fd-find ripgrep") != std::string::npos);
  // Pi's print mode (stdin not a terminal), or any other command: not a word about it.
  for (std::vector<std::string> cmd : {std::vector<std::string>{"pi", "-p", "x"}, {"/bin/true"}}) {
    std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--"};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto other = run(argv, {"HOME=" + sb.home, "PATH=" + bin});
    CHECK(other.status == 0);
    CHECK(other.err.find("fd and rg") == std::string::npos);
  }
}

namespace {

// pi-jail ... -- pi -p (with sessions) `extra` `prompt`, from `dir` (the workspace).
Outcome pi_with_sessions(const PiWorld& w, const std::string& dir, const std::vector<std::string>& extra,
                         const std::string& prompt, bool jailed = true) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", dir};
  if (jailed) argv.insert(argv.end(), {pi_jail(), "-w", dir, "--allow-net", "127.0.0.1:" + w.port, "--"});
  argv.insert(argv.end(), {"pi", "-p", "--provider", "scripted", "--model", "m"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(prompt);
  return run(argv, w.env());
}

// The session files Pi keeps for `dir` (sessions/--<dir with - for />--/).
std::vector<std::string> sessions_of(const PiWorld& w, const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(w.agent + "/sessions/" + pi_session_dir(dir), ec))
    out.push_back(e.path().string());
  return out;
}

}  // namespace

TEST_CASE(
    "sessions under the jail: --continue picks up the last jailed run; a session from another workspace stops the "
    "run") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    // Two jailed runs in the workspace: the second continues the first.
    std::string first_prompt = "first-" + unique_token(), second_prompt = "second-" + unique_token();
    auto first = pi_with_sessions(w, w.sb.ws, {}, first_prompt);
    CAPTURE(first.err);
    REQUIRE(first.status == 0);
    auto second = pi_with_sessions(w, w.sb.ws, {"--continue"}, second_prompt);
    CAPTURE(second.err);
    CHECK(second.status == 0);
    // The request of the second run (the log line naming its prompt)
    // carries the first run's turn too.
    std::string log = read_file(w.sb.base + "/model-log.jsonl");
    size_t at = log.rfind(second_prompt);
    REQUIRE(at != std::string::npos);
    size_t from = log.rfind('\n', at);
    std::string request = log.substr(from == std::string::npos ? 0 : from + 1,
                                     log.find('\n', at) - (from == std::string::npos ? 0 : from + 1));
    CHECK_MESSAGE(request.find(first_prompt) != std::string::npos, request);
    CHECK(sessions_of(w, w.sb.ws).size() == 1);

    // A session recorded (without the jail) in another directory.
    REQUIRE(pi_with_sessions(w, w.sb.outside, {}, "elsewhere", false).status == 0);
    auto other = sessions_of(w, w.sb.outside);
    REQUIRE(other.size() == 1);
    // It lies among another project's sessions, which the jail does not
    // show: Pi would start a new conversation there that is not kept, so
    // nothing runs, and the fix is named.
    const std::string other_before = read_file(other[0]);
    auto o = pi_with_sessions(w, w.sb.ws, {"--session", other[0]}, "resume it");
    CAPTURE(o.err);
    CHECK(o.status == 125);
    CHECK(o.err.find("the session " + other[0] + " was recorded in " + w.sb.outside +
                     ", outside this jail's workspace " + w.sb.ws +
                     ": the jail shows only this workspace's sessions") != std::string::npos);
    CHECK(o.err.find("pi-jail -w " + w.sb.outside + " -- pi --session") != std::string::npos);
    CHECK(read_file(other[0]) == other_before);
    // A copy of it in the workspace is shown: Pi says its directory does not
    // exist, and pi-jail adds the note.
    fs::copy_file(other[0], w.sb.ws + "/copied.jsonl");
    auto copied = pi_with_sessions(w, w.sb.ws, {"--session", w.sb.ws + "/copied.jsonl"}, "resume the copy");
    CAPTURE(copied.err);
    CHECK(copied.status == 1);
    CHECK(copied.err.find("Stored session working directory does not exist: " + w.sb.outside) != std::string::npos);
    CHECK(copied.err.find("the jail does not show that directory") != std::string::npos);
    // The session of this workspace: no such note.
    auto own = pi_with_sessions(w, w.sb.ws, {"--session", sessions_of(w, w.sb.ws)[0]}, "again");
    CHECK(own.status == 0);
    CHECK(own.err.find("was recorded in") == std::string::npos);
  }
}

namespace {

// The request the model server logged for the run whose prompt is `prompt`.
std::string request_with(const PiWorld& w, const std::string& prompt) {
  std::string log = read_file(w.sb.base + "/model-log.jsonl");
  size_t at = log.rfind(prompt);
  if (at == std::string::npos) return "";
  size_t from = log.rfind('\n', at);
  from = from == std::string::npos ? 0 : from + 1;
  return log.substr(from, log.find('\n', at) - from);
}

}  // namespace

TEST_CASE("a jail on one workspace cannot plant a conversation that pi -c loads in another") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    const std::string b = w.sb.outside + "/project-b";
    fs::create_directories(b);
    // Project B's own conversation, jailed on B.
    const std::string b_first = "b-first-" + unique_token(), planted = "planted-" + unique_token();
    auto first = pi_with_sessions(w, b, {}, b_first);
    CAPTURE(first.err);
    REQUIRE(first.status == 0);
    REQUIRE(sessions_of(w, b).size() == 1);
    const std::string b_dir = fs::path(sessions_of(w, b)[0]).parent_path().string();
    const std::string b_before = read_file(sessions_of(w, b)[0]);

    // A jail on workspace A copies B's session with its words replaced, as
    // a newer session of B's, and appends to B's own.
    auto attack = run({"/usr/bin/env", "-C", w.sb.ws, pi_jail(), "-w", w.sb.ws, "--", "/bin/sh", "-c",
                       "mkdir -p " + b_dir + "; for f in " + b_dir + "/*.jsonl; do sed 's/" + b_first + "/" + planted +
                           "/g' \"$f\" > " + b_dir + "/zz-newer.jsonl; done; touch -d '+1 hour' " + b_dir +
                           "/zz-newer.jsonl; cat " + b_dir + "/*.jsonl >> " + sessions_of(w, b)[0] + "; echo attacked"},
                      w.env());
    CAPTURE(attack.err);
    CHECK(attack.out.find("attacked") != std::string::npos);
    CHECK(sessions_of(w, b).size() == 1);
    CHECK(read_file(sessions_of(w, b)[0]) == b_before);

    // `pi -c` in B continues B's own conversation, and only that.
    const std::string b_second = "b-second-" + unique_token();
    auto second = pi_with_sessions(w, b, {"--continue"}, b_second);
    CAPTURE(second.err);
    CHECK(second.status == 0);
    const std::string request = request_with(w, b_second);
    REQUIRE(!request.empty());
    CHECK_MESSAGE(request.find(b_first) != std::string::npos, request);
    CHECK_MESSAGE(request.find(planted) == std::string::npos, request);
  }
}

namespace {

// A script step: Pi's bash tool prints settings.json, sets `key` to the
// JSON `value` in it and prints "changed".
std::string set_setting(const PiWorld& w, const std::string& key, const std::string& value) {
  return bash("cat " + w.agent +
              "/settings.json; echo; node -e \"const fs = require('fs'); const f = process.argv[1];"
              "const j = JSON.parse(fs.readFileSync(f, 'utf8')); j." +
              key + " = " + value +
              ";"
              "fs.writeFileSync(f, JSON.stringify(j)); console.log('changed');\" " +
              w.agent + "/settings.json");
}

}  // namespace

TEST_CASE("a settings.json symlinked into a dotfiles repository is read through and written back to its target") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    const std::string dot = w.sb.base + "/dotfiles/pi/settings.json";
    fs::create_directories(w.sb.base + "/dotfiles/pi");
    write_file(dot, R"({"retry": {"enabled": false}, "lastChangelogVersion": "1.0.0"})");
    fs::remove(w.agent + "/settings.json");
    fs::create_symlink(dot, w.agent + "/settings.json");
    w.script("[" + set_setting(w, "hideThinkingBlock", "true") + "]");
    auto o = w.pi();
    CAPTURE(o.err);
    CHECK(o.status == 0);
    REQUIRE(w.tool_results().size() == 1);
    CHECK(w.tool_results()[0].find("1.0.0") != std::string::npos);  // read through the link
    CHECK(w.tool_results()[0].find("changed") != std::string::npos);
    CHECK(fs::is_symlink(w.agent + "/settings.json"));
    CHECK(fs::read_symlink(w.agent + "/settings.json") == dot);
    const std::string target = compact(read_file(dot));
    CAPTURE(target);
    CHECK(target.find("\"hideThinkingBlock\":true") != std::string::npos);
    CHECK(target.find("\"retry\":{\"enabled\":false}") != std::string::npos);
  }
}

TEST_CASE("the built-in light theme chosen in one jailed run is the theme of the next") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    write_file(w.agent + "/settings.json", R"({"retry": {"enabled": false}, "theme": "dark"})");
    w.script("[" + set_setting(w, "theme", "'light'") + "]");
    auto first = w.pi();
    CAPTURE(first.err);
    CHECK(first.status == 0);
    CHECK(first.err.find("\"theme\": not written back") == std::string::npos);
    CHECK(compact(read_file(w.agent + "/settings.json")).find("\"theme\":\"light\"") != std::string::npos);
    w.script("[" + bash("cat " + w.agent + "/settings.json") + "]");
    auto second = w.pi();
    CHECK(second.status == 0);
    REQUIRE(w.tool_results().size() == 1);
    CHECK(w.tool_results()[0].find("light") != std::string::npos);
  }
}

TEST_CASE("pi install, install -l and remove inside the jail stop at once, saying how to install outside") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    const std::string models = read_file(w.agent + "/models.json"), settings = read_file(w.agent + "/settings.json");
    for (std::vector<std::string> words : {std::vector<std::string>{"install", "npm:left-pad"},
                                           {"install", "-l", "npm:left-pad"},
                                           {"remove", "npm:left-pad"},
                                           {"uninstall", "-l", "npm:left-pad"}}) {
      CAPTURE(words[0] + " " + words[1]);
      std::vector<std::string> argv{"/usr/bin/env", "-C", w.sb.ws, pi_jail(), "-w", w.sb.ws, "--", "pi"};
      argv.insert(argv.end(), words.begin(), words.end());
      auto o = run(argv, w.env());
      CAPTURE(o.out);
      CAPTURE(o.err);
      CHECK(o.status == 125);
      CHECK(o.out.find("Installed") == std::string::npos);
      CHECK(o.err.find("pi-jail: error: pi " + words[0] +
                       " inside the jail would be thrown away: the jail keeps "
                       "Pi's packages and extensions read-only. Run it outside the jail (`command pi " +
                       words[0] +
                       " ...` when pi is an alias for pi-jail pi); the next jailed Pi loads what is installed, "
                       "read-only") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(w.sb.ws + "/.pi/settings.json"));
    CHECK_FALSE(fs::exists(w.agent + "/npm"));
    CHECK(read_file(w.agent + "/settings.json") == settings);
    CHECK(read_file(w.agent + "/models.json") == models);
  }
}

TEST_CASE("pi install from Pi's bash tool inside the jail, user-level and -l, is refused at once and changes nothing") {
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    PiWorld w("[]", prefix);
    fs::create_directories(w.sb.ws + "/ext");
    write_file(w.sb.ws + "/ext/index.ts", "export default function () {}\n");
    const std::string models = read_file(w.agent + "/models.json"), settings = read_file(w.agent + "/settings.json");
    // A local path needs no network: without the guard Pi says "Installed".
    w.script("[" + bash("pi install ./ext; echo status=$?") + ", " + bash("pi install -l ./ext; echo status=$?") +
             ", " + bash("pi install npm:left-pad; echo status=$?") + ", " +
             bash("pi install -l --approve npm:left-pad; echo status=$?") + "]");
    auto o = w.pi();
    CAPTURE(o.err);
    CHECK(o.status == 0);
    const auto results = w.tool_results();
    REQUIRE(results.size() == 4);
    const std::string sentence =
        "pi-jail: pi install inside the jail would be thrown away: the jail keeps Pi's packages and extensions "
        "read-only. Run it outside the jail (`command pi install ...` when pi is an alias for pi-jail pi); the next "
        "jailed Pi loads what is installed, read-only";
    // The README's troubleshooting quotes it word for word.
    CHECK(read_file(need_env("PJ_DATA_DIR") + "/README.md").find("\n| ``" + sentence + "``") != std::string::npos);
    for (const auto& r : results) {
      CAPTURE(r);
      CHECK(r.find(sentence) != std::string::npos);
      CHECK(r.find("status=125") != std::string::npos);
      CHECK(r.find("Installed") == std::string::npos);
    }
    CHECK(o.err.find("not written back") == std::string::npos);  // nothing was tried
    CHECK_FALSE(fs::exists(w.sb.ws + "/.pi/settings.json"));
    CHECK_FALSE(fs::exists(w.sb.ws + "/.pi/npm"));
    CHECK_FALSE(fs::exists(w.agent + "/npm"));
    CHECK(read_file(w.agent + "/settings.json") == settings);
    CHECK(read_file(w.agent + "/models.json") == models);
    // Everything else still runs the real Pi.
    w.script("[" + bash("pi --version; echo status=$?") + "]");
    auto version = w.pi();
    CHECK(version.status == 0);
    REQUIRE(w.tool_results().size() == 1);
    CHECK(w.tool_results()[0].find(pi_version_in(prefix)) != std::string::npos);
    CHECK(w.tool_results()[0].find("status=0") != std::string::npos);
  }
}
