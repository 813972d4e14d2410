#include "placeholders.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "util/file_lock.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::supervisor {

using util::Error;
using util::UniqueFd;

namespace {

constexpr const char* kRegistry = "placeholders";
constexpr size_t kRegistryCap = 4 << 20;

// One placeholder: what pi-jail made at `path`.
struct Record {
  linuxjail::Node node = linuxjail::Node::directory;
  std::string content;  // a file's bytes
  std::string path;
  bool operator==(const Record&) const = default;
};

std::string hex(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

std::optional<std::string> unhex(std::string_view s) {
  if (s.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) {
    auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    int hi = digit(s[i]), lo = digit(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// The registry: one line per placeholder, "d|f <content hex> <path hex>".
std::vector<Record> load(int state) {
  std::vector<Record> out;
  auto text = util::read_untrusted_file(state, kRegistry, kRegistryCap, kRegistry);
  if (!text || !*text) return out;
  std::string_view rest = **text;
  while (!rest.empty()) {
    std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    size_t a = line.find(' '), b = line.find(' ', a + 1);
    if (a != 1 || b == std::string_view::npos) continue;
    auto content = unhex(line.substr(a + 1, b - a - 1));
    auto path = unhex(line.substr(b + 1));
    if (!content || !path || path->empty() || (*path)[0] != '/') continue;
    out.push_back({line[0] == 'f' ? linuxjail::Node::file : linuxjail::Node::directory, *content, *path});
  }
  return out;
}

// Replace the registry with `records` (written, renamed over it); nothing
// is written when they are what it holds already (`on_disk`, as load()
// read it under the same lock). An empty registry is no file at all
// (load() reads a missing one as empty): the usual teardown removes it.
// Not fsynced: a SIGKILL cannot lose what was written (the page cache
// outlives the process), and what a power failure loses the marks cover
// (mark() below); an fsync would make every start wait for the
// filesystem's journal, milliseconds on a busy disk.
util::Status save(int state, const std::vector<Record>& on_disk, const std::vector<Record>& records) {
  if (records == on_disk) return {};
  if (records.empty()) {
    if (::unlinkat(state, kRegistry, 0) != 0 && errno != ENOENT)
      return Error::from_errno("remove the emptied placeholder registry", errno);
    return {};
  }
  std::string text;
  for (const auto& r : records)
    text += fmt::format("{} {} {}\n", r.node == linuxjail::Node::file ? 'f' : 'd', hex(r.content), hex(r.path));
  auto tmp = util::TempFile::create(state, kRegistry);
  if (!tmp) return std::move(tmp.take_error()).context("write the placeholder registry");
  if (auto st = tmp->fill(text, util::Durability::page_cache); !st)
    return std::move(st.take_error()).context("write the placeholder registry");
  if (auto st = tmp->rename_over(kRegistry); !st)
    return std::move(st.take_error()).context("replace the placeholder registry");
  return {};
}

std::pair<std::string, std::string> split(const std::string& path) {
  return {std::string(util::parent_path(path)), path.substr(path.rfind('/') + 1)};
}

// Every placeholder carries this extended attribute, so that one whose
// registry record a power failure lost is still known for pi-jail's at the
// next run of its workspace (Registry::hold adopts it). Best effort: a
// filesystem without user xattrs leaves such a placeholder unmarked, and
// then it stays (an empty directory, or git's default content) for the
// user to remove.
constexpr const char* kMarkName = "user.pi-jail";
constexpr std::string_view kMarkValue = "placeholder";

void mark(int fd) { (void)::fsetxattr(fd, kMarkName, kMarkValue.data(), kMarkValue.size(), 0); }

bool marked(int fd) {
  char buf[32];
  ssize_t n = ::fgetxattr(fd, kMarkName, buf, sizeof buf);
  return n == static_cast<ssize_t>(kMarkValue.size()) && std::string_view(buf, static_cast<size_t>(n)) == kMarkValue;
}

// The directories placeholders sit in, each opened once (without
// following a symlink) for one sweep or one hold: a run's placeholders
// mostly share the workspace as their parent.
class Parents {
public:
  // The open parent of `path`, or the error of opening it.
  util::Result<int> of(const std::string& path) {
    std::string parent(util::parent_path(path));
    auto it = open_.find(parent);
    if (it == open_.end()) it = open_.emplace(parent, util::open_dir_nofollow(parent)).first;
    if (!it->second) return util::Error::from_errno(fmt::format("open {}", parent), it->second.error().err());
    return it->second->get();
  }

  // Is each directory opened still the one its path names? (Renamed since,
  // what was made and held in it is not where the jail will look.)
  util::Status still_there() const {
    for (const auto& [path, fd] : open_) {
      if (!fd) continue;
      auto now = util::open_dir_nofollow(path);
      struct stat was, is;
      if (!now || ::fstat(fd->get(), &was) != 0 || ::fstat(now->get(), &is) != 0 || was.st_dev != is.st_dev ||
          was.st_ino != is.st_ino)
        return util::Error::from_errno(
            fmt::format("hold the placeholders in {}: it changed while the jail was being set up", path), ESTALE);
    }
    return {};
  }

private:
  std::map<std::string, util::Result<UniqueFd>> open_;
};

// How much of a file placeholder's content must be there.
enum class Content {
  exact,   // as made: what a jail is about to rely on
  prefix,  // a start of it: a SIGKILL between creating the file and writing
           // it left it short (an empty commondir, which git dies on)
};

// Is the object open at `fd` still what pi-jail made for `r`?
bool pristine(int fd, const Record& r, Content want = Content::exact) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  if (r.node == linuxjail::Node::directory) {
    return S_ISDIR(st.st_mode) && util::directory_is_empty(fd);
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size > r.content.size()) return false;
  if (want == Content::exact && size != r.content.size()) return false;
  std::string got(size, '\0');
  return ::pread(fd, got.data(), size, 0) == static_cast<ssize_t>(size) && r.content.starts_with(got);
}

UniqueFd open_at(int dir, const std::string& name) {
  return UniqueFd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
}

// The record of the marked object open at `fd`, a placeholder an earlier
// run made, when it is still as made: an empty directory, or a file with
// a placeholder's content (view.cc placeholder_place(): empty, or "." for
// commondir). A marked file written since (in place, keeping the mark) is
// the user's and stays.
std::optional<Record> leftover(int fd, linuxjail::Node node, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return std::nullopt;
  if (node == linuxjail::Node::directory)
    return S_ISDIR(st.st_mode) && util::directory_is_empty(fd) ? std::optional<Record>(Record{node, "", path})
                                                               : std::nullopt;
  char buf[4];
  if (!S_ISREG(st.st_mode) || st.st_size >= static_cast<off_t>(sizeof buf)) return std::nullopt;
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n != st.st_size) return std::nullopt;
  std::string content(buf, static_cast<size_t>(n));
  if (content != "" && content != ".\n") return std::nullopt;
  return Record{node, std::move(content), path};
}

enum class Sweep { gone, in_use };

// Remove `r` if no jail holds it and it is still pristine; a path that now
// holds something else is simply forgotten.
Sweep try_remove(const Record& r, Parents& parents) {
  auto dir = parents.of(r.path);
  if (!dir) return Sweep::gone;
  const std::string name = split(r.path).second;
  UniqueFd fd = open_at(*dir, name);
  if (!fd.valid() || !pristine(fd.get(), r, Content::prefix)) return Sweep::gone;
  if (!util::try_lock_file(fd.get())) return Sweep::in_use;
  ::unlinkat(*dir, name.c_str(), r.node == linuxjail::Node::directory ? AT_REMOVEDIR : 0);
  return Sweep::gone;
}

std::vector<Record> sweep(std::vector<Record> records) {
  Parents parents;
  std::vector<Record> kept;
  for (auto& r : records)
    if (try_remove(r, parents) == Sweep::in_use) kept.push_back(std::move(r));
  return kept;
}

// Make `r` (it must not exist, or be what another run made for it).
util::Status make(const Record& r, int dir) {
  const std::string name = split(r.path).second;
  if (r.node == linuxjail::Node::directory) {
    if (::mkdirat(dir, name.c_str(), 0755) != 0 && errno != EEXIST)
      return Error::from_errno(fmt::format("make the placeholder directory {}", r.path), errno);
  } else {
    // Made 0600 so that its owner may mark it (user xattrs need write
    // permission), then read-only.
    UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid() && errno != EEXIST) return Error::from_errno(fmt::format("make the placeholder {}", r.path), errno);
    if (fd.valid() && ::write(fd.get(), r.content.data(), r.content.size()) != static_cast<ssize_t>(r.content.size()))
      return Error::from_errno(fmt::format("write the placeholder {}", r.path), errno ? errno : EIO);
    if (fd.valid()) {
      mark(fd.get());
      if (::fchmod(fd.get(), 0444) != 0) return Error::from_errno(fmt::format("make {} read-only", r.path), errno);
    }
  }
  return {};
}

}  // namespace

util::Result<Registry> Registry::lock(const std::string& state_dir) {
  auto state = util::make_private_dir(state_dir);
  if (!state) return std::move(state.take_error()).context("pi-jail's state directory");
  UniqueFd fd(::openat(state->get(), "placeholders.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Error::from_errno(fmt::format("open {}/placeholders.lock", state_dir), errno);
  if (int err = util::lock_file(fd.get(), util::LockKind::exclusive); err != 0)
    return Error::from_errno(fmt::format("lock {}/placeholders.lock", state_dir), -err);
  util::TempFile::remove_abandoned(state->get(), kRegistry);  // a run killed while it saved
  auto on_disk = load(state->get());
  auto kept = sweep(on_disk);
  if (auto st = save(state->get(), on_disk, kept); !st) return st.take_error();
  return Registry(state_dir, std::move(fd));
}

util::Result<Holds> Registry::hold(const linuxjail::JailSpec& spec) {
  auto state = util::open_dir_nofollow(dir_);
  if (!state) return Error::from_errno(fmt::format("open pi-jail's state directory {}", dir_), state.error().err());
  // On failure the holds taken so far are dropped and the registry swept
  // under the lock this process already holds: ~Holds would take it again
  // through a new open file description and wait for itself forever.
  struct Abandon {
    Holds holds;
    int state;
    bool armed = true;
    ~Abandon() {
      if (!armed) return;
      holds.fds_.clear();
      holds.dir_.clear();
      auto on_disk = load(state);
      (void)save(state, on_disk, sweep(on_disk));
    }
  } guard{Holds(dir_), state->get()};
  Holds& holds = guard.holds;
  const std::vector<Record> on_disk = load(state->get());
  std::vector<Record> records = on_disk;
  for (const auto& op : spec.mounts) {
    if (!op.placeholder) continue;
    records.push_back({op.node, op.mask_content, op.dest});
  }
  // Written before anything is made: a SIGKILL from here on leaves a record.
  if (auto st = save(state->get(), on_disk, records); !st) return st.take_error();
  Parents parents;
  std::vector<Record> adopted;
  for (const auto& op : spec.mounts) {
    if (!op.placeholder && !op.held) continue;
    Record r{op.node, op.mask_content, op.dest};
    auto dir = parents.of(op.dest);
    if (op.placeholder) {
      if (!dir) return Error::from_errno(fmt::format("make the placeholder {}", r.path), dir.error().err());
      if (auto st = make(r, *dir); !st) return st.take_error();
    }
    UniqueFd fd = dir ? open_at(*dir, split(op.dest).second) : UniqueFd();
    const int open_err = dir ? errno : dir.error().err();
    struct stat st;
    bool same = fd.valid() && ::fstat(fd.get(), &st) == 0 &&
                (op.placeholder ? pristine(fd.get(), r) : st.st_dev == op.dev && st.st_ino == op.ino);
    if (!same)
      return Error::from_errno(fmt::format("hold {} ({}): it changed while the jail was being set up", op.dest, op.why),
                               fd.valid() ? ESTALE : open_err);
    if (int err = util::lock_file(fd.get(), util::LockKind::shared); err != 0)
      return Error::from_errno(fmt::format("hold {}", op.dest), -err);
    if (op.placeholder && op.node == linuxjail::Node::directory) mark(fd.get());
    if (!op.placeholder && marked(fd.get()))
      if (auto left = leftover(fd.get(), op.node, op.dest)) adopted.push_back(std::move(*left));
    holds.fds_.push_back(std::move(fd));
  }
  if (auto st = parents.still_there(); !st) return st.take_error();
  // Placeholders a run that never ended left without a record (a power
  // failure lost it): recorded now, so that this run's end removes them.
  if (!adopted.empty()) {
    std::vector<Record> with = records;
    with.insert(with.end(), adopted.begin(), adopted.end());
    if (auto st = save(state->get(), records, with); !st)
      util::warn("a placeholder an earlier run left stays: {}", st.error().message());
  }
  guard.armed = false;
  return std::move(holds);
}

void Holds::release() {
  if (dir_.empty()) return;
  fds_.clear();                          // our shared holds go first: we may be the last user
  auto registry = Registry::lock(dir_);  // sweeps
  if (!registry) util::warn("placeholders are left for the next run to remove: {}", registry.error().message());
  dir_.clear();
}

}  // namespace pj::supervisor
