// The backend-neutral view: the one probe of host paths (on a real
// temporary tree) and the view both backends translate (on invented facts).
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "view/facts.h"
#include "view/view.h"

using namespace pj;
using view::PathFact;
using view::Place;
using view::Role;
using view::Shows;

namespace {

// Invented host facts: directories, files and links by path.
struct Host {
  view::Facts facts;
  ino_t ino = 100;
  void dir(const std::string& p) { put(p, PathFact::Kind::directory, p); }
  void file(const std::string& p) { put(p, PathFact::Kind::file, p); }
  void link(const std::string& p, const std::string& target, const std::string& real) {
    PathFact f = view::fact(facts, real);
    REQUIRE(f.kind != PathFact::Kind::absent);
    f.is_symlink = true;
    f.link_target = target;
    facts[p] = f;
  }
  void put(const std::string& p, PathFact::Kind kind, const std::string& real) {
    PathFact f;
    f.kind = kind;
    f.resolved = real;
    f.dev = 1;
    f.ino = ++ino;
    facts[p] = f;
  }
};

runtime::Request request(const std::string& workspace) {
  runtime::Request r;
  r.workspace = workspace;
  r.cwd = workspace;
  r.home = "/";  // no home of the jail's own: only host places
  return r;
}

// The places of `v` with role `role`, as "path" (placeholders: "path <node>").
std::vector<std::string> places(const view::View& v, Role role) {
  std::vector<std::string> out;
  for (const auto& p : v.places)
    if (p.role == role)
      out.push_back(p.path + (role == Role::placeholder ? (p.node == runtime::Node::file ? " <file>" : " <dir>") : ""));
  return out;
}

const Place* at(const view::View& v, const std::string& path) {
  for (const auto& p : v.places)
    if (p.path == path) return &p;
  return nullptr;
}

// A private temporary directory, resolved (on macOS /tmp is a link).
struct TempTree {
  std::string root;
  TempTree() {
    std::string tmpl = "/tmp/pj-view-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    char real[PATH_MAX];
    REQUIRE(::realpath(tmpl.c_str(), real) != nullptr);
    root = real;
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

}  // namespace

TEST_CASE("view probe: kinds, links, and the real path of an absent path") {
  TempTree t;
  const std::string r = t.root;
  REQUIRE(::mkdir((r + "/real").c_str(), 0755) == 0);
  { std::ofstream(r + "/real/file") << "x"; }
  REQUIRE(::symlink("real", (r + "/alias").c_str()) == 0);
  REQUIRE(::symlink("nowhere", (r + "/dangling").c_str()) == 0);
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = r + "/sock";
  REQUIRE(sock.size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);

  auto facts = view::probe_paths(
      {r + "/real", r + "/real/file", r + "/alias", r + "/alias/gone/deeper", r + "/dangling", sock, r + "/real"});
  ::close(s);
  CHECK(facts.size() == 6);

  const PathFact& dir = view::fact(facts, r + "/real");
  CHECK(dir.kind == PathFact::Kind::directory);
  CHECK_FALSE(dir.is_symlink);
  CHECK(dir.resolved == r + "/real");
  CHECK(dir.ino != 0);
  CHECK(view::fact(facts, r + "/real/file").kind == PathFact::Kind::file);

  const PathFact& alias = view::fact(facts, r + "/alias");
  CHECK(alias.is_symlink);
  CHECK(alias.link_target == "real");
  CHECK(alias.kind == PathFact::Kind::directory);
  CHECK(alias.resolved == r + "/real");
  CHECK(alias.ino == dir.ino);

  // Absent below a link: the nearest existing ancestor's real path, joined
  // with the rest (what Seatbelt matches).
  const PathFact& gone = view::fact(facts, r + "/alias/gone/deeper");
  CHECK(gone.kind == PathFact::Kind::absent);
  CHECK_FALSE(gone.is_symlink);
  CHECK(gone.resolved == r + "/real/gone/deeper");

  // A dangling link stays unresolved: the planners refuse it.
  const PathFact& dangling = view::fact(facts, r + "/dangling");
  CHECK(dangling.is_symlink);
  CHECK(dangling.kind == PathFact::Kind::absent);
  CHECK(dangling.resolved.empty());

  CHECK(view::fact(facts, sock).kind == PathFact::Kind::socket);
  CHECK_FALSE(view::usable(view::fact(facts, sock)));

  // Not probed: absent.
  CHECK(view::fact(facts, r + "/never-asked").kind == PathFact::Kind::absent);
}

TEST_CASE("view: a symlinked agent dir is protected where it really is; a link the jail could repoint stops the run") {
  Host h;
  for (const char* d : {"/home", "/home/u", "/home/u/.pi", "/home/u/dotfiles", "/home/u/dotfiles/pi-agent",
                        "/home/u/src", "/home/u/src/proj"})
    h.dir(d);
  h.link("/home/u/.pi/agent", "../dotfiles/pi-agent", "/home/u/dotfiles/pi-agent");
  runtime::Request r = request("/home/u/src/proj");
  r.grants = {{"/home/u/dotfiles", runtime::Access::read_write, "--allow-write"}};
  r.read_only = {{"/home/u/.pi/agent", "pi.toml:50:3", runtime::Node::directory}};

  view::View v = view::compute(r, {}, h.facts);
  CHECK(v.problems.empty());
  CHECK(places(v, Role::mark) == std::vector<std::string>{"/home/u/dotfiles/pi-agent"});
  const Place* mark = at(v, "/home/u/dotfiles/pi-agent");
  REQUIRE(mark);
  CHECK(mark->held);  // inside a writable place
  CHECK(mark->shows == Shows::host);
  CHECK(mark->access == runtime::Access::read_only);
  CHECK(mark->source.ino == view::fact(h.facts, "/home/u/dotfiles/pi-agent").ino);
  CHECK(mark->why == "pi.toml:50:3");
  CHECK(places(v, Role::pin).empty());      // its parent is the grant itself
  CHECK_FALSE(at(v, "/home/u/.pi/agent"));  // nothing at the link's own path

  // The link itself inside a writable place: the jail could repoint it.
  r.grants = {{"/home/u", runtime::Access::read_write, "--allow-write"}};
  view::View w = view::compute(r, {}, h.facts);
  REQUIRE(w.problems.size() == 1);
  CHECK(w.problems[0].find("/home/u/.pi/agent is a symlink") == 0);
  CHECK(places(w, Role::mark).empty());
}

TEST_CASE("view: a protected path that is a link into the jail's own home stops the run") {
  Host h;
  for (const char* d : {"/home", "/home/u", "/home/u/proj", "/data", "/data/jail-home"}) h.dir(d);
  h.file("/home/u/secret-envrc");
  h.link("/home/u/proj/.envrc", "/home/u/secret-envrc", "/home/u/secret-envrc");
  runtime::Request r = request("/home/u/proj");
  r.home = "/home/u";  // the jail home is shown at $HOME: the link's target is in it
  r.home_source = "/data/jail-home";
  r.read_only = {{"/home/u/proj/.envrc", "pi.toml:70:3", runtime::Node::file}};

  view::View v = view::compute(r, {}, h.facts, view::Copies::shown);
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0].find("/home/u/proj/.envrc is a symlink") == 0);
  CHECK(places(v, Role::mark).empty());
}

