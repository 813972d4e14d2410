#include "view/facts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "util/paths.h"

namespace pj::view {

namespace {

const PathFact kAbsent{};

PathFact::Kind kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return PathFact::Kind::directory;
  if (S_ISREG(mode)) return PathFact::Kind::file;
  if (S_ISSOCK(mode)) return PathFact::Kind::socket;
  return PathFact::Kind::other;
}

// The real path of `path`'s nearest existing ancestor, joined with the
// rest of `path`.
std::string resolve_absent(const std::string& path) {
  std::string rest;
  for (std::string p = path; p != "/";) {
    std::string parent(util::parent_path(p));
    rest = "/" + p.substr(parent == "/" ? 1 : parent.size() + 1) + rest;
    char real[PATH_MAX];
    if (::realpath(parent.c_str(), real)) return (std::string(real) == "/" ? "" : std::string(real)) + rest;
    p = parent;
  }
  return path;
}

}  // namespace

const PathFact& fact(const Facts& facts, std::string_view path) {
  auto it = facts.find(path);
  return it == facts.end() ? kAbsent : it->second;
}

bool usable(const PathFact& f) { return f.kind == PathFact::Kind::directory || f.kind == PathFact::Kind::file; }

Facts probe_paths(const std::vector<std::string>& paths) {
  Facts facts;
  for (const auto& path : paths) {
    if (facts.count(path)) continue;
    PathFact f;
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
      f.kind = kind_of(st.st_mode);
      f.resolved = real;
      f.dev = st.st_dev;
      f.ino = st.st_ino;
    } else if (!f.is_symlink) {
      f.resolved = resolve_absent(path);  // a dangling link stays unresolved: the planners refuse it
    }
    facts.emplace(path, std::move(f));
  }
  return facts;
}

}  // namespace pj::view
