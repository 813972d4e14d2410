// The user's symlinks at the top of a private directory (pi/user_links.h).
#include "pi/user_links.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include <fmt/format.h>

#include "pi/agent_state.h"
#include "util/escape.h"
#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::pi {

using util::Error;

namespace {

constexpr size_t kCopyCap = agent::kMaxFileBytes;

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

// `path` resolved as realpath(3) does, one component at a time, refusing
// when the walk enters `writable` anywhere: a link on the way that the
// jail could retarget would make a later run read, and write back to, a
// file of the jail's choosing.
util::Result<std::string> resolve_outside(const std::string& path, const std::vector<std::string>& writable) {
  std::vector<std::string> todo;  // components still to walk, the next last
  auto push_front = [&](std::string_view p) {
    std::vector<std::string> parts;
    for (size_t at = 0; at <= p.size();) {
      size_t end = std::min(p.find('/', at), p.size());
      parts.emplace_back(p.substr(at, end - at));
      at = end + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_front(path);
  std::string resolved;
  for (int links = 0; !todo.empty();) {
    const std::string c = std::move(todo.back());
    todo.pop_back();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      resolved = resolved.empty() ? "" : std::string(util::parent_path(resolved));
      if (resolved == "/") resolved.clear();
      continue;
    }
    const std::string next = resolved + "/" + c;
    for (const auto& w : writable)
      if (util::path_within(next, w))
        return Error::invalid(
            fmt::format("it leads through {}, which the jail can write (a run could change it "
                        "for the next)",
                        util::printable(next)));
    struct stat st;
    if (::lstat(next.c_str(), &st) != 0)
      return Error::from_errno(fmt::format("it leads to {}, which cannot be reached", util::printable(next)), errno);
    if (!S_ISLNK(st.st_mode)) {
      resolved = next;
      continue;
    }
    if (++links > 40) return Error::from_errno(fmt::format("it leads through too many links at {}", next), ELOOP);
    char text[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), text, sizeof text - 1);
    if (n <= 0)
      return Error::from_errno(fmt::format("read the link {}", util::printable(next)), n < 0 ? errno : ENOENT);
    const std::string_view target(text, static_cast<size_t>(n));
    if (target.starts_with('/')) resolved.clear();
    push_front(target);
  }
  return resolved.empty() ? std::string("/") : resolved;
}

// The symlink `name` at the top of the private directory `dir` (host path
// `dir_path`), followed when it leads to a regular file the user owns, of
// at most kCopyCap bytes, outside every path the jail may write
// (`writable`: a jail could change such a target for the next run, or
// swap it for a link elsewhere before the write-back). The link is the
// user's own: the jail sees only the run's copy of this directory.
util::Result<UserLink> follow_user_link(int dir, const std::string& dir_path, const std::string& name,
                                        const std::vector<std::string>& writable) {
  char text[PATH_MAX];
  const ssize_t n = ::readlinkat(dir, name.c_str(), text, sizeof text - 1);
  if (n <= 0) return Error::from_errno("read the link", n < 0 ? errno : ENOENT);
  UserLink link{std::string(text, static_cast<size_t>(n)), {}, {}, {}};
  auto resolved = resolve_outside(dir_path + "/" + name, writable);
  if (!resolved) return resolved.take_error();
  link.target = std::move(*resolved);
  const std::string shown = util::printable(link.target);
  auto parent = util::open_dir_nofollow(util::parent_path(link.target));
  if (!parent) return Error::from_errno(fmt::format("open the directory of {}", shown), parent.error().err());
  link.dir = std::move(*parent);
  link.name = link.target.substr(link.target.rfind('/') + 1);
  struct stat st;
  if (::fstatat(link.dir.get(), link.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::from_errno(fmt::format("stat {}", shown), errno);
  if (!S_ISREG(st.st_mode))
    return Error::invalid(fmt::format("it leads to {}, which is {}", shown, kind_of(st.st_mode)));
  if (st.st_uid != ::geteuid())
    return Error::invalid(fmt::format("it leads to {}, which belongs to uid {}, not to you", shown, st.st_uid));
  if (static_cast<size_t>(st.st_size) > kCopyCap)
    return Error::invalid(fmt::format("it leads to {}, which is larger than {} bytes", shown, kCopyCap));
  return link;
}

}  // namespace pj::pi
