#include "private_dirs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>  // renameat2
#include <cstring>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "pi/agent_state.h"
#include "pi/user_links.h"
#include "util/dir_names.h"
#include "util/file_lock.h"
#include "util/log.h"
#include "util/numbers.h"
#include "util/paths.h"
#include "util/random.h"
#include "util/untrusted.h"

namespace pj::pi {

using util::Error;
using util::UniqueFd;

namespace {

constexpr size_t kCopyCap = agent::kMaxFileBytes;  // larger files are shown read-only
constexpr int kMaxDepth = 128;                     // removal walks no deeper (the jail can nest)
constexpr size_t kMoveCap = size_t{1} << 30;       // a file copied to the host (carry_new_dirs)

// The names in the directory open at `dir` (not "." or ".."); empty when
// it cannot be read.
std::vector<std::string> names_in(int dir) {
  std::vector<std::string> names;
  util::for_each_name(dir, [&](std::string_view n) {
    names.emplace_back(n);
    return true;
  });
  return names;
}

// Remove `name` in `dir` and everything below it, never following a
// symlink; directories the jail made unwritable are made writable first
// (they are the caller's own). Gives up below kMaxDepth.
void remove_tree(int dir, const char* name, int depth = 0) {
  if (::unlinkat(dir, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  if (depth < kMaxDepth) {
    // A directory the jail made unreadable (chmod 0) is the caller's own:
    // made readable first, without following a link (an unlinkable one is
    // gone by now).
    if (::fchmodat(dir, name, 0700, AT_SYMLINK_NOFOLLOW) != 0) {
      // Then the open below fails too, and the tree stays: nothing to add.
    }
    UniqueFd fd(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.valid())
      for (const auto& n : names_in(fd.get())) remove_tree(fd.get(), n.c_str(), depth + 1);
  }
  ::unlinkat(dir, name, AT_REMOVEDIR);
}

std::string random_id() { return fmt::format("{}-{:016x}", ::getpid(), util::random_u64()); }

// Each run's staging is `<runs>/<id>`, owned through the lock file
// `<runs>/<id>.lock`: made and locked before the directory, removed after
// it (finish()), so a directory without its lock file belongs to no one,
// and a SIGKILL at any point leaves nothing a later sweep misses.
constexpr std::string_view kLockSuffix = ".lock";

// Whether the lock of a run whose pi-jail (the pid its id starts with) is
// gone can be taken: its jail's init, a clone of that pi-jail, holds the
// lock too until the kernel has ended it (PR_SET_PDEATHSIG: soon after).
// Waits for that a little while, never for a pi-jail that is alive.
bool lock_of_dead_run(int lock, const std::string& name) {
  if (util::try_lock_file(lock)) return true;
  auto pid = util::parse_number<pid_t>(std::string_view(name).substr(0, name.find_first_not_of("0123456789")));
  if (!pid || *pid <= 0 || ::kill(*pid, 0) == 0 || errno != ESRCH) return false;
  for (int i = 0; i < 40; ++i) {  // 200 ms at most
    ::usleep(5000);
    if (util::try_lock_file(lock)) return true;
  }
  return false;
}

// Remove the staging of runs whose pi-jail is gone (its lock is free).
void sweep_dead_runs(int runs) {
  for (const auto& n : names_in(runs)) {
    if (n.ends_with(kLockSuffix)) {
      UniqueFd lock(::openat(runs, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!lock.valid() || !lock_of_dead_run(lock.get(), n)) continue;  // alive (or gone)
      std::string dir = n.substr(0, n.size() - kLockSuffix.size());
      remove_tree(runs, dir.c_str());
      ::unlinkat(runs, n.c_str(), 0);  // while holding it: a starter that flocks it after sees it unlinked
      continue;
    }
    // The lock file is checked now, not in the listing: one made during
    // the listing may be missing from it.
    struct stat st;
    if (::fstatat(runs, (n + std::string(kLockSuffix)).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    remove_tree(runs, n.c_str());
  }
}

// Make and lock `<runs>/<id>.lock`, then `<runs>/<id>`; a sweep that took
// the lock between its creation and our flock has unlinked it: try again.
util::Result<UniqueFd> claim_run(int runs, std::string& id) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    id = random_id();
    std::string lock_name = id + std::string(kLockSuffix);
    UniqueFd lock(::openat(runs, lock_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock.valid()) return Error::from_errno("make the run's lock file", errno);
    if (int err = util::lock_file(lock.get(), util::LockKind::exclusive); err != 0)
      return Error::from_errno("lock the run's lock file", -err);
    struct stat st;
    if (::fstat(lock.get(), &st) != 0) return Error::from_errno("check the run's lock file", errno);
    if (st.st_nlink == 0) continue;
    if (::mkdirat(runs, id.c_str(), 0700) != 0) return Error::from_errno("make the run's staging directory", errno);
    return lock;
  }
  return Error::invalid("make the run's staging directory: another pi-jail kept removing it");
}

// Copy the regular file `from` of `host` into `staging` as `name` (same
// mode bits).
util::Status copy_in(int host, const std::string& from, int staging, const std::string& name, mode_t mode,
                     std::string& content) {
  auto text = util::read_untrusted_file(host, from, kCopyCap, name);
  if (!text) return text.take_error();
  if (!*text) return {};  // gone meanwhile
  content = std::move(**text);
  UniqueFd out(::openat(staging, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0700));
  if (!out.valid() || ::write(out.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    return Error::from_errno(fmt::format("copy {} into the run's copy", name), errno ? errno : EIO);
  return {};
}

// The jail's copy of the secret file: made by its transform from the
// host's, which must be a regular file the copy can hold (a larger one
// would be shown as it is, a symlink followed inside: the host's secrets).
util::Status copy_secret(int host, const std::string& from, int staging, const SecretFile& secret,
                         const struct stat& st, auto& copy) {
  if (!S_ISREG(st.st_mode))
    return Error::invalid(
        fmt::format("{} is not a regular file (a symlink?): the jail would reach the host's secrets "
                    "through it; replace it by the file itself",
                    secret.name));
  if (static_cast<size_t>(st.st_size) > kCopyCap)
    return Error::invalid(fmt::format("{} is larger than {} bytes: its secrets cannot be replaced by placeholders",
                                      secret.name, kCopyCap));
  auto text = util::read_untrusted_file(host, from, kCopyCap, secret.name);
  if (!text) return text.take_error();
  if (!*text) return {};  // gone meanwhile
  auto jail = (*text)->find_first_not_of(" \t\r\n") == std::string::npos ? util::Result<std::string>(**text)
                                                                         : secret.to_jail(**text);
  if (!jail) return std::move(jail.take_error()).context(fmt::format("make the jail's {}", secret.name));
  UniqueFd out(::openat(staging, secret.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid() || ::write(out.get(), jail->data(), jail->size()) != static_cast<ssize_t>(jail->size()))
    return Error::from_errno(fmt::format("write the jail's {}", secret.name), errno ? errno : EIO);
  for (auto& [given_name, given] : copy.given)
    if (given_name == secret.name) given = std::move(**text);
  copy.secret_given = std::move(*jail);
  return {};
}

// Copy the regular files directly in `from` into the new directory `name`
// of `to` (what rename(2) does within one filesystem). Files over kMoveCap
// are left out, and counted.
util::Status copy_flat(int from, int to, const std::string& name, size_t& left_out) {
  if (::mkdirat(to, name.c_str(), 0700) != 0) return Error::from_errno("make it", errno);
  auto dst = util::open_dir_beneath(to, name);
  if (!dst) return dst.take_error();
  util::Status status;
  util::for_each_name(from, [&](std::string_view n) {
    const std::string file(n);
    UniqueFd in(::openat(from, file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st;
    if (!in.valid() || ::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return true;
    if (static_cast<size_t>(st.st_size) > kMoveCap) {
      ++left_out;
      return true;
    }
    UniqueFd out(::openat(dst->get(), file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid()) {
      status = Error::from_errno(fmt::format("write {}", util::printable(file)), errno);
      return false;
    }
    char buf[64 * 1024];
    for (size_t total = 0; total <= kMoveCap;) {
      const ssize_t r = ::read(in.get(), buf, sizeof buf);
      if (r == 0) break;
      if (r < 0 || ::write(out.get(), buf, static_cast<size_t>(r)) != r) {
        status = Error::from_errno(fmt::format("copy {}", util::printable(file)), errno ? errno : EIO);
        return false;
      }
      total += static_cast<size_t>(r);
    }
    return true;
  });
  return status;
}

// Move the directory `name` of `from` (open at `made`) into the host
// directory `parent`, never replacing one there; then scrub it. "" when
// done (its note added to `out`), else why not.
std::string move_to_host(int from, int made, const std::string& parent, const std::string& name,
                         std::vector<std::string>& out, const std::string& shown) {
  auto host = util::open_dir_nofollow(parent);
  if (!host && host.error().err() == ENOENT && ::mkdir(parent.c_str(), 0700) == 0)
    host = util::open_dir_nofollow(parent);
  if (!host) return fmt::format("{} cannot be opened", util::printable(parent));
  size_t left_out = 0;
  if (::renameat2(from, name.c_str(), host->get(), name.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    if (err == EEXIST || err == ENOTEMPTY) return "the host's has one of that name now";
    if (err != EXDEV) return std::strerror(err);
    if (auto copied = copy_flat(made, host->get(), name, left_out); !copied)
      return util::printable(copied.error().message());
  }
  const auto scrubbed = util::remove_special_files(parent + "/" + name);
  out.push_back(
      fmt::format("applied: {}: kept (made in this run for a directory of this workspace){}{}", shown,
                  scrubbed.removed ? fmt::format("; removed {} symlinks or special files", scrubbed.removed) : "",
                  left_out ? fmt::format("; {} files over {} bytes left out", left_out, kMoveCap) : ""));
  return "";
}

// What the run made beside the data directories in a hidden directory
// (a session directory for a subdirectory a child `pi` was started in):
// carried to the host when `keep` says it belongs there, moved
// (renameat2 without replacing; a copy of its files across filesystems)
// and scrubbed like a data directory; otherwise discarded with the
// staging, and said.
std::vector<std::string> carry_new_dirs(const std::string& staging, const std::string& host_dir,
                                        const std::vector<std::string>& parents,
                                        const std::vector<std::string>& data_dirs, const KeepNew& keep) {
  std::vector<std::string> out;
  for (const auto& parent : parents) {
    const std::string rel = parent.substr(host_dir.size() + 1);
    auto dir = util::open_dir_nofollow(staging + "/" + rel);
    if (!dir) continue;
    for (const auto& n : names_in(dir->get())) {
      if (std::find(data_dirs.begin(), data_dirs.end(), parent + "/" + n) != data_dirs.end()) continue;
      const std::string shown = util::printable(rel + "/" + n);
      UniqueFd made(::openat(dir->get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      std::string why = !made.valid() ? "it is not a directory"
                        : keep        ? keep(parent, n, made.get())
                                      : "nothing of it is kept";
      if (why.empty()) why = move_to_host(dir->get(), made.get(), parent, n, out, shown);
      if (why.empty()) continue;
      out.push_back(
          fmt::format("refused: {}: made in this run, not kept: {} (start pi-jail in the directory it "
                      "belongs to)",
                      shown, why));
    }
  }
  return out;
}

// The themes in the host directory's themes/ (agent::HostDir): the names
// of its "*.json" files and links, as Pi lists them (theme.js).
agent::HostDir host_dir_facts(int host) {
  agent::HostDir out;
  UniqueFd themes(::openat(host, "themes", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!themes.valid()) return out;
  for (const auto& n : names_in(themes.get())) {
    struct stat st;
    if (!n.ends_with(".json") || n.size() == 5) continue;
    if (::fstatat(themes.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) out.themes.push_back(n.substr(0, n.size() - 5));
  }
  return out;
}

// The paths the jail of `r` may write (the workspace, the persistent jail
// home, read-write grants), resolved where they exist.
std::vector<std::string> writable_paths(const runtime::Request& r) {
  std::vector<std::string> paths{r.workspace};
  if (!r.home_source.empty()) paths.push_back(r.home_source);
  for (const auto& g : r.grants)
    if (g.access == runtime::Access::read_write) paths.push_back(g.path);
  std::vector<std::string> out;
  for (const auto& p : paths) {
    char real[PATH_MAX];
    out.push_back(::realpath(p.c_str(), real) ? std::string(real) : p);
  }
  return out;
}

}  // namespace

util::Result<PrivateCopies> PrivateCopies::stage(const std::string& state_dir, runtime::Request& r,
                                                 const SecretFile* secret) {
  PrivateCopies pc;
  if (r.private_dirs.empty()) return pc;
  // On the heap: GCC 12 with ASan misreads an optional of std::function
  // members as maybe-uninitialized (-Werror).
  if (secret) pc.secret_ = std::make_shared<const SecretFile>(*secret);
  auto runs = util::make_private_dir(state_dir + "/runs");
  if (!runs) return runs.take_error();
  sweep_dead_runs(runs->get());
  std::string id;
  auto lock = claim_run(runs->get(), id);
  if (!lock) return lock.take_error();
  pc.lock_ = std::move(*lock);
  pc.run_dir_ = state_dir + "/runs/" + id;

  for (size_t i = 0; i < r.private_dirs.size(); ++i) {
    const auto& p = r.private_dirs[i];
    Copy copy{p.path, fmt::format("{}/copy-{}", pc.run_dir_, i), {}, std::nullopt, {}, {}, {}};
    auto host = util::open_dir_nofollow(p.path);
    if (!host) return Error::from_errno(fmt::format("open the private directory {}", p.path), host.error().err());
    if (::mkdir(copy.staging.c_str(), 0700) != 0) return Error::from_errno(fmt::format("make {}", copy.staging), errno);
    auto staging = util::open_dir_nofollow(copy.staging);
    if (!staging) return staging.take_error();
    runtime::PrivateView view{p.path, copy.staging, p.why, {}, {}};
    for (const auto& w : r.write_back)
      if (util::parent_path(w.path) == p.path) copy.given.emplace_back(w.path.substr(p.path.size() + 1), std::nullopt);
    for (const auto& g : r.grants)
      if (g.access == runtime::Access::read_write && g.path != p.path && util::path_within(g.path, p.path))
        copy.data_dirs.push_back(g.path);
    for (const auto& h : r.private_hidden)
      if (util::parent_path(h) == p.path) copy.hidden.push_back(h);
    for (const auto& d : copy.data_dirs) {
      std::string parent(util::parent_path(d));
      if (parent != p.path && std::find(copy.hidden.begin(), copy.hidden.end(), parent) == copy.hidden.end())
        copy.hidden.push_back(std::move(parent));
    }

    const std::vector<std::string> writable = writable_paths(r);
    // The secret file's own inode: another name for it (a hard link, or the
    // user's link to it) would give the jail its real keys untransformed.
    struct stat secret_st {};
    const bool has_secret = secret && ::fstatat(host->get(), secret->name.c_str(), &secret_st, 0) == 0;
    for (const auto& name : names_in(host->get())) {
      struct stat st;
      if (::fstatat(host->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const std::string path = p.path + "/" + name;
      // Where the file's content is read from: here, or through the
      // user's link (a link to a directory is recreated as it is, below).
      int from_dir = host->get();
      std::string from = name;
      std::shared_ptr<const UserLink> user_link;
      struct stat followed;
      if (S_ISLNK(st.st_mode) && !(::stat(path.c_str(), &followed) == 0 && S_ISDIR(followed.st_mode))) {
        auto link = follow_user_link(host->get(), p.path, name, writable);
        if (!link) {
          std::string why = util::printable(link.error().message());
          if (secret && name == secret->name)
            return Error::invalid(
                fmt::format("stage {}: it is a symlink, and {}; point it at a regular file you "
                            "own outside the workspace, or replace it by the file itself",
                            path, why));
          // Said even with -q: Pi inside runs without the file.
          util::emit("WARNING", fmt::format("{} is not given to the jail (Pi there runs without it): it is a "
                                            "symlink, and {}; point it at a regular file you own outside the "
                                            "workspace, or replace it by the file itself",
                                            util::printable(path), why));
          continue;
        }
        if (::fstatat(link->dir.get(), link->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
          return Error::from_errno(fmt::format("stage {}: stat {}", path, util::printable(link->target)), errno);
        user_link = std::make_shared<const UserLink>(std::move(*link));
        from_dir = user_link->dir.get();
        from = user_link->name;
      }
      if (has_secret && name != secret->name && !S_ISDIR(st.st_mode) && st.st_dev == secret_st.st_dev &&
          st.st_ino == secret_st.st_ino) {
        util::emit("WARNING", fmt::format("{} is not given to the jail: it is another name for {} (a link to the same "
                                          "file), whose keys stay outside",
                                          util::printable(path), secret->name));
        continue;
      }
      if (user_link) copy.links.emplace_back(name, std::move(user_link));
      if (secret && name == secret->name) {
        if (auto c = copy_secret(from_dir, from, staging->get(), *secret, st, copy); !c)
          return std::move(c.take_error()).context(fmt::format("stage {}", path));
        continue;
      }
      if (S_ISDIR(st.st_mode) && std::find(copy.hidden.begin(), copy.hidden.end(), path) != copy.hidden.end()) {
        // Not shown: only its data directories are (Pi's sessions/ holds
        // every project's; the jail gets its own workspace's). An empty
        // directory of the run's own holds their mountpoints.
        if (::mkdirat(staging->get(), name.c_str(), 0700) != 0)
          return Error::from_errno(fmt::format("make {}/{}", copy.staging, name), errno);
      } else if (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kCopyCap)) {
        view.shown.push_back(path);
      } else if (S_ISREG(st.st_mode)) {
        std::string content;
        if (auto c = copy_in(from_dir, from, staging->get(), name, st.st_mode, content); !c)
          return std::move(c.take_error()).context(fmt::format("stage {}", p.path));
        for (auto& [given_name, given] : copy.given)
          if (given_name == name) given = std::move(content);
      } else if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = ::readlinkat(host->get(), name.c_str(), target, sizeof target - 1);
        if (n > 0) view.links.emplace_back(path, std::string(target, static_cast<size_t>(n)));
      }
      // FIFOs, sockets, devices: not shown.
    }
    r.private_views.push_back(std::move(view));
    pc.copies_.push_back(std::move(copy));
  }
  return pc;
}

util::Result<agent::WriteOutcome> PrivateCopies::write_back_to(int host, const Copy& c, const agent::AgentFile& file,
                                                               agent::Content given, agent::Content jail_left,
                                                               agent::Notes& notes) {
  auto link = std::find_if(c.links.begin(), c.links.end(), [&](const auto& l) { return l.first == file.name; });
  const agent::HostDir dir = host_dir_facts(host);
  if (link == c.links.end()) return agent::write_back(host, file, given, jail_left, notes, {}, dir);
  const UserLink& l = *link->second;
  char text[PATH_MAX];
  const ssize_t n = ::readlinkat(host, link->first.c_str(), text, sizeof text - 1);
  if (n <= 0 || std::string_view(text, static_cast<size_t>(n)) != l.text)
    return Error::invalid(fmt::format("the symlink was changed or removed during the run; {} is left as it is",
                                      util::printable(l.target)));
  return agent::write_back_through(host, file, agent::LinkTarget{l.dir.get(), l.name}, given, jail_left, notes, {},
                                   dir);
}

std::vector<std::string> PrivateCopies::finish() {
  std::vector<std::string> out;
  for (const auto& c : copies_) {
    for (const auto& d : c.data_dirs) {
      const auto scrubbed = util::remove_special_files(d);
      const size_t removed = scrubbed.removed, unchecked = scrubbed.unchecked;
      if (removed)
        out.push_back(
            fmt::format("refused: {}: removed {} symlink{} or special file{} the run left there (only "
                        "files and directories are kept)",
                        util::printable(d), removed, removed == 1 ? "" : "s", removed == 1 ? "" : "s"));
      if (unchecked)
        out.push_back(
            fmt::format("refused: {}: {} entr{} could not be checked or removed (unreadable, or past "
                        "128 levels or 200,000 entries); a symlink among them would be followed by Pi "
                        "later: look before you run Pi outside the jail",
                        util::printable(d), unchecked, unchecked == 1 ? "y" : "ies"));
    }
    for (auto& l : carry_new_dirs(c.staging, c.host_dir, c.hidden, c.data_dirs, keep_new_)) out.push_back(std::move(l));
    auto host = util::open_dir_nofollow(c.host_dir);
    auto staging = util::open_dir_nofollow(c.staging);
    if (!host || !staging) {
      out.push_back(fmt::format("nothing was written back to {}: it cannot be opened", c.host_dir));
      continue;
    }
    for (const auto& [name, given] : c.given) {
      const agent::AgentFile* file = name == agent::kAuthFile.name       ? &agent::kAuthFile
                                     : name == agent::kSettingsFile.name ? &agent::kSettingsFile
                                                                         : nullptr;
      if (!file) continue;  // the policy allows only these names
      auto left = util::read_untrusted_file(staging->get(), name, agent::kMaxFileBytes, name);
      agent::Notes notes;
      if (!left) {
        out.push_back(fmt::format("refused: {}: what the run left is not a readable file ({}); nothing written back",
                                  name, util::printable(left.error().message())));
        continue;
      }
      agent::Content jail_left = *left ? agent::Content(**left) : std::nullopt;
      if (!given && !jail_left) continue;  // never there
      std::optional<std::string> revealed;
      if (secret_ && name == secret_->name && jail_left) {
        if (c.secret_given && *c.secret_given == *jail_left) continue;  // untouched
        // Placeholders back to the real values: never a placeholder into
        // the host's file.
        auto real = secret_->from_jail(*jail_left, c.secret_given ? std::string_view(*c.secret_given) : "");
        if (!real) {
          out.push_back(fmt::format("refused: {}: what the run left cannot be read ({}); nothing written back", name,
                                    util::printable(real.error().message())));
          continue;
        }
        revealed = std::move(real->text);
        // An entry the merge refuses anyway is no login to ask about.
        const agent::Content given_host = given ? agent::Content(*given) : std::nullopt;
        std::erase_if(real->held, [&](const HeldLogin& h) {
          return !agent::auth_entry_is_data(*revealed, given_host, h.provider);
        });
        if (!real->held.empty()) {
          // Logins made in the jail wait for consent (settle_logins());
          // the rest is written back now.
          std::vector<std::string> entries;
          for (const auto& h : real->held) entries.push_back(h.provider);
          auto without = agent::hold_entries(*revealed, given ? agent::Content(*given) : std::nullopt, entries);
          if (!without) {
            out.push_back(fmt::format("refused: {}: what the run left cannot be read; nothing written back", name));
            continue;
          }
          held_ = std::make_shared<Held>(Held{c.host_dir, name, *without, std::move(*revealed), std::move(real->held)});
          revealed = held_->written;
        }
        jail_left = *revealed;
      }
      if (given && jail_left && *given == *jail_left) continue;  // untouched
      agent::Content given_content = given ? agent::Content(*given) : std::nullopt;
      auto written = write_back_to(host->get(), c, *file, given_content, jail_left, notes);
      for (auto& l : notes.lines()) out.push_back(std::move(l));
      if (!written) out.push_back(fmt::format("{}: not written back: {}", name, written.error().message()));
    }
  }
  discard();
  return out;
}

std::vector<std::string> PrivateCopies::settle_logins(Consent c) {
  std::vector<std::string> out;
  if (!held_) return out;
  const Held held = std::move(*held_);
  held_.reset();
  if (c != Consent::given) {
    for (const auto& l : held.logins) out.push_back(refusal_note(l, c));
    return out;
  }
  auto host = util::open_dir_nofollow(held.host_dir);
  if (!host) {
    out.push_back(fmt::format("refused: {}: the logins made in the jail were not written back: {} cannot be opened",
                              held.name, held.host_dir));
    return out;
  }
  const agent::AgentFile* file = held.name == agent::kAuthFile.name ? &agent::kAuthFile : nullptr;
  if (!file) return out;
  agent::Notes notes;
  // What was written back is now "given": only the held entries differ.
  auto written = agent::write_back(host->get(), *file, agent::Content(held.written), agent::Content(held.full), notes);
  for (auto& l : notes.lines()) out.push_back(std::move(l));
  if (!written) out.push_back(fmt::format("{}: not written back: {}", held.name, written.error().message()));
  return out;
}

void PrivateCopies::discard() {
  if (run_dir_.empty()) return;
  std::string parent(util::parent_path(run_dir_));
  std::string name = run_dir_.substr(parent.size() + 1);
  if (auto dir = util::open_dir_nofollow(parent)) {
    remove_tree(dir->get(), name.c_str());
    ::unlinkat(dir->get(), (name + std::string(kLockSuffix)).c_str(), 0);
  }
  run_dir_.clear();
  lock_.reset();
}

}  // namespace pj::pi
