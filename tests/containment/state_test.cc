// What a run leaves behind: nothing a jail writes may widen, weaken or
// break a later run, another jail, or the host. Each test plants what an
// attacker inside would, then looks at the next run and at the host.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.h"

using namespace pj::test;

namespace {

// pi-jail -q -w ws [extra] -- /bin/sh -c script, from ws, HOME=home.
Outcome sh(const Sandbox& sb, const std::string& script, const std::vector<std::string>& extra = {}) {
  return sb.jail({"/bin/sh", "-c", script}, extra);
}

Outcome git(const std::vector<std::string>& args, const std::string& home) {
  std::vector<std::string> argv{"/usr/bin/git", "-c", "user.name=t", "-c", "user.email=t@e"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {"HOME=" + home});
}

// The workspace entries a run may leave: none but what the test made.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("a .git file planted by one run is no grant for the next: ~/.ssh stays out of reach") {
  Sandbox sb;
  for (const std::string& target : {sb.home + "/.ssh", sb.outside, std::string("/etc")}) {
    CAPTURE(target);
    auto plant = sh(sb, "printf 'gitdir: " + target + "\\n' > .git && echo planted");
    REQUIRE(trim(plant.out) == "planted");
    auto next = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c",
                     "cat " + target + "/id_ed25519 " + target + "/secret 2>&1; echo k > " + target +
                         "/authorized_keys && echo wrote"},
                    {"HOME=" + sb.home});
    CAPTURE(next.err);
    CHECK(next.status != 0);
    CHECK(next.out.find("CANARY") == std::string::npos);
    CHECK(next.out.find("wrote") == std::string::npos);
    CHECK_FALSE(exists(target + "/authorized_keys"));
    CHECK(next.err.find("is not a git worktree that git would accept") != std::string::npos);
    ::unlink((sb.ws + "/.git").c_str());
  }
}

TEST_CASE("a retargeted worktree and a commondir inside a planted git dir grant nothing") {
  Sandbox sb;
  std::string main_repo = sb.outside + "/main";
  std::string wt = sb.ws + "/wt";
  REQUIRE(git({"init", "-q", main_repo}, sb.home).status == 0);
  REQUIRE(git({"-C", main_repo, "commit", "-q", "--allow-empty", "-m", "first"}, sb.home).status == 0);
  REQUIRE(git({"-C", main_repo, "worktree", "add", "-q", wt}, sb.home).status == 0);
  // The genuine worktree is granted, announced, and shown by plain explain with its source.
  auto genuine = run({"/usr/bin/env", "-C", wt, pi_jail(), "-w", wt, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(genuine.status == 0);
  CHECK(genuine.err.find("git worktree " + wt + "/.git -> ") != std::string::npos);
  CHECK(genuine.err.find(main_repo + "/.git is writable") != std::string::npos);
  auto explained = run({"/usr/bin/env", "-C", wt, pi_jail(), "explain", "-w", wt}, {"HOME=" + sb.home});
  CHECK(explained.out.find("read-write      " + main_repo + "/.git") != std::string::npos);
  // Its .git file is read-only.
  auto retarget = run({"/usr/bin/env", "-C", wt, pi_jail(), "-q", "-w", wt, "--", "/bin/sh", "-c",
                       "printf 'gitdir: " + sb.home + "/.ssh\\n' > .git && echo retargeted"},
                      {"HOME=" + sb.home});
  CHECK(retarget.out.find("retargeted") == std::string::npos);
  // Retargeted from outside (as a jail with another policy could), it is refused.
  write_file(wt + "/.git", "gitdir: " + sb.home + "/.ssh\n");
  auto next = run({"/usr/bin/env", "-C", wt, pi_jail(), "-w", wt, "--", "/bin/sh", "-c",
                   "cat " + sb.home + "/.ssh/id_ed25519 2>&1"},
                  {"HOME=" + sb.home});
  CHECK(next.out.find("CANARY") == std::string::npos);
  CHECK(next.err.find("not a git worktree") != std::string::npos);

  // A git dir inside the workspace whose commondir names ~/.ssh: no grant either.
  std::filesystem::create_directories(sb.ws + "/fake/worktrees/x");
  write_file(sb.ws + "/fake/worktrees/x/commondir", sb.home + "/.ssh\n");
  write_file(sb.ws + "/fake/worktrees/x/gitdir", sb.ws + "/.git\n");
  write_file(sb.ws + "/.git", "gitdir: fake/worktrees/x\n");
  auto commondir = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c",
                        "cat " + sb.home + "/.ssh/id_ed25519 2>&1"},
                       {"HOME=" + sb.home});
  CHECK(commondir.out.find("CANARY") == std::string::npos);
  CHECK(commondir.err.find("not a git worktree") != std::string::npos);
}

