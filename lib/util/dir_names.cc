#include "dir_names.h"

#include <dirent.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <memory>

namespace pj::util {

namespace {

bool skipped(std::string_view name) { return name == "." || name == ".."; }

}  // namespace

bool for_each_name(int dirfd, const std::function<bool(std::string_view name)>& each) {
  return for_each_entry(dirfd, [&](std::string_view name, unsigned char) { return each(name); });
}

#ifdef __linux__
// getdents64(2) into a buffer of each call's own (on the heap: callers
// recurse into subdirectories while iterating).
bool for_each_entry(int dirfd, const std::function<bool(std::string_view name, unsigned char type)>& each) {
  if (::lseek(dirfd, 0, SEEK_SET) < 0) return false;
  constexpr size_t kBuffer = 32 * 1024;
  auto buf = std::make_unique<char[]>(kBuffer);
  while (true) {
    ssize_t n = ::getdents64(dirfd, buf.get(), kBuffer);
    if (n < 0) return false;
    if (n == 0) return true;
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf.get() + at);
      at += e->d_reclen;
      std::string_view name(e->d_name, ::strnlen(e->d_name, e->d_reclen - offsetof(dirent64, d_name)));
      if (!skipped(name) && !each(name, e->d_type)) return true;
    }
  }
}
#else
bool for_each_entry(int dirfd, const std::function<bool(std::string_view name, unsigned char type)>& each) {
  int fd = ::dup(dirfd);
  DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (!d) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (!skipped(name) && !each(name, e->d_type)) break;
  }
  ::closedir(d);
  return true;
}
#endif

}  // namespace pj::util
