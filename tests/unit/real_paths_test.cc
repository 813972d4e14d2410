// util::RealPaths answers as lstat, readlink, realpath(3) and stat do,
// whatever order the paths come in, on a tree of symlinked parents,
// relative and absolute links, chains, loops and absent leaves; and
// view::probe_paths, which uses it, gives the facts the libc calls give.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "util/real_paths.h"
#include "view/facts.h"

using pj::util::RealPaths;

namespace {

struct Tree {
  std::string r;
  std::vector<std::string> paths;
  Tree() {
    char t[] = "/tmp/pj-realpaths.XXXXXX";
    REQUIRE(::mkdtemp(t));
    r = t;
    std::filesystem::create_directories(r + "/d/e/f");
    std::filesystem::create_directories(r + "/closed/in");
    std::ofstream(r + "/d/file") << "x";
    std::ofstream(r + "/d/e/g") << "x";
    auto link = [&](const std::string& target, const std::string& at) {
      REQUIRE(::symlink(target.c_str(), (r + "/" + at).c_str()) == 0);
    };
    link("d", "l_rel");
    link(r + "/d", "l_abs");
    link("l_rel/e", "l_chain");
    link("l_chain", "l_chain2");
    link("../..", "d/e/up");
    link("./f", "d/e/dot");
    link("f/", "d/e/slash");
    link("f//", "d/e/slashes");
    link("file", "d/fl");
    link("file/", "d/fl_slash");
    link("../../fl", "d/e/f/back");
    link("../d/e", "d/sideways");
    link("../", "d/e/up_slash");
    link("..", "d/e/f/dotdot");
    link("../d/./e", "d/dotted");
    link("../../../../../../../../../../../../../../..", "d/e/past_root");
    link("/../../etc", "d/abs_up");
    link("../file/..", "d/e/through_file");
    link("../file/../e", "d/e/through_file2");
    link("loop2", "loop1");
    link("loop1", "loop2");
    link("self", "self");
    link("missing", "dangling");
    link(r + "/missing/x", "dangling_abs");
    link(r + "/l_rel/e/f", "through_link");
    // A chain longer than RealPaths follows itself, and one longer than
    // any kernel or libc follows.
    for (int i = 0; i < 12; ++i) link(i == 11 ? "d" : "c" + std::to_string(i + 1), "c" + std::to_string(i));
    for (int i = 0; i < 45; ++i) link(i == 44 ? "d" : "long" + std::to_string(i + 1), "long" + std::to_string(i));
    // Counts add up along a path: 30 + 30 links is past realpath's 40,
    // 5 + 5 past what RealPaths counts itself.
    for (int i = 0; i < 30; ++i) link(i == 29 ? "d" : "mid" + std::to_string(i + 1), "mid" + std::to_string(i));
    for (int i = 0; i < 30; ++i) link(i == 29 ? "f" : "inner" + std::to_string(i + 1), "d/e/inner" + std::to_string(i));
    for (int i = 0; i < 5; ++i) link(i == 4 ? "f" : "k" + std::to_string(i + 1), "d/e/k" + std::to_string(i));
    ::chmod((r + "/closed").c_str(), 0);  // EACCES below it, unless root
    for (const char* p : {"",
                          "/d",
                          "/d/e/f",
                          "/d/e/g",
                          "/d/e/g/x",
                          "/l_rel",
                          "/l_rel/e/f",
                          "/l_rel/e/missing",
                          "/l_abs/e/g",
                          "/l_chain",
                          "/l_chain/f",
                          "/l_chain2/f/missing/deeper",
                          "/d/e/up",
                          "/d/e/up/d/e",
                          "/d/e/up/l_rel",
                          "/d/e/dot",
                          "/d/e/slash",
                          "/d/e/slashes",
                          "/d/fl",
                          "/d/fl_slash",
                          "/d/fl/x",
                          "/d/e/f/back",
                          "/d/sideways/f",
                          "/d/e/up_slash",
                          "/d/e/up_slash/e",
                          "/d/e/f/dotdot",
                          "/d/e/f/dotdot/g",
                          "/d/dotted",
                          "/d/e/past_root",
                          "/d/e/past_root/etc",
                          "/d/abs_up",
                          "/d/e/through_file",
                          "/d/e/through_file2",
                          "/loop1",
                          "/loop1/x",
                          "/self",
                          "/dangling",
                          "/dangling/x",
                          "/dangling_abs",
                          "/through_link",
                          "/missing",
                          "/missing/a/b",
                          "/d/file/x",
                          "/c0",
                          "/c0/e/f",
                          "/c5",
                          "/long0",
                          "/long0/e",
                          "/mid0",
                          "/mid0/e/inner0",
                          "/mid0/e/inner0/x",
                          "/d/e/inner0",
                          "/c7/e/k0",
                          "/c7/e/k1",
                          "/c9/e/k2/x",
                          "/closed",
                          "/closed/in",
                          "/closed/in/x",
                          "/d/../d",
                          "//d",
                          "/d/",
                          "/./d/e",
                          "/l_rel/../d"})
      paths.push_back(r + p);
    for (const char* p : {"/", "/proc/self", "/proc/self/cwd", "/proc/self/root/etc", "relative/path", ""})
      paths.push_back(p);
  }
  ~Tree() {
    ::chmod((r + "/closed").c_str(), 0755);
    std::filesystem::remove_all(r);
  }
};

// What the libc calls say, in the same words as a RealPaths::Status.
std::string described(const std::string& path, bool exists, const struct stat& lst, const std::string& link,
                      const std::optional<std::string>& real, const struct stat& st) {
  std::string out = path + ":";
  if (exists) out += " lstat " + std::to_string(lst.st_ino) + "/" + std::to_string(lst.st_mode);
  if (exists && S_ISLNK(lst.st_mode)) out += " link '" + link + "'";
  if (real)
    out += " real " + *real + " stat " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + "/" +
           std::to_string(st.st_mode);
  return out;
}

std::string by_libc(const std::string& path) {
  struct stat lst {
  }, st{};
  const bool exists = ::lstat(path.c_str(), &lst) == 0;
  std::string link;
  char buf[PATH_MAX];
  if (exists && S_ISLNK(lst.st_mode)) {
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n > 0) link.assign(buf, static_cast<size_t>(n));
  }
  std::optional<std::string> real;
  if (::realpath(path.c_str(), buf) && ::stat(buf, &st) == 0) real = std::string(buf);
  return described(path, exists, lst, link, real, st);
}