TEST_CASE("the jail cannot redirect the host's git: .git/commondir is read-only and git works inside") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  std::string evil = sb.ws + "/evil";
  auto o = sh(sb, "git init -q evil && git -C evil config core.fsmonitor 'touch " + sb.ws +
                      "/pwned' ; echo ../evil/.git > .git/commondir && echo redirected; git status --short >/dev/null "
                      "&& echo git-works; cat .git/commondir");
  CAPTURE(o.err);
  CHECK(o.out.find("redirected") == std::string::npos);
  CHECK(o.out.find("git-works") != std::string::npos);
  CHECK_FALSE(exists(sb.ws + "/.git/commondir"));
  auto host = git({"-C", sb.ws, "status", "--short"}, sb.home);
  CHECK(host.status == 0);
  CHECK_FALSE(exists(sb.ws + "/pwned"));
}

TEST_CASE("a .git that is a symlink stops the next run, naming it") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.outside + "/repo"}, sb.home).status == 0);
  ::symlink((sb.outside + "/repo/.git").c_str(), (sb.ws + "/.git").c_str());
  auto o = sh(sb, "echo ran");
  CHECK(o.status == 125);
  CHECK(o.out.find("ran") == std::string::npos);
  CHECK(o.err.find(sb.ws + "/.git is a symlink") != std::string::npos);
}

TEST_CASE("git add -A inside picks up no placeholder, and the host's git status stays clean") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  write_file(sb.ws + "/file", "x\n");
  REQUIRE(git({"-C", sb.ws, "add", "file"}, sb.home).status == 0);
  REQUIRE(git({"-C", sb.ws, "commit", "-qm", "one"}, sb.home).status == 0);
  auto o = sh(sb,
              "git add -A && git status --porcelain && git -c user.name=t -c user.email=t@e commit -qm two "
              "2>&1; echo done");
  CAPTURE(o.err);
  CHECK(trim(o.out).find("nothing to commit") != std::string::npos);
  CHECK(trim(git({"-C", sb.ws, "status", "--porcelain"}, sb.home).out).empty());
  CHECK(entries(sb.ws) == std::vector<std::string>{".git", "file"});
}

TEST_CASE("two jails on one workspace: when the first ends, the second still cannot plant") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  std::vector<std::string> base{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--", "/bin/sh", "-c"};
  auto first = base;
  first.push_back("sleep 1");
  pid_t a = spawn(first, {"HOME=" + sb.home});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto second = base;
  second.push_back(
      "sleep 3; echo evil > .envrc && echo planted-envrc; echo x > .git/hooks/post-checkout && echo planted-hook; "
      "mkdir -p .pi && echo x > .pi/jail.toml && echo planted-pi; echo ../x > .git/commondir && echo "
      "planted-commondir; "
      "true");
  auto b = run(second, {"HOME=" + sb.home});
  CHECK(wait_status(a) == 0);
  CAPTURE(b.err);
  CHECK(b.out.find("planted") == std::string::npos);
  CHECK_FALSE(exists(sb.ws + "/.git/hooks/post-checkout"));
  CHECK(entries(sb.ws) == std::vector<std::string>{".git"});
  CHECK_FALSE(exists(sb.ws + "/.git/commondir"));
}

TEST_CASE("after a SIGKILL of pi-jail at any point of start-up, the next start leaves no placeholder") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  for (int delay_ms : {0, 2, 5, 10, 20, 40, 80, 150, 300}) {
    CAPTURE(delay_ms);
    pid_t p = spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--", "/bin/sleep", "5"},
                    {"HOME=" + sb.home});
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(p, SIGKILL);
    wait_status(p);
  }
  auto clean = sh(sb, "true");
  CHECK(clean.status == 0);
  CHECK(entries(sb.ws) == std::vector<std::string>{".git"});
  CHECK_FALSE(exists(sb.ws + "/.git/commondir"));
  CHECK(trim(git({"-C", sb.ws, "status", "--porcelain"}, sb.home).out).empty());
  std::string runs = sb.home + "/.local/state/pi-jail/runs";
  CHECK((!exists(runs) || entries(runs).empty()));
}

