// The impure half of agent-dir write-back (pi/agent_state.h): Pi's lock, the
// host file read as hostile input, and an atomic replace.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <fmt/format.h>

#include "pi/agent_state.h"
#include "util/random.h"
#include "util/untrusted.h"

namespace pj::supervisor::agent {

using util::Error;
using util::Result;
using util::Status;

namespace {

std::chrono::system_clock::time_point mtime_of(const struct stat& st) {
#ifdef __APPLE__
  const struct timespec& ts = st.st_mtimespec;
#else
  const struct timespec& ts = st.st_mtim;
#endif
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                      std::chrono::nanoseconds(ts.tv_nsec)));
}

// Pi's lock on one file of the agent dir, as proper-lockfile 4.1.2 makes
// it (lib/lockfile.js): the directory "<file>.lock", created with mkdir,
// which fails with EEXIST while another process holds it. A holder keeps
// the directory's mtime fresh; one whose mtime is older than the stale
// time is abandoned and may be removed and taken. The owner removes the
// directory on destruction.
//
// Between judging a lock stale and removing it, its holder could have
// released it and another taken it afresh; proper-lockfile, and so Pi,
// have the same window. It needs a holder silent for the whole stale time.
class PiLock {
public:
  static Result<PiLock> acquire(int dirfd, std::string lock_name, const LockTiming& timing) {
    using namespace std::chrono;
    const auto deadline = steady_clock::now() + timing.wait;
    auto delay = timing.first_retry;
    for (;;) {
      if (::mkdirat(dirfd, lock_name.c_str(), 0700) == 0) return PiLock(dirfd, std::move(lock_name));
      if (errno != EEXIST) return Error::from_errno(fmt::format("create the lock directory {}", lock_name), errno);
      struct stat st;
      if (::fstatat(dirfd, lock_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // released in between: try again at once
        return Error::from_errno(fmt::format("stat the lock {}", lock_name), errno);
      }
      if (!S_ISDIR(st.st_mode))
        return Error::from_errno(fmt::format("the lock {} is not a directory; left alone", lock_name), EEXIST);
      if (mtime_of(st) < system_clock::now() - timing.stale) {
        if (::unlinkat(dirfd, lock_name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
          return Error::from_errno(fmt::format("remove the stale lock {}", lock_name), errno);
        continue;
      }
      auto now = steady_clock::now();
      if (now >= deadline)
        return Error::from_errno(fmt::format("the lock {} is held by another process (a running Pi?) and was not "
                                             "released within {} ms",
                                             lock_name, timing.wait.count()),
                                 EBUSY);
      std::this_thread::sleep_for(std::min<steady_clock::duration>(delay, deadline - now));
      delay = std::min(delay * 2, timing.max_retry);
    }
  }

  PiLock(PiLock&& other) noexcept : dirfd_(std::exchange(other.dirfd_, -1)), name_(std::move(other.name_)) {}
  PiLock& operator=(PiLock&&) = delete;
  PiLock(const PiLock&) = delete;
  ~PiLock() { (void)release(); }

  Status release() {
    if (dirfd_ < 0) return {};
    int fd = std::exchange(dirfd_, -1);
    if (::unlinkat(fd, name_.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      return Error::from_errno(fmt::format("remove the lock directory {}", name_), errno);
    return {};
  }

private:
  PiLock(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {}
  int dirfd_;
  std::string name_;
};

// A temporary file beneath a directory, removed on destruction unless
// renamed into place.
class TempFile {
public:
  static Result<TempFile> create(int dirfd, std::string_view base) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::string name = fmt::format("{}.{:016x}.tmp", base, util::random_u64());
      int fd = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) return TempFile(dirfd, std::move(name), util::UniqueFd(fd));
      if (errno != EEXIST) return Error::from_errno(fmt::format("create {}", name), errno);
    }
    return Error::from_errno(fmt::format("create a temporary file for {}", base), EEXIST);
  }

  TempFile(TempFile&& o) noexcept
      : dirfd_(std::exchange(o.dirfd_, -1)), name_(std::move(o.name_)), fd_(std::move(o.fd_)) {}
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile() {
    if (dirfd_ >= 0) ::unlinkat(dirfd_, name_.c_str(), 0);
  }

  const std::string& name() const { return name_; }

  // Write `content`, make it 0600 whatever the umask, flush it to disk.
  Status fill(std::string_view content) {
    if (::fchmod(fd_.get(), 0600) != 0) return Error::from_errno(fmt::format("chmod 0600 {}", name_), errno);
    while (!content.empty()) {
      ssize_t n = ::write(fd_.get(), content.data(), content.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error::from_errno(fmt::format("write {}", name_), errno);
      content.remove_prefix(static_cast<size_t>(n));
    }
    if (::fsync(fd_.get()) != 0) return Error::from_errno(fmt::format("fsync {}", name_), errno);
    if (::close(fd_.release()) != 0) return Error::from_errno(fmt::format("close {}", name_), errno);
    return {};
  }

  // rename(2) over `target`: atomic, so a reader sees the old or the new
  // file, never a part. The temporary file is then no longer ours.
  Status rename_over(std::string_view target) {
    std::string t(target);
    if (::renameat(dirfd_, name_.c_str(), dirfd_, t.c_str()) != 0)
      return Error::from_errno(fmt::format("rename {} to {}", name_, t), errno);
    dirfd_ = -1;
    return {};
  }

private:
  TempFile(int dirfd, std::string name, util::UniqueFd fd) : dirfd_(dirfd), name_(std::move(name)), fd_(std::move(fd)) {}
  int dirfd_;
  std::string name_;
  util::UniqueFd fd_;
};

Status replace(int dirfd, std::string_view name, std::string_view content) {
  auto tmp = TempFile::create(dirfd, name);
  if (!tmp) return tmp.take_error();
  if (auto st = tmp->fill(content); !st) return st;
  if (auto st = tmp->rename_over(name); !st) return st;
  // The rename itself reaches the disk with the directory.
  if (::fsync(dirfd) != 0 && errno != EINVAL)
    return Error::from_errno(fmt::format("{} was replaced, but fsync of its directory failed", name), errno);
  return {};
}

// Under Pi's lock on `name` in `lock_dir`: read the file `target.name` of
// `target.dir_fd`, update, replace it there.
Result<WriteOutcome> update_at(int lock_dir, std::string_view name_view, const LinkTarget& target,
                               const std::function<NewContent(Content host_now)>& update, const LockTiming& timing) {
  std::string name(name_view);
  std::string content_name(target.name);
  std::string what = fmt::format("write back {}", name);
  auto lock = PiLock::acquire(lock_dir, name + ".lock", timing);
  if (!lock) return lock.take_error().context(what);

  auto host = util::read_untrusted_file(target.dir_fd, content_name, kMaxFileBytes, content_name);
  if (!host) return host.take_error().context(fmt::format("{}: read the host's file", what));
  Content host_now = host->has_value() ? Content(**host) : std::nullopt;

  NewContent next = update(host_now);
  WriteOutcome outcome = WriteOutcome::nothing_to_write;
  if (next) {
    if (auto st = replace(target.dir_fd, content_name, *next); !st) return st.take_error().context(what);
    outcome = WriteOutcome::written;
  }
  if (auto st = lock->release(); !st)
    return st.take_error().context(
        fmt::format("{}: {}", what, outcome == WriteOutcome::written ? "written, but" : "nothing written, and"));
  return outcome;
}

}  // namespace

Result<WriteOutcome> update_locked(int agent_dir_fd, std::string_view name,
                                   const std::function<NewContent(Content host_now)>& update, const LockTiming& timing) {
  return update_at(agent_dir_fd, name, LinkTarget{agent_dir_fd, name}, update, timing);
}

Result<WriteOutcome> write_back(int agent_dir_fd, const AgentFile& file, Content given, Content jail_left,
                                Notes& notes, const LockTiming& timing, const HostDir& dir) {
  return write_back_through(agent_dir_fd, file, LinkTarget{agent_dir_fd, file.name}, given, jail_left, notes,
                            timing, dir);
}

Result<WriteOutcome> write_back_through(int agent_dir_fd, const AgentFile& file, const LinkTarget& target,
                                        Content given, Content jail_left, Notes& notes, const LockTiming& timing,
                                        const HostDir& dir) {
  return update_at(
      agent_dir_fd, file.name, target,
      [&](Content host_now) { return file.merge(host_now, given, jail_left, notes, dir); }, timing);
}

}  // namespace pj::supervisor::agent