std::string by_cache(RealPaths& cache, const std::string& path) {
  const auto& s = cache.status(path);
  return described(path, s.exists, s.lst, s.link, s.real, s.st);
}

// probe_paths as it was before RealPaths: the libc calls for each path.
std::string fact_by_libc(const std::string& path) {
  pj::view::PathFact f;
  struct stat lst;
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    f.is_symlink = true;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n > 0) f.link_target.assign(buf, static_cast<size_t>(n));
  }
  char real[PATH_MAX];
  struct stat st;
  if (::realpath(path.c_str(), real) && ::stat(real, &st) == 0) {
    f.kind = S_ISDIR(st.st_mode)    ? pj::view::PathFact::Kind::directory
             : S_ISREG(st.st_mode)  ? pj::view::PathFact::Kind::file
             : S_ISSOCK(st.st_mode) ? pj::view::PathFact::Kind::socket
                                    : pj::view::PathFact::Kind::other;
    f.resolved = real;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
  } else if (!f.is_symlink) {
    // The nearest existing ancestor's realpath, joined with the rest.
    std::string rest;
    f.resolved = path;
    for (std::string p = path; p != "/" && !p.empty();) {
      size_t slash = p.rfind('/');
      std::string parent = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
      rest = "/" + p.substr(parent == "/" ? 1 : parent.size() + 1) + rest;
      if (::realpath(parent.c_str(), real)) {
        f.resolved = (std::string(real) == "/" ? "" : std::string(real)) + rest;
        break;
      }
      p = parent;
    }
  }
  return std::to_string(static_cast<int>(f.kind)) + " link " + std::to_string(f.is_symlink) + " '" + f.link_target +
         "' resolved '" + f.resolved + "' " + std::to_string(f.dev) + ":" + std::to_string(f.ino);
}

std::string fact_text(const pj::view::PathFact& f) {
  return std::to_string(static_cast<int>(f.kind)) + " link " + std::to_string(f.is_symlink) + " '" + f.link_target +
         "' resolved '" + f.resolved + "' " + std::to_string(f.dev) + ":" + std::to_string(f.ino);
}

}  // namespace

TEST_CASE("RealPaths says what lstat, readlink, realpath and stat say, asked deepest first or shallowest first") {
  Tree t;
  std::vector<std::string> forward = t.paths, backward(t.paths.rbegin(), t.paths.rend());
  for (const auto* order : {&forward, &backward}) {
    RealPaths cache;
    for (const auto& p : *order) {
      CAPTURE(p);
      CHECK(by_cache(cache, p) == by_libc(p));
      CHECK(by_cache(cache, p) == by_libc(p));  // the second answer is the memo
    }
  }
  // The tree has what it is meant to have.
  RealPaths cache;
  CHECK(cache.real(t.r + "/l_chain2/f") == t.r + "/d/e/f");
  CHECK(cache.real(t.r + "/c0/e/f") == t.r + "/d/e/f");
  CHECK_FALSE(cache.real(t.r + "/long0"));  // ELOOP
  CHECK(cache.real(t.r + "/mid0") == t.r + "/d");
  CHECK(cache.real(t.r + "/d/e/inner0") == t.r + "/d/e/f");
  CHECK_FALSE(cache.real(t.r + "/mid0/e/inner0"));  // ELOOP: 60 links
  CHECK(cache.real(t.r + "/c7/e/k0") == t.r + "/d/e/f");
  CHECK_FALSE(cache.real(t.r + "/loop1"));
  CHECK_FALSE(cache.real(t.r + "/d/fl_slash"));  // ENOTDIR
  CHECK(cache.real(t.r + "/d/e/f/back") == t.r + "/d/file");
  CHECK(cache.status(t.r + "/dangling").exists);
  CHECK_FALSE(cache.real(t.r + "/dangling"));
}

TEST_CASE("probe_paths gives the facts the libc calls give, for links, dangling links and absent leaves") {
  Tree t;
  std::vector<std::string> paths;
  for (const auto& p : t.paths)
    if (!p.empty()) paths.push_back(p);  // probe_paths is given non-empty paths
  auto facts = pj::view::probe_paths(paths);
  for (const auto& p : paths) {
    CAPTURE(p);
    CHECK(fact_text(pj::view::fact(facts, p)) == fact_by_libc(p));
  }
}
