#include "spare_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

#include "util/dir_names.h"
#include "util/log.h"
#include "util/random.h"
#include "util/untrusted.h"

namespace pj::supervisor {

using util::UniqueFd;

namespace {

constexpr std::string_view kMark = "user.pi-jail";  // a placeholder's mark (placeholders.cc)

UniqueFd open_dir_at(int dir, const char* name) {
  return UniqueFd(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Is the directory open at `fd` one to keep or to use as a spare: pi-jail's
// user's, holding nothing, and carrying no extended attribute but a
// placeholder's mark? An ACL or a security label says something about the
// place it was made for, which a spare must not carry elsewhere.
bool plain_and_empty(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return false;
  char names[256];
  const ssize_t n = ::flistxattr(fd, names, sizeof names);
  if (n < 0 && errno != ENOTSUP) return false;
  for (ssize_t i = 0; i < n;) {
    const std::string_view name(names + i);
    if (name != kMark) return false;
    i += static_cast<ssize_t>(name.size()) + 1;
  }
  return util::directory_is_empty(fd);
}

}  // namespace

SpareDirs::SpareDirs(int state_fd, std::string state) : path_(std::move(state) + "/" + kDirName) {
  if (::mkdirat(state_fd, kDirName, 0700) != 0 && errno != EEXIST) return;
  UniqueFd fd = open_dir_at(state_fd, kDirName);
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) return;
  dir_ = std::move(fd);
  dev_ = st.st_dev;
  umask_ = ::umask(022);
  ::umask(umask_);
}

bool SpareDirs::on_our_filesystem(int parent) const {
  struct stat st;
  return dir_.valid() && ::fstat(parent, &st) == 0 && st.st_dev == dev_;
}

std::vector<std::string>& SpareDirs::spares() {
  if (!listed_) {
    listed_ = true;
    util::for_each_name(dir_.get(), [this](std::string_view n) {
      names_.emplace_back(n);
      return true;
    });
  }
  return names_;
}

int SpareDirs::make(int parent, const char* name, mode_t mode) {
  if (on_our_filesystem(parent)) {
    auto& names = spares();
    while (!names.empty()) {
      const std::string spare = std::move(names.back());
      names.pop_back();
      UniqueFd fd = open_dir_at(dir_.get(), spare.c_str());
      if (!fd.valid() || !plain_and_empty(fd.get())) continue;  // not as kept: left alone
      if (::renameat2(dir_.get(), spare.c_str(), parent, name, RENAME_NOREPLACE) == 0) {
        if (::fchmod(fd.get(), mode & ~umask_ & 07777) == 0) return 0;
        const int err = errno;
        ::unlinkat(parent, name, AT_REMOVEDIR);
        return err;
      }
      if (errno == EEXIST) return EEXIST;
      if (errno != ENOENT) break;  // EXDEV, EINVAL (no RENAME_NOREPLACE): made below
      // ENOENT: another pi-jail took it since the listing.
    }
  }
  return ::mkdirat(parent, name, mode) == 0 ? 0 : errno;
}

int SpareDirs::remove(int parent, const char* name, std::string_view shown) {
  if (on_our_filesystem(parent) && spares().size() < kMaxSpares) {
    const std::string spare = fmt::format("{:016x}", util::random_u64());
    if (::renameat2(parent, name, dir_.get(), spare.c_str(), RENAME_NOREPLACE) == 0) {
      // What was moved is looked at where it is now: the caller's checks
      // were of what `name` was a moment before.
      UniqueFd fd = open_dir_at(dir_.get(), spare.c_str());
      if (fd.valid() && plain_and_empty(fd.get())) {
        names_.push_back(spare);
        return 0;
      }
      const bool empty = fd.valid() && util::directory_is_empty(fd.get());
      if (::renameat2(dir_.get(), spare.c_str(), parent, name, RENAME_NOREPLACE) != 0) {
        util::warn("{} was written to while pi-jail removed it, and its name was taken meanwhile: it is now {}/{}; "
                   "move it back",
                   shown, path_, spare);
        return ENOTEMPTY;
      }
      if (!empty) return ENOTEMPTY;
      // Empty but not to be kept (an ACL, a label): removed below.
    }
  }
  return ::unlinkat(parent, name, AT_REMOVEDIR) == 0 ? 0 : errno;
}

}  // namespace pj::supervisor
