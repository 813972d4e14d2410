// realpath(3) for many host paths that share ancestors, each ancestor
// resolved once. POSIX calls only (the Seatbelt build shares it).
//
// A path whose parent's real path is known and that is not itself a
// symlink (lstat) is that real path joined with its name, and its stat
// is that lstat: one system call where realpath makes a readlink per
// component and the caller a stat. A symlink whose target is plain
// (leading ".." only, then names: no ".", empty component or trailing
// "/") resolves as that target from the parent's real path would.
// Other symlinks, paths that take more than kMaxLinks symlinks to
// resolve (realpath gives up past 40: it is asked, so ELOOP comes where
// it would), and paths that are not absolute and normalised go to
// realpath(3) itself. The answers are realpath's as of when each path
// was first asked about: keep one cache for one look at the host (a
// probe, a policy resolution), not across changes to it.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace pj::util {

class RealPaths {
public:
  struct Status {
    bool exists = false;  // lstat(2) succeeded
    struct stat lst {};   // of the path itself, when it exists
    std::string link;     // readlink(2), when the path is a symlink
    // realpath(3), and stat(2) of it, when both succeed.
    std::optional<std::string> real;
    struct stat st {};
    // Symlinks followed to resolve it, as realpath(3) counts them (more
    // than kMaxLinks: not counted, realpath(3) was asked).
    int links = 0;
  };
  static constexpr int kMaxLinks = 8;

  // What lstat, readlink, realpath and stat say about `path`.
  const Status& status(const std::string& path);

  // realpath(3) of `path`, or nullopt where it fails.
  std::optional<std::string> real(const std::string& path) { return status(path).real; }

private:
  Status compute(const std::string& path);
  void follow(const std::string& path, const std::string& up, Status& s);
  std::map<std::string, Status, std::less<>> memo_;
  int following_ = 0;  // links being followed, one inside another
};

}  // namespace pj::util