TEST_CASE("the agent dir is read-only for later runs: nothing planted there survives") {
  Sandbox sb;
  std::string agent = sb.home + "/.pi/agent";
  const std::string mine = "sessions/" + pi_session_dir(sb.ws);
  std::filesystem::create_directories(agent + "/extensions");
  write_file(agent + "/auth.json", R"({"p": {"type": "api_key", "key": "literal"}})");
  write_file(agent + "/AGENTS.md", "be nice\n");
  auto o =
      sh(sb, "cd " + agent +
                 " && echo '{\"x\":{\"type\":\"api_key\",\"key\":\"!touch MARK; echo k\"}}' > auth.json && "
                 "echo auth-inside; mkdir -p npm/node_modules/p/extensions tools git/h/p/extensions && "
                 "echo code > npm/node_modules/p/extensions/e.ts && echo code > tools/rg && "
                 "echo code > git/h/p/extensions/e.ts && echo code > bin && echo planted-new; "
                 "echo evil > extensions/evil.ts && echo planted-ext; echo evil >> AGENTS.md && echo agents-inside; "
                 "echo s > " +
                 mine + "/s.jsonl && echo session");
  CAPTURE(o.err);
  CHECK(o.out.find("planted-ext") == std::string::npos);  // shown read-only
  CHECK(o.out.find("session") != std::string::npos);      // sessions are written in place
  for (const char* p : {"npm", "tools", "git", "bin", "extensions/evil.ts"}) {
    CAPTURE(p);
    CHECK_FALSE(exists(agent + "/" + p));
  }
  CHECK(read_file(agent + "/AGENTS.md") == "be nice\n");
  CHECK(read_file(agent + "/auth.json").find("MARK") == std::string::npos);
  CHECK(read_file(agent + "/auth.json").find("literal") != std::string::npos);
  CHECK(exists(agent + "/" + mine + "/s.jsonl"));
  // A link planted among the sessions, for the host's own Pi to append through, is removed.
  auto link = sh(sb, "ln -s " + sb.home + "/.bashrc " + agent + "/" + mine + "/planted.jsonl && mkfifo " + agent + "/" +
                         mine + "/fifo && echo planted");
  CHECK(trim(link.out) == "planted");
  CHECK(link.err.find("removed 2 symlinks or special files") != std::string::npos);
  CHECK_FALSE(exists(agent + "/" + mine + "/planted.jsonl"));
  CHECK_FALSE(exists(agent + "/" + mine + "/fifo"));
  CHECK(exists(agent + "/" + mine + "/s.jsonl"));
  CHECK(o.err.find("refused") != std::string::npos);  // the !command key is named as refused
}

// The jail owns the directories it makes among the sessions: read-only
// (0555) it kept a planted link from being unlinked, unreadable (0111) it
// kept a whole subtree from being looked at. Both are scrubbed, and one
// past the walk's depth is said, not passed over.
TEST_CASE("links planted in session directories the jail made read-only or unreadable are removed all the same") {
  Sandbox sb;
  std::string agent = sb.home + "/.pi/agent";
  const std::string mine = agent + "/sessions/" + pi_session_dir(sb.ws);
  std::filesystem::create_directories(mine);
  auto o = sh(sb, "cd " + mine +
                      " && mkdir ro blind && mkdir blind/x && echo s > ro/s.jsonl && "
                      "ln -s " +
                      sb.home + "/.bashrc ro/planted.jsonl && ln -s " + sb.home +
                      "/.bashrc blind/x/planted.jsonl && chmod 0555 ro && chmod 0111 blind && echo planted");
  CAPTURE(o.err);
  CHECK(trim(o.out) == "planted");
  CHECK(o.err.find("removed 2 symlinks or special files") != std::string::npos);
  CHECK(o.err.find("could not be checked") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(mine + "/ro/planted.jsonl")));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(mine + "/blind/x/planted.jsonl")));
  CHECK(read_file(mine + "/ro/s.jsonl") == "s\n");

  std::string deep = "d";
  for (int i = 1; i < 130; ++i) deep += "/d";
  auto d = sh(sb, "cd " + mine + " && mkdir -p " + deep + " && ln -s " + sb.home + "/.bashrc " + deep +
                      "/planted.jsonl && echo deep");
  CHECK(trim(d.out) == "deep");
  CHECK(d.err.find("could not be checked or removed") != std::string::npos);
}

