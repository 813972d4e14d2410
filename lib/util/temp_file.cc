#include "temp_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2 (Linux), renameatx_np (macOS)
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "random.h"

namespace pj::util {

Result<TempFile> TempFile::create(int dirfd, std::string_view base) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = fmt::format("{}.{:016x}.tmp", base, random_u64());
    int fd = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) return TempFile(dirfd, std::move(name), UniqueFd(fd));
    if (errno != EEXIST) return Error::from_errno(fmt::format("create {}", name), errno);
  }
  return Error::from_errno(fmt::format("create a temporary file for {}", base), EEXIST);
}

namespace {

// BASE.<16 lowercase hex digits>.tmp, as create() names its files.
bool made_for(std::string_view name, std::string_view base) {
  constexpr std::string_view suffix = ".tmp";
  if (!name.starts_with(base) || !name.ends_with(suffix)) return false;
  name.remove_prefix(base.size());
  name.remove_suffix(suffix.size());
  if (name.size() != 17 || name[0] != '.') return false;
  for (char c : name.substr(1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

void TempFile::remove_abandoned(int dirfd, std::string_view base) {
  UniqueFd listing(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = listing.valid() ? ::fdopendir(listing.get()) : nullptr;
  if (!d) return;
  listing.release();
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d))
    if (made_for(e->d_name, base)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      ::unlinkat(dirfd, name.c_str(), 0);
  }
}

TempFile::TempFile(int dirfd, std::string name, UniqueFd fd)
    : dirfd_(dirfd), name_(std::move(name)), fd_(std::move(fd)) {}

TempFile::TempFile(TempFile&& o) noexcept
    : dirfd_(std::exchange(o.dirfd_, -1)), name_(std::move(o.name_)), fd_(std::move(o.fd_)) {}

TempFile::~TempFile() {
  if (dirfd_ >= 0) ::unlinkat(dirfd_, name_.c_str(), 0);
}

Status write_all(int fd, std::string_view data, std::string_view shown) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(fmt::format("write {}", shown), errno);
    if (n == 0) return Error::from_errno(fmt::format("write {}: nothing written", shown), EIO);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Status TempFile::fill(std::string_view content, Durability durability, mode_t mode) {
  if (::fchmod(fd_.get(), mode) != 0) return Error::from_errno(fmt::format("chmod {:o} {}", mode, name_), errno);
  if (auto st = write_all(fd_.get(), content, name_); !st) return st;
  if (durability == Durability::disk && ::fsync(fd_.get()) != 0)
    return Error::from_errno(fmt::format("fsync {}", name_), errno);
  if (::close(fd_.release()) != 0) return Error::from_errno(fmt::format("close {}", name_), errno);
  return {};
}

Status TempFile::rename_over(std::string_view target) {
  if (auto st = replace_entry(dirfd_, name_, target); !st) return st;
  dirfd_ = -1;
  return {};
}

Result<bool> TempFile::publish(std::string_view target) {
  std::string t(target);
#if defined(__APPLE__)
  const int placed = ::renameatx_np(dirfd_, name_.c_str(), dirfd_, t.c_str(), RENAME_EXCL);
#else
  const int placed = ::renameat2(dirfd_, name_.c_str(), dirfd_, t.c_str(), RENAME_NOREPLACE);
#endif
  if (placed == 0) {
    dirfd_ = -1;
    return true;
  }
  if (errno == EEXIST) return false;
  return Error::from_errno(fmt::format("rename {} to {}", name_, t), errno);
}

Status replace_entry(int dirfd, std::string_view from, std::string_view to) {
  std::string f(from), t(to);
  if (::renameat(dirfd, f.c_str(), dirfd, t.c_str()) != 0)
    return Error::from_errno(fmt::format("rename {} to {}", f, t), errno);
  return {};
}

}  // namespace pj::util
