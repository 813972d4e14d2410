#include "jail_home.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::supervisor {

using util::Error;

std::string jail_home_name(std::string_view workspace) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : workspace) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  std::string_view base = workspace.substr(workspace.rfind('/') + 1);
  if (base.empty()) base = "root";
  std::string name;
  for (char c : base.substr(0, 32)) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    name += ok ? c : '_';
  }
  if (name[0] == '.') name[0] = '_';  // never a hidden or "." / ".." name
  return fmt::format("{}-{:016x}", name, h);
}

std::string data_dir() {
  const char* data = std::getenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  return data && *data == '/'   ? std::string(data) + "/pi-jail"
         : home && *home == '/' ? std::string(home) + "/.local/share/pi-jail"
                                : "";
}

namespace {

// `fd` is a directory of the caller's that no one else can write.
std::string ownership_problem(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return fmt::format("stat: {}", std::strerror(errno));
  if (st.st_uid != ::getuid()) return fmt::format("it belongs to uid {}, not to you (uid {})", st.st_uid, ::getuid());
  if (st.st_mode & 022) return fmt::format("others can write to it (mode {:04o})", st.st_mode & 07777);
  return "";
}

}  // namespace

util::Result<std::string> prepare_jail_home(const std::string& data_dir_given, const std::string& workspace) {
  auto norm = util::normalize_path(data_dir_given);
  if (!norm) return std::move(norm.take_error()).context("pi-jail's data directory");
  const std::string& data_dir = *norm;
  const std::string homes = data_dir + "/homes";
  const std::string name = jail_home_name(workspace);
  const std::string path = homes + "/" + name;
  const std::string fix = fmt::format("fix: remove {} (tool caches only), or run with --ephemeral-home", path);
  auto dir = util::make_private_dir(homes);
  if (!dir)
    return std::move(dir.take_error())
        .context(fmt::format("the jail home's directory (fix: make {} yours, set XDG_DATA_HOME, or pass "
                             "--ephemeral-home)",
                             data_dir));
  if (auto why = ownership_problem(dir->get()); !why.empty())
    return Error::invalid(fmt::format("the jail homes' directory {}: {}; make it yours (chmod 700)", homes, why));

  // The record of whose home this is: written whole to a temporary name,
  // then linked into place (linkat fails if a concurrent first run got
  // there first: then its record is read), never followed.
  const std::string record = name + ".workspace";
  const std::string text = workspace + "\n";
  auto recorded = util::read_untrusted_file(dir->get(), record, 8192, homes + "/" + record);
  if (recorded && !*recorded) {
    const std::string tmp = fmt::format("{}.{}", record, ::getpid());
    int fd = ::openat(dir->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Error::from_errno(fmt::format("record the jail home {}/{}", homes, tmp), errno);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int err = errno;
    ::close(fd);
    const bool linked = written && ::linkat(dir->get(), tmp.c_str(), dir->get(), record.c_str(), 0) == 0;
    const int link_err = errno;
    ::unlinkat(dir->get(), tmp.c_str(), 0);
    if (!written) return Error::from_errno(fmt::format("record the jail home {}/{}", homes, record), err);
    if (!linked && link_err != EEXIST)
      return Error::from_errno(fmt::format("record the jail home {}/{}", homes, record), link_err);
    recorded = util::read_untrusted_file(dir->get(), record, 8192, homes + "/" + record);
  }
  if (!recorded) return std::move(recorded.take_error()).context(fmt::format("the jail home {}; {}", path, fix));
  if (!*recorded || **recorded != text) {
    return Error::invalid(
        fmt::format("the jail home {} belongs to another workspace (see {}/{}); {}", path, homes, record, fix));
  }

  if (::mkdirat(dir->get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno(fmt::format("make the jail home {}", path), errno);
  auto home = util::open_dir_beneath(dir->get(), name);
  if (!home) return std::move(home.take_error()).context(fmt::format("open the jail home {}; {}", path, fix));
  if (auto why = ownership_problem(home->get()); !why.empty())
    return Error::invalid(fmt::format("the jail home {}: {}; {}", path, why, fix));
  // An empty ~/.gitconfig, so that `git config --global` writes here and
  // not to the read-only ~/.config/git/config (git/identity.h).
  int gc = ::openat(home->get(), ".gitconfig", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (gc >= 0) ::close(gc);
  return path;
}

std::vector<std::string> clear_mount_paths(const std::string& jail_home, const std::string& home,
                                           const std::vector<std::pair<std::string, MountNode>>& dests) {
  std::vector<std::string> notes;
  for (const auto& [dest, node] : dests) {
    if (dest == home || !util::path_within(dest, home)) continue;
    auto root = util::open_dir_nofollow(jail_home);
    if (!root) continue;  // the mount names the problem
    util::UniqueFd cur = std::move(*root);
    const std::string rel = dest.substr(home == "/" ? 0 : home.size());
    const auto parts = util::path_components(rel);
    std::string shown = jail_home;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string name(parts[i]);
      shown += "/" + name;
      const bool last = i + 1 == parts.size();
      const bool want_dir = !last || node == MountNode::directory;
      struct stat st;
      if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) break;  // made at mount time
      if (last && node == MountNode::symlink && !S_ISDIR(st.st_mode)) {
        if (::unlinkat(cur.get(), name.c_str(), 0) != 0) break;  // the setup says why
        if (!S_ISLNK(st.st_mode))
          notes.push_back(fmt::format("removed {} from the jail home: a symlink is made there", shown));
        break;  // an earlier run's own link goes without a word
      }
      if (S_ISDIR(st.st_mode)) {
        if (!want_dir || i + 1 == parts.size()) break;  // the mount takes it, or says why not
        int next = ::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) break;
        cur = util::UniqueFd(next);
        continue;
      }
      if (!S_ISLNK(st.st_mode) && !want_dir) break;  // a file where a file is mounted
      if (::unlinkat(cur.get(), name.c_str(), 0) == 0)
        notes.push_back(fmt::format("removed {} from the jail home: {} where {} is mounted", shown,
                                    S_ISLNK(st.st_mode) ? "a symlink" : "not a directory", dest));
      break;
    }
  }
  return notes;
}

}  // namespace pj::supervisor
