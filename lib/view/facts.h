// Facts about host paths: what the host has at each path a plan asks
// about. Gathered once by probe_paths() (reads only; POSIX calls only,
// so the Seatbelt build on macOS shares it), then read by the pure
// planners, which are unit-tested with hand-made facts.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pj::view {

// What the host has at one path. `kind` is what the path resolves to;
// `is_symlink` whether the path itself is a symlink (the planners decide
// what a link means; nothing is followed blindly).
struct PathFact {
  enum class Kind { absent, directory, file, socket, other };
  Kind kind = Kind::absent;
  bool is_symlink = false;
  std::string link_target;  // readlink(2) of the path when is_symlink
  // realpath(3) when the path resolves. For an absent path that is not a
  // symlink: the real path of its nearest existing ancestor joined with
  // the rest (Seatbelt matches real paths: /tmp is /private/tmp). Empty
  // for a dangling symlink.
  std::string resolved;
  dev_t dev = 0;  // of the resolved object, when it exists
  ino_t ino = 0;
};
using Facts = std::map<std::string, PathFact, std::less<>>;

// The fact for `path`, or an absent one when it was not probed.
const PathFact& fact(const Facts& facts, std::string_view path);

// A directory or a regular file (what a grant, a mark or a mask can be).
bool usable(const PathFact& f);

// lstat, readlink, realpath and stat each path, once (each ancestor
// resolved once: util/real_paths.h).
Facts probe_paths(const std::vector<std::string>& paths);

}  // namespace pj::view