TEST_CASE("view: a worktree's repository: marks held, the directories holding them pinned, absent files covered") {
  Host h;
  for (const char* d : {"/home", "/home/u", "/home/u/repo", "/home/u/repo/.git", "/home/u/repo/.git/hooks",
                        "/home/u/repo/.git/worktrees", "/home/u/repo/.git/worktrees/wt", "/home/u/wt"})
    h.dir(d);
  for (const char* f : {"/home/u/repo/.git/config", "/home/u/repo/.git/worktrees/wt/commondir", "/home/u/wt/.git"})
    h.file(f);
  runtime::Request r = request("/home/u/wt");
  r.grants = {{"/home/u/repo/.git", runtime::Access::read_write, "the worktree's repository"}};
  using runtime::Node;
  r.read_only = {{"/home/u/wt/.git", "pi.toml:60:3", Node::file},
                 {"/home/u/repo/.git/hooks", "pi.toml:64:3", Node::directory},
                 {"/home/u/repo/.git/config", "pi.toml:65:3", Node::file},
                 {"/home/u/repo/.git/worktrees/wt/commondir", "pi.toml:66:3", Node::file},
                 {"/home/u/repo/.git/worktrees/wt/config.worktree", "pi.toml:67:3", Node::file},
                 {"/home/u/repo/.git/worktrees/wt/hooks", "pi.toml:68:3", Node::directory}};

  view::View v = view::compute(r, {}, h.facts);
  CHECK(v.problems.empty());
  CHECK(places(v, Role::grant) == std::vector<std::string>{"/home/u/wt", "/home/u/repo/.git"});
  CHECK(places(v, Role::mark) == std::vector<std::string>{"/home/u/wt/.git", "/home/u/repo/.git/hooks",
                                                          "/home/u/repo/.git/config",
                                                          "/home/u/repo/.git/worktrees/wt/commondir"});
  for (const auto& p : v.places)
    if (p.role == Role::mark) CHECK_MESSAGE(p.held, p.path);
  // Absent: a file git reads (empty config) and a directory, each covered.
  CHECK(places(v, Role::placeholder) ==
        std::vector<std::string>{"/home/u/repo/.git/worktrees/wt/config.worktree <file>",
                                 "/home/u/repo/.git/worktrees/wt/hooks <dir>"});
  const Place* cw = at(v, "/home/u/repo/.git/worktrees/wt/config.worktree");
  REQUIRE(cw);
  CHECK(cw->shows == Shows::mask);
  CHECK(cw->content.empty());
  // The directories between the writable repository and the marks.
  CHECK(places(v, Role::pin) ==
        std::vector<std::string>{"/home/u/repo/.git/worktrees/wt", "/home/u/repo/.git/worktrees"});
  for (const auto& p : v.places)
    if (p.role == Role::pin) CHECK(p.access == runtime::Access::read_write);
}

