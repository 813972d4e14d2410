// What the host's git would run or read as config in a place the jail
// can write: computed from config texts (an invented filesystem), and
// the repositories found below the writable places (a real tree).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "git/protect.h"
#include "temp_dir.h"

using namespace pj;
using git::protect::Part;

namespace {

// Config files by path; any other path is absent.
git::protect::ReadConfig files(std::map<std::string, std::string> texts) {
  return [texts = std::move(texts)](const std::string& path) -> pj::util::Result<git::protect::ConfigText> {
    auto it = texts.find(path);
    if (it == texts.end()) return git::protect::ConfigText{path, std::nullopt};
    return git::protect::ConfigText{path, it->second};
  };
}

git::protect::Inputs workspace_repo() {
  git::protect::Inputs in;
  in.writable = {"/w"};
  in.host_configs = {"/etc/gitconfig", "/h/.gitconfig"};
  in.repositories = {{"/w/.git", "/w"}};
  in.home = "/h";
  return in;
}

std::map<std::string, Part> protected_paths(const git::protect::Plan& p) {
  std::map<std::string, Part> out;
  for (const auto& x : p.protections) out.emplace(x.path, x.part);
  return out;
}

bool has(const git::protect::Plan& p, const std::string& path, Part part) {
  auto all = protected_paths(p);
  auto it = all.find(path);
  return it != all.end() && it->second == part;
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("git_protect: a repository's hooks, config, config.worktree and commondir, nothing else without config") {
  auto p = git::protect::plan(workspace_repo(), files({}));
  CHECK(p.problems.empty());
  CHECK(protected_paths(p) == std::map<std::string, Part>{{"/w/.git/hooks", Part::hooks_dir},
                                                          {"/w/.git/config", Part::config},
                                                          {"/w/.git/config.worktree", Part::config},
                                                          {"/w/.git/commondir", Part::commondir}});
}

TEST_CASE("git_protect: core.hooksPath relative to the work tree, and absolute, inside the workspace") {
  auto p = git::protect::plan(workspace_repo(), files({{"/w/.git/config", "[core]\n\thooksPath = .githooks\n"}}));
  CHECK(has(p, "/w/.githooks", Part::hooks_dir));

  p = git::protect::plan(workspace_repo(), files({{"/h/.gitconfig", "[core]\nhookspath = /w/tools/hooks\n"}}));
  CHECK(has(p, "/w/tools/hooks", Part::hooks_dir));

  // Outside every writable place: the jail cannot change it, nothing to add.
  p = git::protect::plan(workspace_repo(), files({{"/h/.gitconfig", "[core]\nhookspath = ~/hooks\n"}}));
  CHECK(protected_paths(p).size() == 4);
}

TEST_CASE("git_protect: a global relative core.hooksPath is taken in each repository; a bare one's from its git dir") {
  auto in = workspace_repo();
  in.writable.push_back("/r");
  in.repositories.push_back({"/r/remote.git", ""});
  auto p = git::protect::plan(in, files({{"/h/.gitconfig", "[core]\n\thooksPath = .hooks\n"}}));
  CHECK(has(p, "/w/.hooks", Part::hooks_dir));
  CHECK(has(p, "/r/remote.git/.hooks", Part::hooks_dir));
  CHECK(has(p, "/r/remote.git/hooks", Part::hooks_dir));
  CHECK(has(p, "/r/remote.git/config", Part::config));
}

TEST_CASE("git_protect: include.path into the work tree is protected and read: what it names is protected too") {
  auto p = git::protect::plan(workspace_repo(),
                              files({{"/w/.git/config", "[include]\n\tpath = ../.gitconfig-team\n"},
                                     {"/w/.gitconfig-team", "[core]\n\tfsmonitor = ./scripts/fsmon.sh\n"}}));
  CHECK(p.problems.empty());
  CHECK(has(p, "/w/.gitconfig-team", Part::config));
  CHECK(has(p, "/w/scripts/fsmon.sh", Part::program));
}

TEST_CASE("git_protect: an absent included file is protected so that the jail cannot create it") {
  auto p = git::protect::plan(workspace_repo(), files({{"/h/.gitconfig", "[include]\npath = /w/local.gitconfig\n"}}));
  CHECK(has(p, "/w/local.gitconfig", Part::config));
}

TEST_CASE("git_protect: includeIf is followed whatever its condition (onbranch: the jail can switch branch)") {
  auto p = git::protect::plan(
      workspace_repo(),
      files({{"/w/.git/config", "[includeIf \"onbranch:never-checked-out\"]\n\tpath = /w/cfg/branch.inc\n"},
             {"/w/cfg/branch.inc", "[core]\n\thooksPath = cfg/hooks\n"},
             {"/h/.gitconfig", "[includeIf \"gitdir:/elsewhere/\"]\n\tpath = ~/other.inc\n"},
             {"/h/other.inc", "[core]\n\tsshCommand = /w/bin/ssh-wrap -v\n"}}));
  CHECK(has(p, "/w/cfg/branch.inc", Part::config));
  CHECK(has(p, "/w/cfg/hooks", Part::hooks_dir));
  CHECK(has(p, "/w/bin/ssh-wrap", Part::program));
  CHECK_FALSE(protected_paths(p).count("/h/other.inc"));  // not writable
}

TEST_CASE("git_protect: command keys naming scripts in the workspace; commands and places that name none") {
  const std::string cfg =
      "[core]\n\tpager = less -R\n\teditor = tools/edit.sh\n"
      "\tfsmonitor = \"cd /w && make\"\n"
      "[alias]\n\tx = !sh ./tools/x.sh --flag\n\tst = status\n"
      "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = /w/bin/smudge %f\n"
      "[diff \"pdf\"]\n\ttextconv = /w/bin/pdf2txt\n[merge \"m\"]\n\tdriver = ./bin/merge %O %A %B\n"
      "[credential]\n\thelper = !/w/bin/cred\n[gpg]\n\tprogram = /w/bin/gpg\n"
      "[remote \"origin\"]\n\turl = /w/remote.git\n[sequence]\n\teditor = /usr/bin/vi\n";
  auto p = git::protect::plan(workspace_repo(), files({{"/w/.git/config", cfg}}));
  CHECK(has(p, "/w/tools/edit.sh", Part::program));
  CHECK(has(p, "/w/tools/x.sh", Part::program));
  CHECK(has(p, "/w/bin/smudge", Part::program));
  CHECK(has(p, "/w/bin/pdf2txt", Part::program));
  CHECK(has(p, "/w/bin/merge", Part::program));
  CHECK(has(p, "/w/bin/cred", Part::program));
  CHECK(has(p, "/w/bin/gpg", Part::program));
  auto all = protected_paths(p);
  CHECK_FALSE(all.count("/w"));             // a command that cds into the workspace names no script
  CHECK_FALSE(all.count("/w/remote.git"));  // a remote git pushes to, not a program
  CHECK_FALSE(all.count("/usr/bin/vi"));    // not writable
  CHECK(all.size() == 4 + 7);
}

TEST_CASE("git_protect: a config file that cannot be read is a problem; an include loop ends") {
  auto failing = [](const std::string& path) -> pj::util::Result<git::protect::ConfigText> {
    if (path == "/w/.git/config") return pj::util::Error::invalid("/w/.git/config is a symlink");
    return git::protect::ConfigText{path, std::nullopt};
  };
  auto p = git::protect::plan(workspace_repo(), failing);
  REQUIRE(p.problems.size() == 1);
  CHECK(p.problems[0].find("git config /w/.git/config: /w/.git/config is a symlink") == 0);

  p = git::protect::plan(workspace_repo(), files({{"/w/.git/config", "[include]\npath = /w/a\n"},
                                                  {"/w/a", "[include]\npath = /w/.git/config\n"}}));
  CHECK(p.problems.empty());
  CHECK(has(p, "/w/a", Part::config));
}

TEST_CASE("git_protect: the host reader refuses a symlinked config in a writable place and reads a regular one") {
  pj::test::TempDir t;
  write(t.path + "/w/.git/config", "[core]\n\thooksPath = .githooks\n");
  write(t.path + "/home/real.inc", "[core]\n\tfsmonitor = " + t.path + "/w/fsmon\n");
  REQUIRE(::symlink((t.path + "/home/real.inc").c_str(), (t.path + "/w/linked.inc").c_str()) == 0);
  REQUIRE(::symlink((t.path + "/home/real.inc").c_str(), (t.path + "/home/.gitconfig").c_str()) == 0);
  git::protect::Inputs in;
  in.writable = {t.path + "/w"};
  in.host_configs = {t.path + "/home/.gitconfig"};  // the operator's: followed
  in.repositories = {{t.path + "/w/.git", t.path + "/w"}};
  in.home = t.path + "/home";
  auto p = git::protect::plan(in, git::protect::host_reader(in.writable));
  CHECK(p.problems.empty());
  CHECK(has(p, t.path + "/w/.githooks", Part::hooks_dir));
  CHECK(has(p, t.path + "/w/fsmon", Part::program));

  write(t.path + "/w/.git/config", "[include]\n\tpath = ../linked.inc\n");
  p = git::protect::plan(in, git::protect::host_reader(in.writable));
  REQUIRE(p.problems.size() == 1);
  CHECK(p.problems[0].find("linked.inc") != std::string::npos);
}

TEST_CASE("git_protect: repositories below the writable places: nested, bare, submodules; never node_modules") {
  pj::test::TempDir t;
  const std::string w = t.path + "/w", g = t.path + "/grant";
  for (const auto& d : {w + "/.git/hooks", w + "/.git/objects", w + "/.git/refs", w + "/vendor/lib/.git/hooks",
                        w + "/node_modules/pkg/.git/hooks", g + "/remote.git/objects", g + "/remote.git/refs",
                        w + "/.git/modules/sub/objects", w + "/.git/modules/sub/refs"})
    std::filesystem::create_directories(d);
  write(g + "/remote.git/HEAD", "ref: refs/heads/main\n");
  write(w + "/.git/modules/sub/HEAD", "ref: refs/heads/main\n");
  std::filesystem::create_directories(t.path + "/elsewhere/.git");
  REQUIRE(::symlink((t.path + "/elsewhere").c_str(), (w + "/link").c_str()) == 0);

  std::vector<std::string> cut;
  auto repos = git::protect::find_repositories({w, g}, cut);
  std::vector<std::string> dirs;
  for (const auto& r : repos) dirs.push_back(r.git_dir + " @" + r.work_tree);
  std::sort(dirs.begin(), dirs.end());
  CHECK(dirs == std::vector<std::string>{g + "/remote.git @", w + "/.git @" + w, w + "/.git/modules/sub @",
                                         w + "/vendor/lib/.git @" + w + "/vendor/lib"});
  CHECK(cut.empty());

  cut.clear();
  git::protect::find_repositories({w}, cut, {1, 50000});
  CHECK(cut == std::vector<std::string>{w + "/vendor"});
}

TEST_CASE("git_protect: the user's global include into the workspace is protected even where no repository is") {
  auto in = workspace_repo();
  in.repositories.clear();
  auto p =
      git::protect::plan(in, files({{"/h/.gitconfig", "[includeIf \"gitdir:/w/\"]\n\tpath = /w/dot/git.inc\n"},
                                    {"/w/dot/git.inc", "[core]\n\tfsmonitor = /w/dot/fsmon\n\thooksPath = rel\n"}}));
  CHECK(has(p, "/w/dot/git.inc", Part::config));
  CHECK(has(p, "/w/dot/fsmon", Part::program));
  CHECK(protected_paths(p).size() == 2);  // a relative hooksPath needs a repository
}
