// The end-of-run repository audit on a directory of its own: what is new
// or changed is listed, nothing is followed, nothing blocks, all bounded.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "git/audit.h"
#include "temp_dir.h"

using namespace pj::git::audit;
namespace fs = std::filesystem;

namespace {

struct Workspace : pj::test::TempDir {
  void write(const std::string& rel, const std::string& text, mode_t mode = 0644) const {
    fs::create_directories(fs::path(path + "/" + rel).parent_path());
    std::ofstream(path + "/" + rel) << text;
    ::chmod((path + "/" + rel).c_str(), mode);
  }
  // A repository as `git init` leaves it, without running git.
  void init() const {
    write(".git/HEAD", "ref: refs/heads/main\n");
    write(".git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n");
    write(".git/hooks/pre-commit.sample", "#!/bin/sh\n", 0755);
    fs::create_directories(path + "/.git/objects");
  }
};

std::string lines(const Audit& a) {
  std::string out;
  for (const auto& f : a.findings)
    out += f.path + (f.line ? ":" + std::to_string(f.line) : "") + " [" + f.key + "] " + f.what + "\n";
  return out;
}

bool has(const Audit& a, std::string_view path, std::string_view key = "") {
  for (const auto& f : a.findings)
    if (f.path == path && f.key == key) return true;
  return false;
}

}  // namespace

TEST_CASE("a repository made during the run: its hooks and command keys are listed, samples are not") {
  Workspace ws;
  auto before = snapshot(ws.path);
  CHECK(before.taken());
  ws.init();
  ws.write(".git/hooks/post-checkout", "#!/bin/sh\nid\n", 0755);
  ws.write(".git/config", "[core]\n\tbare = false\n\tfsmonitor = touch pwned\n[alias]\n\tx = !id\n\tco = checkout\n");
  auto a = audit(ws.path, before);
  CAPTURE(lines(a));
  CHECK(has(a, ".git"));
  CHECK(has(a, ".git/hooks/post-checkout"));
  CHECK(has(a, ".git/config", "core.fsmonitor"));
  CHECK(has(a, ".git/config", "alias.x"));
  CHECK_FALSE(has(a, ".git/config", "alias.co"));
  CHECK_FALSE(has(a, ".git/hooks/pre-commit.sample"));
  CHECK(a.findings.size() == 4);
  for (const auto& f : a.findings)
    if (f.key == "core.fsmonitor") {
      CHECK(f.line == 3);
      CHECK(f.what.find("touch pwned") != std::string::npos);
    }
}

TEST_CASE("an existing repository that only gained objects and refs: nothing to report") {
  Workspace ws;
  ws.init();
  ws.write(".git/hooks/pre-push", "#!/bin/sh\n", 0755);
  auto before = snapshot(ws.path);
  ws.write(".git/objects/ab/cdef", "blob");
  ws.write(".git/refs/heads/main", "0123\n");
  ws.write(".git/index", "DIRC");
  ws.write("file.txt", "x");
  auto a = audit(ws.path, before);
  CAPTURE(lines(a));
  CHECK(a.empty());
}

TEST_CASE("a hook made executable, and a rewritten config, count as changed") {
  Workspace ws;
  ws.init();
  ws.write(".git/hooks/pre-push", "#!/bin/sh\n", 0644);
  auto before = snapshot(ws.path);
  ::chmod((ws.path + "/.git/hooks/pre-push").c_str(), 0755);
  ws.write(".git/config", "[core]\n\tpager = less -R\n\tbare = false\n\trepositoryformatversion = 0\n");
  auto a = audit(ws.path, before);
  CAPTURE(lines(a));
  CHECK(has(a, ".git/hooks/pre-push"));
  CHECK(has(a, ".git/config", "core.pager"));
}

TEST_CASE("a submodule's git dir, worktrees and commondir are audited like the repository's") {
  Workspace ws;
  ws.init();
  auto before = snapshot(ws.path);
  ws.write(".git/modules/sub/HEAD", "ref: refs/heads/main\n");
  ws.write(".git/modules/sub/config", "[core]\n\tfsmonitor = evil\n");
  ws.write(".git/modules/sub/hooks/pre-commit", "#!/bin/sh\n", 0755);
  ws.write(".git/modules/a/b/HEAD", "x\n");  // a submodule named "a/b"
  ws.write(".git/modules/a/b/hooks/post-merge", "#!/bin/sh\n", 0755);
  ws.write(".git/worktrees/w/commondir", "../..\n");
  ws.write(".git/worktrees/w/config.worktree", "[gpg]\n\tprogram = evil\n");
  ws.write(".git/worktrees/v/commondir", "/elsewhere\n");
  ws.write(".git/config.worktree", "[credential]\n\thelper = !evil\n");
  ws.write(".git/commondir", "/home/u/other/.git\n");
  auto a = audit(ws.path, before);
  CAPTURE(lines(a));
  CHECK(has(a, ".git/modules/sub/config", "core.fsmonitor"));
  CHECK(has(a, ".git/modules/sub/hooks/pre-commit"));
  CHECK(has(a, ".git/modules/a/b/hooks/post-merge"));
  CHECK(has(a, ".git/worktrees/w/config.worktree", "gpg.program"));
  CHECK_FALSE(has(a, ".git/worktrees/w/commondir"));  // what git worktree add writes
  CHECK(has(a, ".git/worktrees/v/commondir"));
  CHECK(has(a, ".git/config.worktree", "credential.helper"));
  CHECK(has(a, ".git/commondir"));
}