TEST_CASE("Pi's agent dir behind a symlink is protected where it really is") {
  Sandbox sb;
  std::string real = sb.home + "/dotfiles/pi-agent";
  std::filesystem::create_directories(real + "/extensions");
  std::filesystem::create_directories(sb.home + "/.pi");
  ::symlink(real.c_str(), (sb.home + "/.pi/agent").c_str());
  auto o = sh(sb,
              "cd ~/.pi/agent && echo e > extensions/e.ts && echo ext; echo x > AGENTS.md; echo x > settings.json; "
              "ls");
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("ext\n") == std::string::npos);
  CHECK(entries(real) == std::vector<std::string>{"extensions", "sessions"});
}

TEST_CASE("guards compare resolved paths: $HOME as a symlink, an agent dir that is $HOME, system workspaces") {
  Sandbox sb;
  std::string link = sb.base + "/home-link";
  ::symlink(sb.home.c_str(), link.c_str());
  auto home_ws =
      run({"/usr/bin/env", "-C", sb.home, pi_jail(), "--", "/bin/sh", "-c", "cat .ssh/id_ed25519"}, {"HOME=" + link});
  CHECK(home_ws.status == 125);
  CHECK(home_ws.out.find("CANARY") == std::string::npos);
  CHECK(home_ws.err.find("contains your home directory") != std::string::npos);

  for (const std::string& agent : {sb.home, link, sb.base}) {
    CAPTURE(agent);
    auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c", "cat ~/.ssh/id_ed25519"},
                 {"HOME=" + sb.home, "PI_CODING_AGENT_DIR=" + agent});
    CHECK(o.status == 125);
    CHECK(o.out.find("CANARY") == std::string::npos);
    CHECK(o.err.find("is your home directory or contains it") != std::string::npos);
  }
  for (const char* ws : {"/proc", "/proc/self", "/etc", "/usr", "/run", "/var", "/tmp", "/sys", "/dev"}) {
    CAPTURE(ws);
    auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", ws, "--", "/bin/true"}, {"HOME=" + sb.home});
    CHECK(o.status == 125);
    CHECK(o.err.find("refusing workspace") != std::string::npos);
  }
}

TEST_CASE("directories named like policy variables get the workspace's protections and do not loop") {
  Sandbox sb;
  for (const std::string name : {"${pi_agent_dir}", "${workspace}", "${home}"}) {
    CAPTURE(name);
    std::string ws = sb.base + "/" + name;
    std::filesystem::create_directories(ws);
    REQUIRE(git({"init", "-q", ws}, sb.home).status == 0);
    auto o = run({"/usr/bin/env", "-C", ws, pi_jail(), "-q", "-w", ws, "--", "/bin/sh", "-c",
                  "echo x > .git/hooks/pre-commit && echo hook; echo x > .envrc && echo envrc; "
                  "git config core.fsmonitor x && echo config; echo ran"},
                 {"HOME=" + sb.home});
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(o.out.find("ran") != std::string::npos);
    CHECK(o.out.find("hook") == std::string::npos);
    CHECK(o.out.find("envrc") == std::string::npos);
    CHECK(o.out.find("config") == std::string::npos);
  }
}

TEST_CASE("a FIFO or a huge sparse file at .git neither hangs nor balloons the next start") {
  Sandbox sb;
  REQUIRE(::mkfifo((sb.ws + "/.git").c_str(), 0600) == 0);
  auto fifo = sh(sb, "echo ran");
  CHECK(fifo.out.find("ran") != std::string::npos);
  ::unlink((sb.ws + "/.git").c_str());
  {
    std::FILE* f = std::fopen((sb.ws + "/.git").c_str(), "w");
    REQUIRE(f);
    std::fputs("gitdir: ", f);
    REQUIRE(::ftruncate(::fileno(f), 300L << 20) == 0);
    std::fclose(f);
  }
  auto sparse = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c", "echo ran"},
                    {"HOME=" + sb.home});
  CHECK(sparse.out.find("ran") != std::string::npos);
  CHECK(sparse.err.find("more than the 4096 expected") != std::string::npos);
}

TEST_CASE("a placeholder that cannot be made stops the run with 125, and the next run is not blocked") {
  Sandbox sb;
  REQUIRE(::chmod(sb.ws.c_str(), 0555) == 0);  // .pi/, .envrc, ... cannot be made (root may still)
  auto first = sh(sb, "echo ran");
  if (::getuid() != 0) {
    CHECK(first.status == 125);
    // Found before any placeholder is tried: the workspace is not writable.
    CHECK(first.err.find("is not writable by you") != std::string::npos);
    CHECK(first.out.find("ran") == std::string::npos);
  }
  CHECK(first.err.find("[harness: killed") == std::string::npos);
  ::chmod(sb.ws.c_str(), 0755);
  auto second = sh(sb, "echo second");
  CHECK(trim(second.out) == "second");
  CHECK(second.status == 0);
}

