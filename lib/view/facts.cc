#include "view/facts.h"

#include <sys/stat.h>

#include "util/paths.h"
#include "util/real_paths.h"

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
std::string resolve_absent(const std::string& path, util::RealPaths& real_paths) {
  std::string rest;
  for (std::string p = path; p != "/";) {
    std::string parent(util::parent_path(p));
    rest = "/" + p.substr(parent == "/" ? 1 : parent.size() + 1) + rest;
    if (auto real = real_paths.real(parent)) return (*real == "/" ? "" : *real) + rest;
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
  util::RealPaths real_paths;  // the paths share most of their ancestors
  for (const auto& path : paths) {
    if (facts.count(path)) continue;
    PathFact f;
    const auto& status = real_paths.status(path);
    if (status.exists && S_ISLNK(status.lst.st_mode)) {
      f.is_symlink = true;
      f.link_target = status.link;
    }
    if (status.real) {
      f.kind = kind_of(status.st.st_mode);
      f.resolved = *status.real;
      f.dev = status.st.st_dev;
      f.ino = status.st.st_ino;
    } else if (!f.is_symlink) {
      f.resolved = resolve_absent(path, real_paths);  // a dangling link stays unresolved: the planners refuse it
    }
    facts.emplace(path, std::move(f));
  }
  return facts;
}

}  // namespace pj::view