TEST_CASE("a FIFO, a symlink and an oversized config are findings, never read or followed") {
  Workspace ws;
  ws.init();
  auto before = snapshot(ws.path);
  fs::create_directories(ws.path + "/.git/modules/x");
  REQUIRE(::mkfifo((ws.path + "/.git/modules/x/config").c_str(), 0644) == 0);
  fs::create_directories(ws.path + "/.git/modules/y");
  fs::create_symlink("/etc/passwd", ws.path + "/.git/modules/y/config");
  fs::create_symlink("/usr/bin", ws.path + "/.git/modules/z");
  ws.write(".git/modules/big/HEAD", "x");
  {
    std::ofstream big(ws.path + "/.git/modules/big/config");
    big.seekp(100 * 1024 * 1024);
    big << "x";
  }
  auto a = audit(ws.path, before);  // returns: the FIFO is not waited on
  CAPTURE(lines(a));
  CHECK(has(a, ".git/modules/x/config"));
  CHECK(has(a, ".git/modules/y/config"));
  CHECK(has(a, ".git/modules/z"));
  CHECK(has(a, ".git/modules/big/config"));
  CHECK(lines(a).find("FIFO") != std::string::npos);
  CHECK(lines(a).find("symlink") != std::string::npos);
}

TEST_CASE(".git replaced by a symlink or by a file that points elsewhere") {
  Workspace ws;
  ws.init();
  auto before = snapshot(ws.path);
  fs::rename(ws.path + "/.git", ws.path + "/old");
  fs::create_symlink("/tmp", ws.path + "/.git");
  auto a = audit(ws.path, before);
  CAPTURE(lines(a));
  REQUIRE(has(a, ".git"));
  CHECK(lines(a).find("symlink") != std::string::npos);
  fs::remove(ws.path + "/.git");
  ws.write(".git", "gitdir: /home/u/.ssh\x1b[2J\n");
  a = audit(ws.path, before);
  CAPTURE(lines(a));
  REQUIRE(has(a, ".git"));
  CHECK(lines(a).find("gitdir: /home/u/.ssh\\x1b[2J") != std::string::npos);
}

TEST_CASE("bounded: at most N findings listed, the rest counted; escaped names") {
  Workspace ws;
  ws.init();
  auto before = snapshot(ws.path);
  for (int i = 0; i < 30; ++i) ws.write(".git/hooks/h" + std::to_string(i), "", 0755);
  ws.write(".git/hooks/\x1b]0;title\x07", "", 0755);
  Limits small;
  small.findings = 10;
  auto a = audit(ws.path, before, {}, small);
  CHECK(a.findings.size() == 10);
  CHECK(a.unlisted == 21);
  Limits entries;
  entries.entries = 8;
  a = audit(ws.path, before, {}, entries);
  CAPTURE(lines(a));
  CHECK(lines(a).find("not examined") != std::string::npos);
  a = audit(ws.path, before);
  CHECK(has(a, ".git/hooks/\\x1b]0;title\\x07"));
}

TEST_CASE("submodule git dirs deeper than the walk goes are said to be unexamined, never passed over silently") {
  Workspace ws;
  ws.init();
  auto before = snapshot(ws.path);
  ws.write(".git/modules/shallow/config", "[core]\n\tfsmonitor = x\n");
  ws.write(".git/modules/a/b/c/d/e/f/g/h/config", "[core]\n\tfsmonitor = deep\n");
  auto a = audit(ws.path, before);
  std::string text = lines(a);
  CAPTURE(text);
  CHECK(text.find(".git/modules/shallow/config") != std::string::npos);
  CHECK(text.find("nested deeper than 6 levels: not examined") != std::string::npos);
}

TEST_CASE("watched paths beyond the workspace's .git: a hooks dir, an included config and a script, also elsewhere") {
  Workspace ws, grant;
  ws.init();
  ws.write(".githooks/pre-commit", "#!/bin/sh\n", 0755);
  ws.write("team.gitconfig", "[core]\n\tpager = less\n");
  ws.write("bin/fsmon", "#!/bin/sh\n", 0755);
  grant.write("remote.git/hooks/update.sample", "#!/bin/sh\n", 0755);
  const std::vector<Watch> watched{{ws.path, ".githooks", Watch::What::hooks_dir},
                                   {ws.path, "team.gitconfig", Watch::What::config},
                                   {ws.path, "bin/fsmon", Watch::What::program},
                                   {grant.path, "remote.git/hooks", Watch::What::hooks_dir}};
  auto before = snapshot(ws.path, watched);
  CHECK(audit(ws.path, before, watched).empty());

  ws.write(".githooks/post-checkout", "#!/bin/sh\n", 0755);
  ws.write("team.gitconfig", "[core]\n\tfsmonitor = touch pwned\n");
  ws.write("bin/fsmon", "#!/bin/sh\nid\n", 0755);
  grant.write("remote.git/hooks/post-receive", "#!/bin/sh\n", 0755);
  auto a = audit(ws.path, before, watched);
  CAPTURE(lines(a));
  CHECK(has(a, ".githooks/post-checkout"));
  CHECK(has(a, "team.gitconfig", "core.fsmonitor"));
  CHECK(has(a, "bin/fsmon"));
  CHECK(has(a, grant.path + "/remote.git/hooks/post-receive"));
  CHECK(a.findings.size() == 4);
}