TEST_CASE("view: a missing parent is covered at the first missing component, except below a missing .git") {
  Host h;
  for (const char* d : {"/home", "/home/u", "/home/u/proj"}) h.dir(d);
  h.file("/home/u/proj/README");
  runtime::Request r = request("/home/u/proj");
  using runtime::Node;
  r.read_only = {{"/home/u/proj/.pi/extensions", "pi.toml:67:3", Node::directory},
                 {"/home/u/proj/.git/hooks", "pi.toml:64:3", Node::directory},
                 {"/home/u/proj/.git/commondir", "pi.toml:66:3", Node::file},
                 {"/home/u/proj/README/x", "test", Node::file}};
  r.denies = {{"/home/u/proj/.env", "absent: nothing to hide"}};

  view::View v = view::compute(r, {}, h.facts);
  CHECK(v.problems.empty());
  // .pi is missing: covered there (a directory), so nothing below it can
  // be made; a missing .git is audited when the run ends instead; under a
  // file nothing can be made at all; an absent mask hides nothing.
  CHECK(places(v, Role::placeholder) == std::vector<std::string>{"/home/u/proj/.pi <dir>"});
  const Place* pi = at(v, "/home/u/proj/.pi");
  REQUIRE(pi);
  CHECK(pi->why == "pi.toml:67:3");
  CHECK(pi->source.kind == PathFact::Kind::absent);
  CHECK(places(v, Role::mask).empty());
  CHECK(places(v, Role::pin).empty());
  CHECK(view::first_missing(h.facts, "/home/u/proj/.pi/extensions") == "/home/u/proj/.pi");
  CHECK(view::first_missing(h.facts, "/home/u/proj/README/x").empty());

  // With .git present, commondir is covered by itself, a file saying "."
  // (the git dir is its own common dir).
  h.dir("/home/u/proj/.git");
  view::View g = view::compute(r, {}, h.facts);
  const Place* cd = at(g, "/home/u/proj/.git/commondir");
  REQUIRE(cd);
  CHECK(cd->role == Role::placeholder);
  CHECK(cd->node == Node::file);
  CHECK(cd->content == ".\n");
  CHECK(at(g, "/home/u/proj/.git/hooks"));
}
