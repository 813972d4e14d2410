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
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::pi::agent {

using util::Error;
using util::Result;
using util::Status;
using util::TempFile;

namespace {

std::chrono::system_clock::time_point mtime_of(const struct stat& st) {
#ifdef __APPLE__
  const struct timespec& ts = st.st_mtimespec;
#else
  const struct timespec& ts = st.st_mtim;
#endif
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
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
                                   const std::function<NewContent(Content host_now)>& update,
                                   const LockTiming& timing) {
  return update_at(agent_dir_fd, name, LinkTarget{agent_dir_fd, name}, update, timing);
}

Result<WriteOutcome> write_back(int agent_dir_fd, const AgentFile& file, Content given, Content jail_left, Notes& notes,
                                const LockTiming& timing, const HostDir& dir) {
  return write_back_through(agent_dir_fd, file, LinkTarget{agent_dir_fd, file.name}, given, jail_left, notes, timing,
                            dir);
}

Result<WriteOutcome> write_back_through(int agent_dir_fd, const AgentFile& file, const LinkTarget& target,
                                        Content given, Content jail_left, Notes& notes, const LockTiming& timing,
                                        const HostDir& dir) {
  return update_at(
      agent_dir_fd, file.name, target,
      [&](Content host_now) { return file.merge(host_now, given, jail_left, notes, dir); }, timing);
}

}  // namespace pj::pi::agent