TEST_CASE("in a worktree, the other worktrees' pointers and the submodules' git dirs stay read-only") {
  Sandbox sb;
  std::string main_repo = sb.outside + "/main";
  REQUIRE(git({"init", "-q", main_repo}, sb.home).status == 0);
  REQUIRE(git({"-C", main_repo, "commit", "-q", "--allow-empty", "-m", "first"}, sb.home).status == 0);
  REQUIRE(git({"-C", main_repo, "worktree", "add", "-q", sb.ws + "/w1"}, sb.home).status == 0);
  REQUIRE(git({"-C", main_repo, "worktree", "add", "-q", sb.outside + "/w2"}, sb.home).status == 0);
  std::string common = main_repo + "/.git";
  auto o =
      run({"/usr/bin/env", "-C", sb.ws + "/w1", pi_jail(), "-q", "-w", sb.ws + "/w1", "--", "/bin/sh", "-c",
           "echo /elsewhere > " + common + "/worktrees/w2/commondir && echo other; mkdir -p " + common +
               "/modules/x/hooks && echo modules; echo x > " + common +
               "/config.worktree && echo cw; "
               "echo y > f && git add f && git -c user.name=t -c user.email=t@e commit -qm jailed && echo committed"},
          {"HOME=" + sb.home});
  CAPTURE(o.err);
  CHECK(o.out.find("committed") != std::string::npos);
  CHECK(o.out.find("other") == std::string::npos);
  CHECK(o.out.find("modules") == std::string::npos);
  CHECK(o.out.find("cw") == std::string::npos);
  CHECK(trim(read_file(common + "/worktrees/w2/commondir")) == "../..");
  CHECK_FALSE(exists(common + "/modules/x"));
}

TEST_CASE("a worktree whose repository sits in a directory everyone may write is not granted") {
  // Another user could plant HEAD, objects/, refs/ and worktrees/ in /dev/shm or /tmp.
  Sandbox sb;
  std::string shared = sb.base + "/shared";
  std::filesystem::create_directories(shared + "/objects");
  std::filesystem::create_directories(shared + "/refs");
  std::filesystem::create_directories(shared + "/worktrees/y");
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  write_file(shared + "/HEAD", "ref: refs/heads/main\n");
  write_file(shared + "/worktrees/y/gitdir", sb.ws + "/.git\n");
  write_file(shared + "/worktrees/y/commondir", "../..\n");
  write_file(shared + "/victim", "theirs\n");
  write_file(sb.ws + "/.git", "gitdir: " + shared + "/worktrees/y\n");
  auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c",
                "echo jail > " + shared + "/victim; echo done"},
               {"HOME=" + sb.home});
  CHECK(o.err.find("is writable by everyone") != std::string::npos);
  CHECK(read_file(shared + "/victim") == "theirs\n");
}

TEST_CASE("the run's copy of the agent dir is removed even when the jail made parts of it unreadable") {
  Sandbox sb;
  auto o = sh(sb,
              "A=$HOME/.pi/agent; mkdir -p $A/h/i && head -c 100000 /dev/zero > $A/h/i/blob && chmod 0 $A/h/i $A/h "
              "&& echo made");
  CHECK(trim(o.out) == "made");
  std::string runs = sb.home + "/.local/state/pi-jail/runs";
  CHECK(entries(runs).empty());
}

TEST_CASE("a placeholder a SIGKILL cut short (created, not yet written) is recognised and removed at the next start") {
  // The state pi-jail leaves when killed between making .git/commondir and
  // writing its "." (an empty commondir makes git die): the registry's
  // record ("f <content hex> <path hex>") and the empty file.
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  std::string path = sb.ws + "/.git/commondir";
  std::string hex;
  for (unsigned char c : path) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  std::filesystem::create_directories(sb.home + "/.local/state/pi-jail");
  write_file(sb.home + "/.local/state/pi-jail/placeholders", "f 2e0a " + hex + "\n");
  write_file(path, "");
  REQUIRE(git({"-C", sb.ws, "status"}, sb.home).status != 0);  // what the user would see
  auto o = sh(sb, "git status --short >/dev/null && echo git-works");
  CAPTURE(o.err);
  CHECK(trim(o.out) == "git-works");
  CHECK_FALSE(exists(path));
  CHECK(git({"-C", sb.ws, "status", "--short"}, sb.home).status == 0);
}

