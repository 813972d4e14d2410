#include "scratch_audit.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "util/escape.h"
#include "util/unique_fd.h"

namespace pj::supervisor::scratch {

namespace {

struct Walk {
  dev_t dev;
  std::uint64_t seen = 0;
  bool capped = false;
};

// Count what is below the directory `fd` (which this takes) into
// `files`/`bytes`.
void count_below(util::UniqueFd fd, int depth, Walk& w, std::uint64_t& files, std::uint64_t& bytes) {
  if (depth > kMaxDepth) {
    w.capped = true;
    return;
  }
  DIR* dir = ::fdopendir(fd.get());
  if (!dir) return;
  (void)fd.release();  // the DIR owns it now
  while (dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (++w.seen > kMaxEntries) {
      w.capped = true;
      break;
    }
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_dev != w.dev) continue;  // another mount: not scratch
    if (S_ISDIR(st.st_mode)) {
      util::UniqueFd sub(::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) count_below(std::move(sub), depth + 1, w, files, bytes);
      if (w.capped) break;
      continue;
    }
    ++files;
    bytes += static_cast<std::uint64_t>(st.st_size);
  }
  ::closedir(dir);
}

std::string size_text(std::uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace

Discarded survey(const std::vector<std::pair<std::string, int>>& dirs) {
  Discarded d;
  std::uint64_t seen = 0;
  for (const auto& [shown, fd] : dirs) {
    struct stat root;
    if (fd < 0 || ::fstat(fd, &root) != 0) continue;
    Walk w{root.st_dev, seen};
    // Each top-level entry on its own, to name where things are.
    util::UniqueFd again(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* dir = again.valid() ? ::fdopendir(again.get()) : nullptr;
    if (!dir) continue;
    (void)again.release();
    while (dirent* e = ::readdir(dir)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++w.seen > kMaxEntries) {
        w.capped = true;
        break;
      }
      struct stat st;
      if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != w.dev) continue;
      Discarded::Top t{shown + "/" + std::string(name)};
      if (S_ISDIR(st.st_mode)) {
        util::UniqueFd sub(::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.valid()) count_below(std::move(sub), 1, w, t.files, t.bytes);
      } else {
        t.files = 1;
        t.bytes = static_cast<std::uint64_t>(st.st_size);
      }
      d.files += t.files;
      d.bytes += t.bytes;
      if (t.files) d.top.push_back(std::move(t));
      if (w.capped) break;
    }
    ::closedir(dir);
    seen = w.seen;
    d.capped = d.capped || w.capped;
  }
  std::stable_sort(d.top.begin(), d.top.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return d;
}

std::string discarded_line(const Discarded& d, size_t shown) {
  if (d.files == 0) return "";
  std::string where;
  for (size_t i = 0; i < d.top.size() && i < shown; ++i) {
    std::string path = d.top[i].path.size() > 100 ? d.top[i].path.substr(0, 100) + "..." : d.top[i].path;
    where += fmt::format("{}{} ({}{})", i ? ", " : "", util::printable(path), size_text(d.top[i].bytes),
                         d.top[i].files > 1 ? fmt::format(", {} files", d.top[i].files) : "");
  }
  if (d.top.size() > shown) where += fmt::format(" and {} more", d.top.size() - shown);
  return fmt::format("the jail wrote {}{} file{} ({}) outside the workspace, in places discarded now: {}",
                     d.capped ? "at least " : "", d.files, d.files == 1 ? "" : "s", size_text(d.bytes), where);
}

}  // namespace pj::supervisor::scratch
