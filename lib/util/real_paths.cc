#include "real_paths.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "paths.h"

namespace pj::util {

namespace {

std::string read_link(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// lstat, readlink, realpath and stat, the libc way. How many links
// realpath followed is not known: more than any count kept here.
RealPaths::Status direct(const std::string& path) {
  RealPaths::Status s;
  s.links = RealPaths::kMaxLinks + 1;
  s.exists = ::lstat(path.c_str(), &s.lst) == 0;
  if (s.exists && S_ISLNK(s.lst.st_mode)) s.link = read_link(path);
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) && ::stat(buf, &s.st) == 0) s.real = std::string(buf);
  return s;
}

bool normalized_absolute(const std::string& path) {
  auto norm = normalize_path(path);
  return norm && *norm == path;
}

// `a` + "/" + `b` for a real directory `a`.
std::string join(const std::string& a, const std::string& b) { return (a == "/" ? "" : a) + "/" + b; }

// The path a symlink in the real directory `up` whose target is `link`
// names, where that needs no look at the filesystem: leading ".."
// climb from `up` (or from "/" for an absolute target; a real directory's
// parent is its lexical parent), then plain names only. nullopt for any
// other target (".", ".." after a name, "//", a trailing "/"):
// realpath(3) resolves those.
std::optional<std::string> plain_target(const std::string& up, const std::string& link) {
  if (link.empty()) return std::nullopt;
  std::string base = link.front() == '/' ? "/" : up;
  std::string_view rest = link;
  if (rest.front() == '/') rest.remove_prefix(1);
  while (rest == ".." || rest.starts_with("../")) {
    base = std::string(parent_path(base));
    rest.remove_prefix(rest.size() == 2 ? 2 : 3);
  }
  if (rest.empty()) return base;
  std::string target = join(base, std::string(rest));
  if (!normalized_absolute(target)) return std::nullopt;
  return target;
}

}  // namespace

const RealPaths::Status& RealPaths::status(const std::string& path) {
  if (auto it = memo_.find(path); it != memo_.end()) return it->second;
  Status s = compute(path);
  return memo_.emplace(path, std::move(s)).first->second;
}

RealPaths::Status RealPaths::compute(const std::string& path) {
  if (path == "/") {
    Status s = direct(path);
    s.links = 0;
    return s;
  }
  if (!normalized_absolute(path)) return direct(path);
  const std::string parent(parent_path(path));
  const std::string name = path.substr(parent == "/" ? 1 : parent.size() + 1);
  const Status& above = status(parent);
  if (above.links > kMaxLinks) return direct(path);
  if (!above.real) {
    // realpath fails below a parent it cannot resolve. lstat does too
    // (through a dangling or looping link, or an unsearchable directory),
    // and is asked only when the parent is there at all.
    Status s;
    s.links = above.links;
    if (above.exists) s.exists = ::lstat(path.c_str(), &s.lst) == 0;
    if (s.exists && S_ISLNK(s.lst.st_mode)) s.link = read_link(path);
    return s;
  }
  const std::string joined = join(*above.real, name);
  Status s;
  s.links = above.links;
  s.exists = ::lstat(joined.c_str(), &s.lst) == 0;
  if (!s.exists) return s;
  if (S_ISLNK(s.lst.st_mode)) {
    follow(path, *above.real, s);
    return s;
  }
  if (joined.size() >= PATH_MAX) return s;  // realpath(3) would fail with ENAMETOOLONG
  s.real = joined;
  s.st = s.lst;
  return s;
}

// The symlink `path` (s.lst says so) in the real directory `up`, its
// parent resolved with s.links links.
void RealPaths::follow(const std::string& path, const std::string& up, Status& s) {
  s.link = read_link(join(up, path.substr(path.rfind('/') + 1)));
  const auto target = plain_target(up, s.link);
  // A loop comes back here before any of its links is memoised: the
  // depth of links being followed one inside another stops it.
  if (target && s.links < kMaxLinks && following_ < kMaxLinks) {
    ++following_;
    const Status& t = status(*target);
    --following_;
    if (s.links + 1 + t.links <= kMaxLinks) {
      s.links += 1 + t.links;
      s.real = t.real;
      s.st = t.st;
      return;
    }
  }
  const Status d = direct(path);
  s.links = d.links;
  s.real = d.real;
  s.st = d.st;
}

}  // namespace pj::util