TEST_CASE("placeholders are marked; a marked one whose record was lost (a power failure) goes at the next run's end") {
  Sandbox sb;
  REQUIRE(git({"init", "-q", sb.ws}, sb.home).status == 0);
  auto mark_of = [](const std::string& path) {
    char buf[64];
    ssize_t n = ::getxattr(path.c_str(), "user.pi-jail", buf, sizeof buf);
    return n < 0 ? std::string("(none)") : std::string(buf, static_cast<size_t>(n));
  };
  // During a run, on the host: the placeholders carry the mark.
  std::string go = sb.base + "/go";
  pid_t p = spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--allow-read", sb.base, "--", "/bin/sh",
                   "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done"},
                  {"HOME=" + sb.home});
  for (int i = 0; i < 400 && !exists(sb.ws + "/.envrc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(exists(sb.ws + "/.envrc"));
  for (int i = 0; i < 400 && mark_of(sb.ws + "/.git/commondir") == "(none)"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  CHECK(mark_of(sb.ws + "/.envrc") == "placeholder");
  CHECK(mark_of(sb.ws + "/.git/commondir") == "placeholder");
  write_file(go, "");
  CHECK(wait_status(p) == 0);
  CHECK(entries(sb.ws) == std::vector<std::string>{".git"});

  // What a power failure may leave: placeholders on disk, no registry.
  std::filesystem::create_directories(sb.ws + "/.envrc");
  std::filesystem::create_directories(sb.ws + "/.vscode");
  write_file(sb.ws + "/.git/commondir", ".\n");
  for (const auto& path : {sb.ws + "/.envrc", sb.ws + "/.vscode", sb.ws + "/.git/commondir"})
    REQUIRE(::setxattr(path.c_str(), "user.pi-jail", "placeholder", 11, 0) == 0);
  // Not placeholders: an empty directory of the user's (no mark), and a
  // marked directory the user has put something in.
  std::filesystem::create_directories(sb.ws + "/.idea");
  std::filesystem::create_directories(sb.ws + "/.husky");
  REQUIRE(::setxattr((sb.ws + "/.husky").c_str(), "user.pi-jail", "placeholder", 11, 0) == 0);
  write_file(sb.ws + "/.husky/pre-commit", "npm test\n");
  std::filesystem::remove(sb.home + "/.local/state/pi-jail/placeholders");
  auto o = sh(sb, "git status --short >/dev/null && echo git-works");
  CAPTURE(o.err);
  CHECK(trim(o.out) == "git-works");
  CHECK(entries(sb.ws) == std::vector<std::string>{".git", ".husky", ".idea"});
  CHECK_FALSE(exists(sb.ws + "/.git/commondir"));
  CHECK(exists(sb.ws + "/.husky/pre-commit"));
}

TEST_CASE(
    "a jail on an enclosing workspace that keeps its working directory in an inner run's placeholder gets "
    "nothing outside its workspace when that run ends") {
  // A workspace inside another one: the jail on the outer workspace sees
  // the inner run's placeholders as plain directories of its own
  // workspace. Whatever pi-jail does with a placeholder when its run ends
  // must not take such a directory out of the outer jail's view (into
  // pi-jail's state, or to another workspace): it is removed.
  Sandbox sb;
  const std::string inner = sb.ws + "/inner", other = sb.base + "/other";
  std::filesystem::create_directories(inner);
  std::filesystem::create_directories(other);
  const std::string go_inner = sb.base + "/go-inner", go_outer = sb.base + "/go-outer";
  auto wait_for = [](const std::string& go) { return "while [ ! -e " + go + " ]; do sleep 0.05; done"; };
  pid_t in = spawn({"/usr/bin/env", "-C", inner, pi_jail(), "-q", "-w", inner, "--allow-read", sb.base, "--", "/bin/sh",
                    "-c", wait_for(go_inner)},
                   {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(inner + "/.vscode"); }));
  pid_t out =
      spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--allow-read", sb.base, "--", "/bin/sh", "-c",
             "cd inner/.vscode && touch " + sb.ws + "/ready && " + wait_for(go_outer) +
                 "; echo evil > planted; mkdir -p ../../escaped; echo evil > ../planted-above"},
            {"HOME=" + sb.home});
  REQUIRE(eventually([&] { return exists(sb.ws + "/ready"); }));
  write_file(go_inner, "");
  CHECK(wait_status(in) == 0);
  CHECK_FALSE(exists(inner + "/.vscode"));  // removed, though the outer jail is in it
  // A run on another workspace meanwhile, then the outer jail writes.
  CHECK(sh(sb, "true").status == 0);
  auto next = run({"/usr/bin/env", "-C", other, pi_jail(), "-q", "-w", other, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(next.status == 0);
  write_file(go_outer, "");
  CHECK(wait_status(out) == 0);
  // Its writes land in its own workspace (`..` of a removed directory is
  // still its old parent there) or nowhere; nothing outside it.
  CHECK(entries(other).empty());
  for (const std::string& top : {sb.base, sb.home})
    for (const auto& e : std::filesystem::recursive_directory_iterator(top)) {
      const std::string path = e.path().string(), name = e.path().filename().string();
      CAPTURE(path);
      if (path.starts_with(sb.ws + "/")) continue;
      CHECK((name != "planted" && name != "planted-above" && name != "escaped"));
    }
}

// Many users keep settings.json and auth.json as symlinks into a dotfiles
// repository. The jail gets the target's content (auth.json with
// placeholders), and the data written back lands in the target, beside
// which the link stays as the user made it.
TEST_CASE("agent-dir files that are the user's symlinks to dotfiles are read through and written back there") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", dot = sb.outside + "/dotfiles";
  std::filesystem::create_directories(agent);
  std::filesystem::create_directories(dot);
  write_file(dot + "/settings.json", R"({"lastChangelogVersion": "1.0.0", "retry": {"enabled": false}})");
  write_file(dot + "/auth.json", R"({"p": {"type": "api_key", "key": "sk-real-dotfile-key"}})");
  write_file(dot + "/AGENTS.md", "from the dotfiles\n");
  for (const char* f : {"settings.json", "auth.json", "AGENTS.md"})
    std::filesystem::create_symlink(dot + "/" + f, agent + "/" + f);
  auto o = sh(sb, "cd " + agent +
                      " && cat AGENTS.md && grep -c p auth.json && grep -c sk-real auth.json; "
                      "sed 's/1.0.0/9.9.9/' settings.json > s && cat s > settings.json && echo written");
  CAPTURE(o.out);
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("from the dotfiles") != std::string::npos);
  CHECK(o.out.find("\n0\n") != std::string::npos);  // the real key is not inside
  CHECK(o.out.find("written") != std::string::npos);
  for (const char* f : {"settings.json", "auth.json", "AGENTS.md"}) {
    CAPTURE(f);
    CHECK(std::filesystem::is_symlink(agent + "/" + f));
    CHECK(std::filesystem::read_symlink(agent + "/" + f) == dot + "/" + f);
  }
  const std::string settings = read_file(dot + "/settings.json");
  CHECK(settings.find("9.9.9") != std::string::npos);
  CHECK(settings.find("retry") != std::string::npos);
  CHECK(read_file(dot + "/auth.json").find("sk-real-dotfile-key") != std::string::npos);
}

