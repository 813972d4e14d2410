#include "runtime/compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "util/file_lock.h"
#include "util/paths.h"
#include "util/random.h"
#include "util/temp_file.h"
#include "util/unique_fd.h"
#include "util/untrusted.h"

namespace pj::runtime::compile_cache {

using util::Error;
using util::UniqueFd;

namespace {

constexpr std::string_view kWarmPrefix = ".warm-";
constexpr int kMaxDepth = 64;

std::string base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// FNV-1a, 64 bits. The inputs are not the jail's to choose (the
// installation is outside every writable grant), so this only has to
// tell installations apart, not resist collisions made on purpose.
std::uint64_t fnv1a(std::string_view s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::optional<std::string> identity(const std::string& what, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
#ifdef __APPLE__
  const timespec mtime = st.st_mtimespec, ctime = st.st_ctimespec;
#else
  const timespec mtime = st.st_mtim, ctime = st.st_ctim;
#endif
  return fmt::format("{}={}:{}:{}:{}:{}.{}:{}.{};", what, path, st.st_dev, st.st_ino, st.st_size, mtime.tv_sec,
                     mtime.tv_nsec, ctime.tv_sec, ctime.tv_nsec);
}

// Ours, and nobody else's to change: a real directory (the fd was opened
// O_NOFOLLOW), owned by the caller, not writable by group or others.
util::Status check_own_dir(int fd, const std::string& shown) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Error::from_errno(fmt::format("stat {}", shown), errno);
  if (!S_ISDIR(st.st_mode)) return Error::invalid(fmt::format("{} is not a directory", shown));
  if (st.st_uid != ::geteuid())
    return Error::invalid(fmt::format("{} belongs to uid {}, not to you (uid {})", shown, st.st_uid, ::geteuid()));
  if (st.st_mode & 022)
    return Error::invalid(fmt::format("{} has mode {:04o}: others can write it", shown, st.st_mode & 07777));
  return {};
}

// The directory `name` in `dir`, made (0700) when `create` and missing,
// opened without following a symlink and checked as check_own_dir does.
util::Result<UniqueFd> own_dir_at(int dir, const std::string& name, const std::string& shown, bool create) {
  if (create && ::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno(fmt::format("make {}", shown), errno);
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::from_errno(fmt::format("stat {}", shown), errno);
  if (S_ISLNK(st.st_mode)) return Error::invalid(fmt::format("{} is a symlink", shown));
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(fmt::format("open {}", shown), errno);
  if (auto ok = check_own_dir(fd.get(), shown); !ok) return ok.take_error();
  return fd;
}

std::vector<std::string> names_in(int dir) {
  std::vector<std::string> names;
  int copy = ::dup(dir);
  if (copy < 0) return names;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return names;
  }
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

// Remove `name` in `dir` and everything below it, never following a
// symlink (what a warm-up left; it is the caller's own).
void remove_tree(int dir, const char* name, int depth = 0) {
  if (::unlinkat(dir, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  if (depth < kMaxDepth) {
    (void)::fchmodat(dir, name, 0700, AT_SYMLINK_NOFOLLOW);
    UniqueFd fd(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.valid())
      for (const auto& n : names_in(fd.get())) remove_tree(fd.get(), n.c_str(), depth + 1);
  }
  ::unlinkat(dir, name, AT_REMOVEDIR);
}

bool valid_key(const std::string& key) {
  return !key.empty() && key.size() <= 64 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

bool is_node_program(const Program& p) {
  if (p.interpreter.empty()) return false;
  const std::string name = base_name(p.interpreter);
  return name == "node" || name == "nodejs" ||
         (name.starts_with("node") && name.size() > 4 && name.find_first_not_of("0123456789.", 4) == std::string::npos);
}

std::string package_json_of(const std::string& script) {
  std::string dir(util::parent_path(script));
  while (true) {
    const std::string candidate = (dir == "/" ? "" : dir) + "/package.json";
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return candidate;
    if (dir == "/" || base_name(dir) == "node_modules") return "";
    dir = std::string(util::parent_path(dir));
    if (base_name(dir) == "node_modules") return "";  // never the tree's own neighbours
  }
}

std::optional<std::string> installation_key(const Program& p) {
  std::string text = "pi-jail compile cache v1;";
  auto node = identity("node", p.interpreter);
  auto script = identity("script", p.exec_path);
  if (!node || !script) return std::nullopt;
  text += *node + *script;
  if (auto pkg = package_json_of(p.exec_path); !pkg.empty()) {
    auto id = identity("package", pkg);
    if (!id) return std::nullopt;
    text += *id;
  }
  return fmt::format("{:016x}{:016x}", fnv1a(text, 0xcbf29ce484222325ULL), fnv1a(text, 0x84222325cbf29ce4ULL));
}

std::string cache_root(const char* xdg_cache_home, const std::string& home) {
  if (xdg_cache_home && *xdg_cache_home == '/') return std::string(xdg_cache_home) + "/pi-jail/compile-cache";
  if (!home.empty() && home.front() == '/' && home != "/") return home + "/.cache/pi-jail/compile-cache";
  return "";
}

std::string writable_in_jail(const Request& r, const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> writable{{r.workspace, "the workspace"}};
  for (const auto& g : r.grants)
    if (g.access == Access::read_write) writable.emplace_back(g.path, g.why);
  for (const auto& v : r.private_views) writable.emplace_back(v.path, v.why);
  for (const auto& d : r.private_dirs) writable.emplace_back(d.path, d.why);
  for (const auto& p : paths)
    for (const auto& [w, why] : writable)
      if (!w.empty() && (util::path_within(p, w) || util::path_within(w, p)))
        return fmt::format("{} is writable inside the jail or holds a writable path ({} {})", p, why, w);
  return "";
}

util::Result<std::string> ensure(const std::string& root, const std::string& key, const WarmUp& warm_up) {
  if (!valid_key(key)) return Error::invalid(fmt::format("bad compile cache key \"{}\"", key));
  // root = <cache home>/pi-jail/compile-cache: the cache home is the
  // user's (it may be a symlink); pi-jail/ and below are pi-jail's own.
  const std::string tool_dir(util::parent_path(root));
  const std::string cache_home(util::parent_path(tool_dir));
  std::string partial;
  for (auto part : util::path_components(cache_home)) {
    partial += "/" + std::string(part);
    ::mkdir(partial.c_str(), 0700);  // EEXIST and the rest: the open below says
  }
  char buf[PATH_MAX];
  if (!::realpath(cache_home.c_str(), buf)) return Error::from_errno(fmt::format("resolve {}", cache_home), errno);
  const std::string home_real(buf);
  auto home_fd = util::open_dir_nofollow(home_real);
  if (!home_fd) return home_fd.take_error();
  // Nobody else may rename pi-jail/ away and put their own in its place
  // between this check and the mount: the cache home is the caller's (or
  // root's), and writable by others only if sticky (/tmp).
  struct stat hst;
  if (::fstat(home_fd->get(), &hst) != 0) return Error::from_errno(fmt::format("stat {}", home_real), errno);
  if ((hst.st_uid != ::geteuid() && hst.st_uid != 0) || ((hst.st_mode & 022) && !(hst.st_mode & S_ISVTX)))
    return Error::invalid(
        fmt::format("{} (uid {}, mode {:04o}) can be changed by others", home_real, hst.st_uid, hst.st_mode & 07777));
  const std::string tool_shown = (home_real == "/" ? "" : home_real) + "/pi-jail";
  auto tool = own_dir_at(home_fd->get(), "pi-jail", tool_shown, true);
  if (!tool) return tool.take_error();
  const std::string root_real = tool_shown + "/compile-cache";
  auto top = own_dir_at(tool->get(), "compile-cache", root_real, true);
  if (!top) return top.take_error();
  const std::string dir = root_real + "/" + key;

  auto existing = own_dir_at(top->get(), key, dir, false);
  if (existing) return dir;
  if (existing.error().err() != ENOENT) return existing.take_error();

  // Made once: the first run takes the lock and warms up; the others wait
  // for it and then find the directory.
  UniqueFd lock(::openat(top->get(), ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!lock.valid()) return Error::from_errno(fmt::format("open {}/.lock", root_real), errno);
  struct stat lst;
  if (::fstat(lock.get(), &lst) != 0 || !S_ISREG(lst.st_mode) || lst.st_uid != ::geteuid())
    return Error::invalid(fmt::format("{}/.lock is not a regular file of yours", root_real));
  if (int err = util::lock_file(lock.get(), util::LockKind::exclusive); err != 0)
    return Error::from_errno(fmt::format("lock {}/.lock", root_real), -err);
  existing = own_dir_at(top->get(), key, dir, false);
  if (existing) return dir;
  if (existing.error().err() != ENOENT) return existing.take_error();
  // A warm-up that failed is not run again for the same installation
  // (a program without --version would cost every start its timeout).
  const std::string failed = key + ".failed";
  struct stat fst;
  if (::fstatat(top->get(), failed.c_str(), &fst, AT_SYMLINK_NOFOLLOW) == 0)
    return Error::invalid(fmt::format("its warm-up failed before (remove {}/{} to try again)", root_real, failed));

  // Under the lock no warm-up is running: anything half made is a killed one's.
  for (const auto& n : names_in(top->get()))
    if (n.starts_with(kWarmPrefix)) remove_tree(top->get(), n.c_str());
  const std::string tmp = fmt::format("{}{}-{:016x}", kWarmPrefix, ::getpid(), util::random_u64());
  auto scratch = own_dir_at(top->get(), tmp, root_real + "/" + tmp, true);
  if (!scratch) return scratch.take_error();
  util::Result<WarmUpOutcome> warmed = warm_up(root_real + "/" + tmp);
  if (!warmed) {
    remove_tree(top->get(), tmp.c_str());
    return warmed.take_error();
  }
  if (warmed->warmed != Warmed::made) {
    remove_tree(top->get(), tmp.c_str());
    if (warmed->warmed == Warmed::program_failed) {
      // An empty file: its name is the mark.
      UniqueFd mark(::openat(top->get(), failed.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    }
    return Error::invalid("the compile cache's warm-up: " + warmed->why);
  }
  if (auto st = util::replace_entry(top->get(), tmp, key); !st) {
    remove_tree(top->get(), tmp.c_str());
    return Error::from_errno(fmt::format("rename the warmed compile cache to {}", dir), st.error().err());
  }
  return dir;
}

}  // namespace pj::runtime::compile_cache
