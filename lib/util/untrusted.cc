#include "untrusted.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dir_names.h"
#include "paths.h"
#ifdef __linux__
#include "openat2.h"
#endif

namespace pj::util {

namespace {

// Split "a/b/c" into its directory part "a/b" and last name "c".
std::pair<std::string_view, std::string_view> split_last(std::string_view rel) {
  while (rel.ends_with('/')) rel.remove_suffix(1);
  size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

bool bad_name(std::string_view name) { return name.empty() || name == "." || name == ".."; }

NodeType type_of(mode_t mode) {
  if (S_ISDIR(mode)) return NodeType::directory;
  if (S_ISREG(mode)) return NodeType::regular;
  if (S_ISLNK(mode)) return NodeType::symlink;
  return NodeType::other;
}

// What a node that is not a regular file is, for a message ("a FIFO").
const char* kind_words(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

// "PATH is a FIFO", with the fix.
Error not_regular_output(const std::string& path, mode_t mode) {
  return Error::invalid(
      fmt::format("{} is {}; only a regular file is written to: give the path of one, or of none "
                  "to have it created",
                  path, kind_words(mode)));
}

// The error for an open(2) of `path` that failed with `err`: when
// something that is not a regular file is there (ELOOP: a symlink; ENXIO:
// a FIFO without a reader; EISDIR...), say what it is.
Error output_open_error(const std::string& path, int err) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return not_regular_output(path, st.st_mode);
  return Error::from_errno(fmt::format("open {} for writing", path), err);
}

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// The directory that holds a name looked up beneath `dirfd`: `dirfd`
// itself when the name has no directory part (nothing is reopened), else
// the directory open_dir_beneath() opens.
struct Holder {
  UniqueFd opened;
  int borrowed = -1;
  int get() const { return opened.valid() ? opened.get() : borrowed; }
};
Result<Holder> holder_of(int dirfd, std::string_view dir_part) {
  if (dir_part.empty()) return Holder{UniqueFd(), dirfd};
  auto dir = open_dir_beneath(dirfd, dir_part);
  if (!dir) return dir.take_error();
  return Holder{std::move(*dir), -1};
}

// What the walk does at a missing component.
enum class Missing { fail, make_private };

// `rel` walked from `dirfd` one component at a time with O_NOFOLLOW: the
// fallback where openat2 is not there, and the reference for its errors
// (the message names the component). With Missing::make_private, a
// missing component is made 0700 (EEXIST: a concurrent run made it) and
// then opened like any other.
Result<UniqueFd> walk_beneath(int dirfd, std::string_view rel, Missing missing) {
  UniqueFd cur(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur.valid()) return Error::from_errno("open a directory", errno);
  for (auto part : path_components(rel)) {
    if (part == ".") continue;
    if (part == "..") return Error::from_errno(fmt::format("{}: \"..\" is not followed", rel), EPERM);
    std::string name(part);
    UniqueFd next(::openat(cur.get(), name.c_str(), kDirFlags));
    if (!next.valid() && errno == ENOENT && missing == Missing::make_private) {
      if (::mkdirat(cur.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
        return Error::from_errno(fmt::format("make {} in {}", name, rel), errno);
      next = UniqueFd(::openat(cur.get(), name.c_str(), kDirFlags));
    }
    if (!next.valid()) {
      int err = errno;
      struct stat st;
      // O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR on some kernels:
      // tell the symlink apart, for the message.
      if (err == ENOTDIR && ::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        err = ELOOP;
      return Error::from_errno(fmt::format("open {} in {}", name, rel), err);
    }
    cur = std::move(next);
  }
  return cur;
}

// The components of `rel` joined by "/" ("a//./b/" -> "a/b"; "" for
// `rel` itself), or nullopt when one is "..": the walk refuses that, at
// the component where it stands.
std::optional<std::string> plain_relative(std::string_view rel) {
  std::string out;
  for (auto part : path_components(rel)) {
    if (part == ".") continue;
    if (part == "..") return std::nullopt;
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

enum class Beneath { no, yes };

#ifdef __linux__
// Set once openat2 is known to be missing (ENOSYS: Linux < 5.6; E2BIG
// or EINVAL: a kernel that does not take this struct or these flags).
std::atomic<bool> g_no_openat2{false};
#endif

// The directory `path` in one openat2(2) call that follows no symlink
// and no magic link in any component, the last included
// (RESOLVE_NO_SYMLINKS: ELOOP), and with `beneath` never resolves outside
// `dirfd` (RESOLVE_BENEATH). `path` holds no "..". The guarantee is the
// walk's; the cost is one system call instead of two per component.
// Returns the fd, or -1 with errno: ENOENT when a component is missing;
// anything else (openat2 missing or refused by an outer sandbox's
// seccomp filter, a symlink, not a directory, EACCES) means "let the
// walk decide", which gives the errno and message for the component.
int open_dir_at_once(int dirfd, const std::string& path, Beneath beneath) {
#ifdef __linux__
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    std::uint64_t resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    if (beneath == Beneath::yes) resolve |= RESOLVE_BENEATH;
    int fd = openat2(dirfd, path.c_str(), kDirFlags, resolve);
    if (fd >= 0 || errno == ENOENT) return fd;
    if (errno == ENOSYS || errno == E2BIG || errno == EINVAL) g_no_openat2.store(true, std::memory_order_relaxed);
  }
#else
  (void)dirfd, (void)path, (void)beneath;
#endif
  errno = ENOSYS;
  return -1;
}

}  // namespace

Result<UniqueFd> open_output_file(const std::string& path, OutputMode mode, mode_t perm) {
  int flags = O_WRONLY | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
  if (mode == OutputMode::append) flags |= O_APPEND;
  UniqueFd fd(::open(path.c_str(), flags, perm));
  if (!fd.valid()) return output_open_error(path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(fmt::format("stat {}", path), errno);
  if (!S_ISREG(st.st_mode)) return not_regular_output(path, st.st_mode);
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0)
    return Error::from_errno(fmt::format("make {} blocking", path), errno);
  if (mode == OutputMode::replace_content && ::ftruncate(fd.get(), 0) != 0)
    return Error::from_errno(fmt::format("empty {}", path), errno);
  return fd;
}

Result<UniqueFd> open_dir_beneath(int dirfd, std::string_view rel) {
  if (auto plain = plain_relative(rel); plain && !plain->empty()) {
    UniqueFd fd(open_dir_at_once(dirfd, *plain, Beneath::yes));
    if (fd.valid()) return fd;
    if (errno == ENOENT) return Error::from_errno(fmt::format("open {}", rel), ENOENT);
  }
  return walk_beneath(dirfd, rel, Missing::fail);
}

Result<UniqueFd> open_dir_nofollow(std::string_view absolute) {
  if (absolute.empty() || absolute.front() != '/')
    return Error::invalid(fmt::format("{}: not an absolute path", absolute));
  const std::string what = fmt::format("open the directory {} without following symlinks", absolute);
  if (auto plain = plain_relative(absolute)) {
    // Absolute, so not RESOLVE_BENEATH (it refuses a leading "/"); with
    // no ".." and no symlink followed, nothing leaves the path as written.
    UniqueFd fd(open_dir_at_once(AT_FDCWD, "/" + *plain, Beneath::no));
    if (fd.valid()) return fd;
    if (errno == ENOENT) return Error::from_errno(what, ENOENT);
  }
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Error::from_errno("open /", errno);
  auto dir = walk_beneath(root.get(), absolute.substr(1), Missing::fail);
  if (!dir) return Error::from_errno(what, dir.error().err());
  return dir;
}

Result<UniqueFd> make_private_dir(std::string_view absolute) {
  // Opened first: it exists on every run but the first. Only when a
  // component is missing is the path walked again, making what is missing.
  auto dir = open_dir_nofollow(absolute);
  if (!dir && dir.error().err() == ENOENT) {
    UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) return Error::from_errno("open /", errno);
    dir = walk_beneath(root.get(), absolute.substr(1), Missing::make_private);
  }
  if (!dir) return Error::from_errno(fmt::format("make the directory {}", absolute), dir.error().err());
  return dir;
}

Result<NodeInfo> stat_beneath(int dirfd, std::string_view rel) {
  auto [dir_part, name] = split_last(rel);
  NodeInfo info;
  if (name.empty() || name == ".") {
    struct stat st;
    if (::fstat(dirfd, &st) != 0) return Error::from_errno("stat a directory", errno);
    return NodeInfo{type_of(st.st_mode), st.st_dev, st.st_ino, st.st_uid, st.st_size};
  }
  if (bad_name(name)) return Error::from_errno(fmt::format("{}: \"..\" is not followed", rel), EPERM);
  auto dir = holder_of(dirfd, dir_part);
  if (!dir) {
    if (dir.error().err() == ENOENT) return info;  // absent
    return dir.take_error();
  }
  std::string n(name);
  struct stat st;
  if (::fstatat(dir->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return info;
    return Error::from_errno(fmt::format("stat {}", rel), errno);
  }
  return NodeInfo{type_of(st.st_mode), st.st_dev, st.st_ino, st.st_uid, st.st_size};
}

Result<size_t> check_open_file(int fd, size_t cap, std::string_view shown) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Error::from_errno(fmt::format("stat {}", shown), errno);
  if (!S_ISREG(st.st_mode))
    return Error::invalid(fmt::format("read {}: not a regular file ({})", shown,
                                      S_ISFIFO(st.st_mode)  ? "a FIFO"
                                      : S_ISDIR(st.st_mode) ? "a directory"
                                                            : "a device or socket"));
  if (static_cast<size_t>(st.st_size) > cap)
    return Error::invalid(fmt::format("read {}: {} bytes, more than the {} expected", shown, st.st_size, cap));
  return static_cast<size_t>(st.st_size);
}

Result<std::string> read_open_file(int fd, size_t cap, std::string_view shown) {
  auto size = check_open_file(fd, cap, shown);
  if (!size) return size.take_error();
  return read_checked_file(fd, *size, cap, shown);
}

Result<std::string> read_checked_file(int fd, size_t size, size_t cap, std::string_view shown) {
  // Sized by the file, not by the cap: a 4 MiB cap must not cost 4 MiB
  // of memory for a file of a few bytes. It grows (to one byte past the
  // cap at most) when the file grew since fstat.
  std::string out;
  out.resize(std::min(size, cap) + 1);
  size_t got = 0;
  while (true) {
    if (got == out.size()) {
      if (out.size() > cap) break;
      out.resize(std::min(out.size() * 2, cap + 1));
    }
    ssize_t n_read = ::read(fd, out.data() + got, out.size() - got);
    if (n_read < 0 && errno == EINTR) continue;
    if (n_read < 0) return Error::from_errno(fmt::format("read {}", shown), errno);
    if (n_read == 0) break;
    got += static_cast<size_t>(n_read);
  }
  if (got > cap) return Error::invalid(fmt::format("read {}: more than the {} bytes expected", shown, cap));
  out.resize(got);
  return out;
}

Result<std::optional<std::string>> read_untrusted_file(int dirfd, std::string_view rel, size_t cap,
                                                       std::string_view shown) {
  auto [dir_part, name] = split_last(rel);
  if (bad_name(name)) return Error::invalid(fmt::format("{}: not a file name", shown));
  auto dir = holder_of(dirfd, dir_part);
  if (!dir) {
    if (dir.error().err() == ENOENT) return std::optional<std::string>();
    return Error::from_errno(fmt::format("read {}: a directory on the way is a symlink or not a directory", shown),
                             dir.error().err());
  }
  std::string n(name);
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  UniqueFd fd(::openat(dir->get(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return Error::from_errno(fmt::format("read {}: it is a symlink", shown), ELOOP);
    return Error::from_errno(fmt::format("read {}", shown), errno);
  }
  auto content = read_open_file(fd.get(), cap, shown);
  if (!content) return content.take_error();
  return std::optional<std::string>(std::move(*content));
}

Result<std::optional<std::string>> read_untrusted_file(std::string_view absolute, size_t cap) {
  if (absolute.empty() || absolute.front() != '/')
    return Error::invalid(fmt::format("{}: not an absolute path", absolute));
  // Its directory opened as open_dir_nofollow() does (one openat2 call
  // where the kernel has it), then the name read in it.
  auto [dir_part, name] = split_last(absolute);
  if (bad_name(name)) return Error::invalid(fmt::format("{}: not a file name", absolute));
  auto dir = open_dir_nofollow(dir_part.empty() ? std::string_view("/") : dir_part);
  if (!dir) {
    if (dir.error().err() == ENOENT) return std::optional<std::string>();
    return Error::from_errno(fmt::format("read {}: a directory on the way is a symlink or not a directory", absolute),
                             dir.error().err());
  }
  return read_untrusted_file(dir->get(), name, cap, absolute);
}

bool directory_is_empty(int dirfd) {
  bool empty = true;
  const bool read = for_each_name(dirfd, [&](std::string_view) { return empty = false; });
  return read && empty;
}

namespace {

// Filesystems whose directory entries carry the inode's own type (set
// when the entry is made). Others may record none (DT_UNKNOWN) or, like
// CIFS with mfsymlinks, a regular file for what lstat shows as a link.
bool records_true_types(int dirfd) {
  struct statfs fs;
  if (::fstatfs(dirfd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:      // ext2, ext3, ext4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0xF2F52010:  // f2fs
    case 0x794C7630:  // overlayfs
      return true;
    default: return false;
  }
}

// Give the owner rwx on a directory it lost them on (only when needed).
bool restore_owner_rights(int fd, const char* name) {
  struct stat st;
  if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH)) != 0 || !S_ISDIR(st.st_mode))
    return false;
  if ((st.st_mode & S_IRWXU) == S_IRWXU) return false;
  const mode_t mode = (st.st_mode & 07777) | S_IRWXU;
  return (*name ? ::fchmodat(fd, name, mode, AT_SYMLINK_NOFOLLOW) : ::fchmod(fd, mode)) == 0;
}

}  // namespace

SpecialFiles remove_special_files(const std::string& dir) {
  constexpr int kMaxDepth = 128;  // the jail can nest deeper: the rest is counted unchecked
  constexpr size_t kMaxEntries = 200000;
  SpecialFiles out;
  size_t seen = 0;
  auto walk = [&](auto& self, int fd, int depth) -> void {
    std::vector<std::string> subdirs, odd;
    const bool typed = records_true_types(fd);
    const bool whole = for_each_entry(fd, [&](std::string_view n, unsigned char type) {
      if (seen == kMaxEntries) return false;
      ++seen;
      if (!typed || type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(fd, std::string(n).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          ++out.unchecked;
          return true;
        }
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (type == DT_DIR)
        subdirs.emplace_back(n);
      else if (type != DT_REG)
        odd.emplace_back(n);
      return true;
    });
    if (!whole || seen == kMaxEntries) ++out.unchecked;
    bool restored = false;
    for (const auto& n : odd) {
      int rc = ::unlinkat(fd, n.c_str(), 0);
      if (rc != 0 && (errno == EACCES || errno == EPERM) && !restored) {
        restored = restore_owner_rights(fd, "");
        if (restored) rc = ::unlinkat(fd, n.c_str(), 0);
      }
      rc == 0 ? ++out.removed : ++out.unchecked;
    }
    if (depth >= kMaxDepth) {
      out.unchecked += subdirs.size();
      return;
    }
    for (const auto& s : subdirs) {
      constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
      UniqueFd sub(::openat(fd, s.c_str(), kFlags));
      if (!sub.valid() && errno == EACCES && restore_owner_rights(fd, s.c_str()))
        sub = UniqueFd(::openat(fd, s.c_str(), kFlags));
      if (sub.valid())
        self(self, sub.get(), depth + 1);
      else
        ++out.unchecked;
    }
  };
  if (auto top = open_dir_nofollow(dir))
    walk(walk, top->get(), 0);
  else
    ++out.unchecked;
  return out;
}

}  // namespace pj::util