// A link whose target is no regular file of the user's, outside what the
// jail can write, is not followed: the file is absent inside and the
// reason is said; auth.json so stops the run. A link the jail plants in
// its copy is never followed at write-back.
TEST_CASE("agent-dir symlinks to a FIFO, another user's file or the workspace are refused, naming why") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent";
  std::filesystem::create_directories(agent);
  REQUIRE(::mkfifo((sb.outside + "/fifo").c_str(), 0600) == 0);
  std::string foreign = "/etc/passwd";  // root's, for uid 65534
  if (::geteuid() == 0) {
    foreign = sb.outside + "/foreign.md";
    write_file(foreign, "not yours\n");
    REQUIRE(::chown(foreign.c_str(), 12345, 12345) == 0);
  }
  write_file(sb.ws + "/in-ws.json", R"({"lastChangelogVersion": "1.0.0"})");
  std::filesystem::create_symlink(sb.outside + "/fifo", agent + "/models.json");
  std::filesystem::create_symlink(foreign, agent + "/AGENTS.md");
  std::filesystem::create_symlink(sb.ws + "/in-ws.json", agent + "/settings.json");
  // A hop through the workspace: the jail could retarget it for the next run.
  write_file(sb.outside + "/dot.md", "dot\n");
  std::filesystem::create_symlink(sb.outside + "/dot.md", sb.ws + "/hop");
  std::filesystem::create_symlink(sb.ws + "/hop", agent + "/SYSTEM.md");
  auto o = sh(sb, "cd " + agent + " && ls -a; cat models.json AGENTS.md settings.json SYSTEM.md; echo done");
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  CHECK(o.out.find("models.json") == std::string::npos);
  CHECK(o.out.find("AGENTS.md") == std::string::npos);
  CHECK(o.out.find("settings.json") == std::string::npos);
  CHECK(o.out.find("SYSTEM.md") == std::string::npos);
  CHECK(o.out.find("dot") == std::string::npos);
  CHECK(o.err.find("SYSTEM.md is not given to the jail (Pi there runs without it): it is a symlink, and it leads "
                   "through " +
                   sb.ws + ", which the jail can write") != std::string::npos);
  CHECK(o.err.find("models.json is not given to the jail") != std::string::npos);
  CHECK(o.err.find("which is a FIFO") != std::string::npos);
  CHECK(o.err.find("not to you") != std::string::npos);
  CHECK(o.err.find("which the jail can write") != std::string::npos);
  CHECK(std::filesystem::is_symlink(agent + "/settings.json"));
  CHECK(read_file(sb.ws + "/in-ws.json") == R"({"lastChangelogVersion": "1.0.0"})");

  std::filesystem::create_symlink(sb.outside + "/fifo", agent + "/auth.json");
  auto refused = sh(sb, "echo ran");
  CHECK(refused.status == 125);
  CHECK(refused.out.find("ran") == std::string::npos);
  CHECK(refused.err.find("auth.json: it is a symlink, and it leads to") != std::string::npos);
}

