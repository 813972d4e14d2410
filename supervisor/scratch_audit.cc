#include "scratch_audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "util/dir_names.h"
#include "util/escape.h"
#include "util/unique_fd.h"

namespace pj::supervisor::scratch {

namespace {

struct Walk {
  dev_t dev;
  std::uint64_t seen = 0;
  bool capped = false;
};

// Count what is below the directory `fd` into `files`/`bytes`.
void count_below(const util::UniqueFd& fd, int depth, Walk& w, std::uint64_t& files, std::uint64_t& bytes) {
  if (depth > kMaxDepth) {
    w.capped = true;
    return;
  }
  util::for_each_name(fd.get(), [&](std::string_view name) {
    if (++w.seen > kMaxEntries) {
      w.capped = true;
      return false;
    }
    const std::string n(name);
    struct stat st;
    if (::fstatat(fd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return true;
    if (st.st_dev != w.dev) return true;  // another mount: not scratch
    if (S_ISDIR(st.st_mode)) {
      util::UniqueFd sub(::openat(fd.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) count_below(sub, depth + 1, w, files, bytes);
      return !w.capped;
    }
    ++files;
    bytes += static_cast<std::uint64_t>(st.st_size);
    return true;
  });
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
  for (const auto& dir : dirs) {
    const std::string& shown = dir.first;  // named, not bound: the lambda below uses them
    const int fd = dir.second;
    struct stat root;
    if (fd < 0 || ::fstat(fd, &root) != 0) continue;
    Walk w{root.st_dev, seen};
    // Each top-level entry on its own, to name where things are.
    util::for_each_name(fd, [&](std::string_view name) {
      if (++w.seen > kMaxEntries) {
        w.capped = true;
        return false;
      }
      const std::string n(name);
      struct stat st;
      if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != w.dev) return true;
      Discarded::Top t{shown + "/" + n};
      if (S_ISDIR(st.st_mode)) {
        util::UniqueFd sub(::openat(fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.valid()) count_below(sub, 1, w, t.files, t.bytes);
      } else {
        t.files = 1;
        t.bytes = static_cast<std::uint64_t>(st.st_size);
      }
      d.files += t.files;
      d.bytes += t.bytes;
      if (t.files) d.top.push_back(std::move(t));
      return !w.capped;
    });
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
