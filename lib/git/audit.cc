#include "git/audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include <fmt/format.h>

#include "git/config.h"
#include "util/dir_names.h"
#include "util/log.h"
#include "util/untrusted.h"

namespace pj::git::audit {

namespace {

using git::config::escape;
using util::UniqueFd;

// What an object is to git, which decides what a change to it means.
enum class Kind {
  dot_git,             // the workspace's .git: a directory, or a pointer
  hooks_dir,           // <git dir>/hooks
  hook,                // <git dir>/hooks/<name>, not *.sample
  config,              // <git dir>/config, config.worktree, worktrees/<id>/config.worktree
  commondir,           // <git dir>/commondir: where config and hooks come from
  worktree_commondir,  // worktrees/<id>/commondir: "../.." as git worktree add writes it
  dir_expected,        // a submodule's or worktree's git dir, which must not be a symlink
  program,             // a script git's config makes it run (git/protect.h)
};

struct Item {
  std::string rel;  // as shown and compared: workspace-relative, or absolute elsewhere
  Kind kind;
  Stamp stamp;
  int fd = -1;  // the directory `at` is beneath (not owned)
  std::string at;
};

Stamp stamp_of(const struct stat& st) {
  return Stamp{st.st_mode,        st.st_dev,          st.st_ino,         st.st_size,
               st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

bool is_dir(const Stamp& s) { return S_ISDIR(s.mode); }

// A directory is the same while it is the same directory (its entries
// are looked at one by one); anything else must not have changed at all,
// not even its mode (a hook made executable).
bool same(const Stamp& a, const Stamp& b) {
  if (is_dir(a) || is_dir(b)) return is_dir(a) && is_dir(b) && a.dev == b.dev && a.ino == b.ino;
  return a == b;
}

std::string type_word(mode_t mode) {
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISREG(mode)) return "a file";
  return "a device or socket";
}

// At most `n` bytes of `s`, escaped, with how much was left out.
std::string shown(std::string_view s, size_t n = 160) {
  if (s.size() <= n) return escape(s);
  return fmt::format("{}... ({} bytes)", escape(s.substr(0, n)), s.size());
}

std::string join(const std::string& dir, std::string_view name) { return dir + "/" + std::string(name); }

// Lists what snapshot() and audit() look at, beneath the workspace's
// directory fd, never through a symlink and within the entry budget.
class Walker {
public:
  Walker(int ws, const Limits& limits) : ws_(ws), limits_(limits) {}

  std::vector<Item> walk(std::string_view workspace, const std::vector<Watch>& watched) {
    if (auto st = lstat_at(ws_, ".git")) {
      items_.push_back({".git", Kind::dot_git, stamp_of(*st), ws_, ".git"});
      if (S_ISDIR(st->st_mode)) git_dir(".git", 0);
    }
    for (const auto& w : watched) watch(workspace, w);
    return std::move(items_);
  }

  // Where the entry budget ran out; empty when it did not.
  const std::string& cut_at() const { return cut_at_; }
  // The first submodule directory deeper than the walk goes; empty if none.
  const std::string& too_deep() const { return too_deep_; }

private:
  // A watched path: found again from its writable place, never through a
  // symlink. The workspace's .git was walked already.
  void watch(std::string_view workspace, const Watch& w) {
    const bool in_ws = w.root == workspace;
    if (in_ws && (w.rel == ".git" || w.rel.starts_with(".git/"))) return;
    const std::string shown = in_ws ? w.rel : join(w.root, w.rel);
    int root = ws_;
    if (!in_ws) {
      auto it = roots_.find(w.root);
      if (it == roots_.end()) {
        auto fd = util::open_dir_nofollow(w.root);
        if (!fd) return;
        it = roots_.emplace(w.root, std::move(*fd)).first;
      }
      root = it->second.get();
    }
    auto slash = w.rel.rfind('/');
    std::string dir = slash == std::string::npos ? "." : w.rel.substr(0, slash);
    auto parent = util::open_dir_beneath(root, dir);
    if (!parent) return;
    auto st = lstat_at(parent->get(), w.rel.substr(slash == std::string::npos ? 0 : slash + 1));
    if (!st) return;
    switch (w.what) {
      case Watch::What::hooks_dir:
        items_.push_back({shown, Kind::hooks_dir, stamp_of(*st), root, w.rel});
        if (S_ISDIR(st->st_mode)) hooks(root, w.rel, shown);
        return;
      case Watch::What::config: items_.push_back({shown, Kind::config, stamp_of(*st), root, w.rel}); return;
      case Watch::What::commondir: items_.push_back({shown, Kind::commondir, stamp_of(*st), root, w.rel}); return;
      case Watch::What::program: items_.push_back({shown, Kind::program, stamp_of(*st), root, w.rel}); return;
    }
  }

  static std::optional<struct stat> lstat_at(int dirfd, std::string_view name) {
    struct stat st;
    std::string n(name);
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
    return st;
  }

  // The sorted names in the directory `rel` beneath `root`, within the budget.
  std::vector<std::string> list(int root, const std::string& rel) {
    std::vector<std::string> names;
    auto dir = util::open_dir_beneath(root, rel);
    if (!dir) return names;
    util::for_each_name(dir->get(), [&](std::string_view n) {
      if (entries_ >= limits_.entries) {
        if (cut_at_.empty()) cut_at_ = rel;
        return false;
      }
      ++entries_;
      names.emplace_back(n);
      return true;
    });
    std::sort(names.begin(), names.end());
    return names;
  }

  void add(const UniqueFd& dir, const std::string& rel, std::string_view name, Kind kind) {
    if (auto st = lstat_at(dir.get(), name))
      items_.push_back({join(rel, name), kind, stamp_of(*st), ws_, join(rel, name)});
  }

  // A git dir: the workspace's .git or a submodule's .git/modules/<name>.
  void git_dir(const std::string& rel, int depth) {
    auto dir = util::open_dir_beneath(ws_, rel);
    if (!dir) return;
    add(*dir, rel, "config", Kind::config);
    add(*dir, rel, "config.worktree", Kind::config);
    add(*dir, rel, "commondir", Kind::commondir);
    if (auto st = lstat_at(dir->get(), "hooks")) {
      items_.push_back({join(rel, "hooks"), Kind::hooks_dir, stamp_of(*st), ws_, join(rel, "hooks")});
      if (S_ISDIR(st->st_mode)) hooks(ws_, join(rel, "hooks"), join(rel, "hooks"));
    }
    if (auto st = lstat_at(dir->get(), "worktrees"); st && S_ISDIR(st->st_mode)) worktrees(join(rel, "worktrees"));
    if (auto st = lstat_at(dir->get(), "modules")) {
      if (!S_ISDIR(st->st_mode))
        items_.push_back({join(rel, "modules"), Kind::dir_expected, stamp_of(*st), ws_, join(rel, "modules")});
      else if (depth < limits_.module_depth)
        modules(join(rel, "modules"), depth + 1);
      else if (too_deep_.empty())
        too_deep_ = join(rel, "modules");
    }
  }

  // Every hook but git init's *.sample files (git runs <name> only), in
  // the directory `rel` beneath `root`, shown as `shown`.
  void hooks(int root, const std::string& rel, const std::string& shown) {
    auto dir = util::open_dir_beneath(root, rel);
    if (!dir) return;
    for (const auto& name : list(root, rel)) {
      if (name.ends_with(".sample")) continue;
      auto st = lstat_at(dir->get(), name);
      if (st && !S_ISDIR(st->st_mode))
        items_.push_back({join(shown, name), Kind::hook, stamp_of(*st), root, join(rel, name)});
    }
  }

  void worktrees(const std::string& rel) {
    for (const auto& id : list(ws_, rel)) {
      std::string wt = join(rel, id);
      auto dir = util::open_dir_beneath(ws_, wt);
      if (!dir) {
        if (auto parent = util::open_dir_beneath(ws_, rel)) add(*parent, rel, id, Kind::dir_expected);
        continue;
      }
      add(*dir, wt, "config.worktree", Kind::config);
      add(*dir, wt, "commondir", Kind::worktree_commondir);
    }
  }

  // .git/modules/<name>: a name may hold slashes (a/b), so a directory
  // that is not a git dir itself is looked into, to a depth.
  void modules(const std::string& rel, int depth) {
    auto dir = util::open_dir_beneath(ws_, rel);
    if (!dir) return;
    for (const auto& name : list(ws_, rel)) {
      auto st = lstat_at(dir->get(), name);
      if (!st) continue;
      std::string sub = join(rel, name);
      if (!S_ISDIR(st->st_mode)) {
        items_.push_back({sub, Kind::dir_expected, stamp_of(*st), ws_, sub});
        continue;
      }
      auto inner = util::open_dir_beneath(ws_, sub);
      if (!inner) continue;
      bool git = lstat_at(inner->get(), "HEAD") || lstat_at(inner->get(), "config") || lstat_at(inner->get(), "hooks");
      if (git)
        git_dir(sub, depth);
      else if (depth < limits_.module_depth)
        modules(sub, depth + 1);
      else if (too_deep_.empty())
        too_deep_ = sub;
    }
  }

  int ws_;
  const Limits& limits_;
  size_t entries_ = 0;
  std::string cut_at_;
  std::string too_deep_;
  std::vector<Item> items_;
  std::map<std::string, UniqueFd> roots_;  // watched places outside the workspace, by path
};

// Findings, bounded: past the limit they are only counted.
class Collector {
public:
  explicit Collector(const Limits& limits) : limits_(limits) {}
  void add(const std::string& rel, std::string what, int line = 0, std::string key = "") {
    if (out_.findings.size() >= limits_.findings) {
      ++out_.unlisted;
      return;
    }
    out_.findings.push_back({escape(rel), line, std::move(key), std::move(what)});
  }
  Audit take() { return std::move(out_); }

private:
  const Limits& limits_;
  Audit out_;
};

class Auditor {
public:
  Auditor(const Limits& limits, Collector& out) : limits_(limits), out_(out) {}

  void examine(const Item& it, const Stamp* before) {
    const mode_t mode = it.stamp.mode;
    const char* age = before ? "changed during the run" : "new";
    switch (it.kind) {
      case Kind::dot_git:
        if (S_ISDIR(mode))
          out_.add(it.rel, before ? "the repository was replaced during the run; everything below is new"
                                  : "a repository created during the run: all it holds is the jail's; what git "
                                    "would run follows");
        else if (S_ISLNK(mode))
          out_.add(it.rel, fmt::format("a symlink to \"{}\" (not followed): git would use the repository it points to",
                                       link_target(it)));
        else if (S_ISREG(mode))
          out_.add(it.rel,
                   fmt::format("a file (not followed): git would use the repository it names: {}", pointer(it)));
        else
          out_.add(it.rel, fmt::format("{} where the repository belongs (not opened)", type_word(mode)));
        return;
      case Kind::hooks_dir:
      case Kind::dir_expected:
        if (S_ISLNK(mode))
          out_.add(it.rel,
                   fmt::format("a symlink to \"{}\" where git expects a directory (not followed)", link_target(it)));
        else if (!S_ISDIR(mode))
          out_.add(it.rel, fmt::format("{} where git expects a directory (not opened)", type_word(mode)));
        return;
      case Kind::hook:
        if (S_ISREG(mode))
          out_.add(it.rel,
                   fmt::format("a hook, {}: git runs it{}", age, (mode & 0111) ? "" : " once it is made executable"));
        else if (S_ISLNK(mode))
          out_.add(it.rel, fmt::format("a hook, {}: a symlink to \"{}\" (not followed)", age, link_target(it)));
        else
          out_.add(it.rel, fmt::format("{} among the hooks, {} (not opened)", type_word(mode), age));
        return;
      case Kind::config: config(it, age); return;
      case Kind::program:
        if (S_ISLNK(mode))
          out_.add(it.rel, fmt::format("a script git's config runs, {}: a symlink to \"{}\" (not followed)", age,
                                       link_target(it)));
        else
          out_.add(it.rel, fmt::format("a script git's config runs, {}: {} (not opened)", age, type_word(mode)));
        return;
      case Kind::commondir:
      case Kind::worktree_commondir: {
        if (!S_ISREG(mode)) {
          out_.add(it.rel, fmt::format("{}, {}, where git reads a path (not opened)", type_word(mode), age));
          return;
        }
        std::string text;
        auto where = pointer(it, &text);
        if (it.kind == Kind::worktree_commondir && (text == "../..\n" || text == "../.."))
          return;  // what git worktree add writes
        out_.add(it.rel, fmt::format("{}: git takes config and hooks from {}", age, where));
        return;
      }
    }
  }

private:
  std::string link_target(const Item& it) {
    const std::string& rel = it.at;
    auto slash = rel.rfind('/');
    std::string dir = slash == std::string::npos ? "" : rel.substr(0, slash);
    std::string name = rel.substr(slash == std::string::npos ? 0 : slash + 1);
    auto d = util::open_dir_beneath(it.fd, dir);
    if (!d) return "?";
    char buf[1024];
    ssize_t n = ::readlinkat(d->get(), name.c_str(), buf, sizeof buf);
    if (n < 0) return "?";
    return shown(std::string_view(buf, static_cast<size_t>(n)));
  }

  // A small file's content, within the read budget. Returns it quoted and
  // escaped, or why it was not read; `raw` gets the bytes.
  std::string pointer(const Item& it, std::string* raw = nullptr) {
    auto text = read(it, 4096);
    if (!text) return text.error().message();
    if (raw) *raw = *text;
    return fmt::format("\"{}\"", shown(*text));
  }

  // Read the regular file `it` (re-checked: no symlink, no FIFO, at most
  // `cap` bytes); on failure, why, for the finding.
  util::Result<std::string> read(const Item& it, size_t cap) {
    if (static_cast<size_t>(it.stamp.size) > cap)
      return util::Error::invalid(fmt::format("{} bytes, over the {}-byte cap (not read)", it.stamp.size, cap));
    if (files_read_ >= limits_.files_read)
      return util::Error::invalid(fmt::format("not read: more than {} files to read", limits_.files_read));
    ++files_read_;
    auto r = util::read_untrusted_file(it.fd, it.at, cap, escape(it.rel));
    if (!r) return util::Error::invalid(fmt::format("not read: {}", r.error().message()));
    if (!*r) return util::Error::invalid("not read: it went away");
    return std::move(**r);
  }

  void config(const Item& it, const char* age) {
    if (!S_ISREG(it.stamp.mode)) {
      std::string what = fmt::format("{}, {}, where git reads config (not opened)", type_word(it.stamp.mode), age);
      if (S_ISLNK(it.stamp.mode)) what += fmt::format("; it points to \"{}\"", link_target(it));
      out_.add(it.rel, what);
      return;
    }
    auto text = read(it, limits_.file_bytes);
    if (!text) {
      out_.add(it.rel, fmt::format("config, {}: {}", age, text.error().message()));
      return;
    }
    auto parsed = git::config::parse(*text);
    for (const auto& e : parsed.entries) {
      auto why = git::config::command_reason(e);
      if (why.empty()) continue;
      std::string value = e.value ? fmt::format("\"{}\"", shown(*e.value)) : "(no value: true)";
      out_.add(it.rel, fmt::format("{} = {}: {}", escape(e.key()), value, why), e.line, escape(e.key()));
    }
    if (parsed.error_line)
      out_.add(it.rel, fmt::format("not valid git config ({}); git refuses to run with it", parsed.error),
               parsed.error_line);
  }

  const Limits& limits_;
  Collector& out_;
  size_t files_read_ = 0;
};

}  // namespace

Snapshot snapshot(std::string_view workspace, const std::vector<Watch>& watched, const Limits& limits) {
  Snapshot s;
  auto ws = util::open_dir_nofollow(workspace);
  if (!ws) return s;
  Walker w(ws->get(), limits);
  for (auto& it : w.walk(workspace, watched)) s.objects_.emplace(std::move(it.rel), it.stamp);
  s.taken_ = true;
  return s;
}

Audit audit(std::string_view workspace, const Snapshot& before, const std::vector<Watch>& watched,
            const Limits& limits) {
  Collector out(limits);
  auto ws = util::open_dir_nofollow(workspace);
  if (!ws) {
    out.add(".", fmt::format("the workspace could not be opened for the audit: {}", escape(ws.error().message())));
    return out.take();
  }
  Walker w(ws->get(), limits);
  Auditor auditor(limits, out);
  for (const auto& it : w.walk(workspace, watched)) {
    auto was = before.objects_.find(it.rel);
    const Stamp* prior = was == before.objects_.end() ? nullptr : &was->second;
    if (prior && same(*prior, it.stamp)) continue;
    auditor.examine(it, prior);
  }
  if (!w.cut_at().empty())
    out.add(w.cut_at(),
            fmt::format("more than {} directory entries in all: the rest was not examined", limits.entries));
  // Not compared with the snapshot: what lies that deep was never examined.
  if (!w.too_deep().empty())
    out.add(w.too_deep(),
            fmt::format("submodule git dirs nested deeper than {} levels: not examined", limits.module_depth));
  return out.take();
}

void print(const Audit& a, std::string_view workspace) {
  if (a.empty()) return;
  std::string text = fmt::format(
      "the repository in {} has new or changed hooks, settings or pointers that the host's git would run or "
      "follow. Review them before running git there (this is printed even with -q):",
      escape(workspace));
  for (const auto& f : a.findings)
    text += fmt::format("\n  {}{}: {}", f.path, f.line ? fmt::format(":{}", f.line) : "", f.what);
  if (a.unlisted) text += fmt::format("\n  ... and {} more (not listed)", a.unlisted);
  util::emit("WARNING", text);
}

void write_json(util::JsonWriter& j, const Audit& a) {
  j.key("repository_audit").begin_array();
  for (const auto& f : a.findings) {
    j.begin_object();
    j.field("path", f.path);
    if (f.line) j.field("line", f.line);
    if (!f.key.empty()) j.field("key", f.key);
    j.field("what", f.what);
    j.end_object();
  }
  if (a.unlisted) {
    j.begin_object();
    j.field("path", ".git");
    j.field("what", fmt::format("{} more findings, not listed", a.unlisted));
    j.end_object();
  }
  j.end_array();
}

}  // namespace pj::git::audit