// auth.json is the one file the jail gets transformed (placeholders for
// keys). Another name for it, a link or a hard link the user made, would
// be copied as it is: it is left out, and the run says why.
TEST_CASE("another name for auth.json in the agent dir (a symlink or a hard link to it) is not given to the jail") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", dot = sb.outside + "/dotfiles";
  std::filesystem::create_directories(agent);
  std::filesystem::create_directories(dot);
  write_file(dot + "/auth.json", R"({"p": {"type": "api_key", "key": "sk-real-aliased-key"}})");
  std::filesystem::create_symlink(dot + "/auth.json", agent + "/auth.json");
  std::filesystem::create_symlink(dot + "/auth.json", agent + "/settings.json");
  REQUIRE(::link((dot + "/auth.json").c_str(), (agent + "/models.json").c_str()) == 0);
  auto o = sh(sb, "cd " + agent + " && ls; cat * 2>/dev/null | grep -c sk-real; echo done");
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  CHECK(o.out.find("auth.json") != std::string::npos);
  CHECK(o.out.find("settings.json") == std::string::npos);
  CHECK(o.out.find("models.json") == std::string::npos);
  CHECK(o.out.find("\n0\n") != std::string::npos);  // no real key in any file inside
  CHECK(o.err.find("settings.json is not given to the jail: it is another name for auth.json") != std::string::npos);
  CHECK(o.err.find("models.json is not given to the jail: it is another name for auth.json") != std::string::npos);
  CHECK(read_file(dot + "/auth.json").find("sk-real-aliased-key") != std::string::npos);
}

TEST_CASE("a settings.json link the jail plants in its copy is not followed: the user's linked target stays") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", dot = sb.outside + "/dotfiles";
  std::filesystem::create_directories(agent);
  std::filesystem::create_directories(dot);
  const std::string before = R"({"lastChangelogVersion": "1.0.0"})";
  write_file(dot + "/settings.json", before);
  std::filesystem::create_symlink(dot + "/settings.json", agent + "/settings.json");
  write_file(sb.ws + "/planted.json", R"({"lastChangelogVersion": "6.6.6"})");
  auto o = sh(sb, "cd " + agent + " && grep -c 1.0.0 settings.json && rm settings.json && ln -s " + sb.ws +
                      "/planted.json settings.json && echo planted");
  CAPTURE(o.err);
  CHECK(o.out == "1\nplanted\n");
  CHECK(read_file(dot + "/settings.json") == before);
  CHECK(std::filesystem::read_symlink(agent + "/settings.json") == dot + "/settings.json");
  CHECK(o.err.find("refused: settings.json: what the run left is not a readable file") != std::string::npos);
}
