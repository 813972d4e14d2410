#include "git/protect.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "git/config.h"
#include "util/dir_names.h"
#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::git::protect {

namespace {

using git::config::escape;

std::string dir_of(const std::string& path) { return std::string(util::parent_path(path)); }

// A path from git's config as git expands it (config.c
// git_config_pathname / interpolate_path): "~/" is the host's home, a
// relative path is taken from `base`. "~user/" and "%(prefix)/" name
// nothing the jail can write here: nullopt.
std::optional<std::string> expand(std::string_view value, const std::string& base, const std::string& home) {
  if (value.empty() || value.starts_with("%(prefix)/")) return std::nullopt;
  std::string joined;
  if (value.starts_with("~/"))
    joined = home + "/" + std::string(value.substr(2));
  else if (value.starts_with('~'))
    return std::nullopt;
  else if (value.front() != '/' && base.empty())
    return std::nullopt;  // no repository to be relative to
  else
    joined = std::string(value);
  auto norm = util::normalize_path(joined, base);
  if (!norm) return std::nullopt;
  return *norm;
}

// The words of a command that may name a file: split where a shell
// splits words or starts another command, keeping those with a '/'.
std::vector<std::string> path_words(std::string_view cmd, size_t max) {
  constexpr std::string_view kBreaks = " \t\n\r;&|()<>`'\"=!{}$";
  std::vector<std::string> out;
  size_t i = 0;
  while (i < cmd.size() && out.size() < max) {
    while (i < cmd.size() && kBreaks.find(cmd[i]) != std::string_view::npos) ++i;
    size_t start = i;
    while (i < cmd.size() && kBreaks.find(cmd[i]) == std::string_view::npos) ++i;
    std::string_view w = cmd.substr(start, i - start);
    if (w.find('/') != std::string_view::npos) out.emplace_back(w);
  }
  return out;
}

bool is_include(const git::config::Entry& e) {
  return e.name == "path" && ((e.section == "include" && !e.subsection) || (e.section == "includeif" && e.subsection));
}

bool is_hooks_path(const git::config::Entry& e) {
  return e.section == "core" && !e.subsection && e.name == "hookspath";
}

// Keys whose value is a place git reaches rather than a command it runs
// (a remote URL, a rewrite of one, allowed transports, the work tree):
// a local remote there is written by `git push`, not run.
bool names_a_place(const git::config::Entry& e) {
  return (e.section == "remote" && (e.name == "url" || e.name == "pushurl")) || e.section == "url" ||
         e.section == "protocol" || (e.section == "core" && e.name == "worktree");
}

class Planner {
public:
  Planner(const Inputs& in, const ReadConfig& read, const Limits& limits) : in_(in), read_(read), limits_(limits) {}

  Plan run() {
    // The host's own files name places for git anywhere, with or without
    // a repository here (a global include.path into the workspace).
    for (const auto& f : in_.host_configs) config_file(f, Repository{}, 0);
    for (const auto& repo : in_.repositories) repository(repo);
    return std::move(out_);
  }

private:
  // The writable place holding `path`, strictly below it or at it.
  const std::string* writable_root(const std::string& path) const {
    for (const auto& w : in_.writable)
      if (util::path_within(path, w)) return &w;
    return nullptr;
  }

  void protect(const std::string& path, Part part, std::string why) {
    if (!writable_root(path) || !seen_.insert(path).second) return;
    out_.protections.push_back({path, part, std::move(why)});
  }

  void repository(const Repository& repo) {
    const std::string& g = repo.git_dir;
    protect(g + "/hooks", Part::hooks_dir, "hooks git runs");
    protect(g + "/config", Part::config, "the repository's config: commands git runs");
    protect(g + "/config.worktree", Part::config, "the worktree's config: commands git runs");
    protect(g + "/commondir", Part::commondir, "would send git to a config and hooks elsewhere");
    for (const auto& f : in_.host_configs) config_file(f, repo, 0);
    config_file(g + "/config", repo, 0);
    config_file(g + "/config.worktree", repo, 0);
  }

  // Where git runs hooks and commands for `repo`: the top of its work
  // tree, or the git dir of a bare repository.
  static const std::string& run_dir(const Repository& repo) {
    return repo.work_tree.empty() ? repo.git_dir : repo.work_tree;
  }

  // A config file once read: where it was, and only the entries that
  // matter here (the text is not kept: many repositories, small memory).
  struct Loaded {
    std::string path;
    std::vector<git::config::Entry> entries;
  };

  const Loaded* load(const std::string& path) {
    if (auto hit = cache_.find(path); hit != cache_.end()) return hit->second ? &*hit->second : nullptr;
    if (cache_.size() >= limits_.files) {
      problem(path, fmt::format("more than {} git config files to read", limits_.files));
      return nullptr;
    }
    auto r = read_(path);
    if (!r) {
      problem(path, r.error().message());
      return nullptr;
    }
    std::optional<Loaded> loaded;
    if (r->text) {
      loaded.emplace();
      loaded->path = std::move(r->path);
      for (auto& e : git::config::parse(*r->text).entries)
        if (e.value && (is_include(e) || is_hooks_path(e) || !git::config::command_reason(e).empty()))
          loaded->entries.push_back(std::move(e));
    }
    auto& slot = cache_.emplace(path, std::move(loaded)).first->second;
    return slot ? &*slot : nullptr;
  }

  void problem(const std::string& path, const std::string& why) {
    std::string text = fmt::format(
        "git config {}: {}; git would read it as configuration, so pi-jail cannot tell what the host's git would run "
        "(fix: replace it with a regular file of at most 256 KiB, or remove it)",
        escape(path), escape(why));
    if (std::find(out_.problems.begin(), out_.problems.end(), text) == out_.problems.end())
      out_.problems.push_back(std::move(text));
  }

  void config_file(const std::string& path, const Repository& repo, int depth) {
    if (depth > limits_.include_depth) return;  // git refuses such a chain
    const Loaded* loaded = load(path);
    if (!loaded) return;
    if (loaded->path != path) protect(loaded->path, Part::config, fmt::format("git config, the target of {}", path));
    for (const auto& e : loaded->entries) {
      if (is_include(e)) {
        auto inc = expand(*e.value, dir_of(path), in_.home);
        if (!inc) continue;
        protect(*inc, Part::config, fmt::format("git config included by {}:{}", path, e.line));
        config_file(*inc, repo, depth + 1);
      } else if (is_hooks_path(e)) {
        if (auto dir = expand(*e.value, run_dir(repo), in_.home))
          protect(*dir, Part::hooks_dir, fmt::format("hooks git runs (core.hooksPath, {}:{})", path, e.line));
      } else if (!git::config::command_reason(e).empty() && !names_a_place(e)) {
        command(e, path, repo);
      }
    }
  }

  // A script a command names inside a writable place, never the place
  // itself (a command that cds into the workspace names no script).
  void command(const git::config::Entry& e, const std::string& file, const Repository& repo) {
    for (const auto& w : path_words(*e.value, limits_.words)) {
      auto p = expand(w, run_dir(repo), in_.home);
      if (!p) continue;
      const std::string* root = writable_root(*p);
      if (!root || *root == *p) continue;
      protect(*p, Part::program, fmt::format("run by git ({}, {}:{})", e.key(), file, e.line));
    }
  }

  const Inputs& in_;
  const ReadConfig& read_;
  const Limits& limits_;
  Plan out_;
  std::set<std::string> seen_;
  std::map<std::string, std::optional<Loaded>> cache_;  // nullopt: no such file
};

}  // namespace

Plan plan(const Inputs& in, const ReadConfig& read, const Limits& limits) { return Planner(in, read, limits).run(); }

ReadConfig host_reader(std::vector<std::string> writable, size_t cap) {
  return [writable = std::move(writable), cap](const std::string& path) -> util::Result<ConfigText> {
    auto beneath = [&](const std::string& root, const std::string& file) -> util::Result<ConfigText> {
      auto dir = util::open_dir_nofollow(root);
      if (!dir) return std::move(dir.take_error()).context("open " + root);
      std::string rel = file == root ? "." : file.substr(root.size() + (root == "/" ? 0 : 1));
      auto text = util::read_untrusted_file(dir->get(), rel, cap, file);
      if (!text) return text.take_error();
      return ConfigText{file, std::move(*text)};
    };
    for (const auto& w : writable)
      if (util::path_within(path, w)) return beneath(w, path);
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf)) {
      if (errno == ENOENT || errno == ENOTDIR) return ConfigText{path, std::nullopt};
      return util::Error::from_errno("resolve " + path, errno);
    }
    const std::string real(buf);
    for (const auto& w : writable)
      if (util::path_within(real, w)) return beneath(w, real);
    auto text = util::read_untrusted_file(real, cap);
    if (!text) return text.take_error();
    return ConfigText{real, std::move(*text)};
  };
}

std::vector<std::string> host_config_files(const std::function<std::optional<std::string>(const char*)>& getenv,
                                           const std::string& home) {
  std::vector<std::string> out;
  auto set = [&](const char* name) {
    auto v = getenv(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  if (!set("GIT_CONFIG_NOSYSTEM")) out.push_back(set("GIT_CONFIG_SYSTEM").value_or("/etc/gitconfig"));
  if (auto global = set("GIT_CONFIG_GLOBAL")) {
    out.push_back(*global);
  } else {
    auto xdg = set("XDG_CONFIG_HOME");
    out.push_back((xdg && xdg->front() == '/' ? *xdg : home + "/.config") + "/git/config");
    out.push_back(home + "/.gitconfig");
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const std::string& p) { return p.empty() || p.front() != '/'; }),
            out.end());
  return out;
}

namespace {

class Scanner {
public:
  Scanner(const ScanLimits& limits, std::vector<std::string>& cut) : limits_(limits), cut_(cut) {}

  void root(const std::string& path) {
    auto fd = util::open_dir_nofollow(path);
    if (fd) dir(fd->get(), path, 0);
  }

  std::vector<Repository> take() { return std::move(found_); }

private:
  static bool has(int dirfd, const char* name, mode_t type) {
    struct stat st;
    return ::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == type;
  }
  // git's is_git_directory(): HEAD, objects/ and refs/.
  static bool is_git_dir(int dirfd) {
    return (has(dirfd, "HEAD", S_IFREG) || has(dirfd, "HEAD", S_IFLNK)) && has(dirfd, "objects", S_IFDIR) &&
           has(dirfd, "refs", S_IFDIR);
  }

  void add(std::string git_dir, std::string work_tree) {
    auto same = [&](const Repository& r) { return r.git_dir == git_dir; };
    if (std::none_of(found_.begin(), found_.end(), same)) found_.push_back({std::move(git_dir), std::move(work_tree)});
  }

  void stop(const std::string& where) {
    if (std::find(cut_.begin(), cut_.end(), where) == cut_.end()) cut_.push_back(where);
  }

  // Submodule git dirs: <git dir>/modules/<name>, where a name may hold
  // slashes.
  void modules(int gitfd, const std::string& git_dir, int depth) {
    auto mods = util::open_dir_beneath(gitfd, "modules");
    if (!mods) return;
    subdirs(mods->get(), git_dir + "/modules", depth, [&](int fd, const std::string& path, int d) {
      if (is_git_dir(fd)) {
        add(path, "");
        modules(fd, path, d);
      } else {
        modules_below(fd, path, d);
      }
    });
  }
  void modules_below(int fd, const std::string& path, int depth) {
    subdirs(fd, path, depth, [&](int inner, const std::string& p, int d) {
      if (is_git_dir(inner)) {
        add(p, "");
        modules(inner, p, d);
      } else {
        modules_below(inner, p, d);
      }
    });
  }

  // A directory that may hold repositories.
  void dir(int fd, const std::string& path, int depth) {
    if (is_git_dir(fd)) {  // a bare repository (or a git dir granted by itself)
      add(path, "");
      modules(fd, path, depth);
      return;
    }
    if (has(fd, ".git", S_IFDIR)) {
      if (auto git = util::open_dir_beneath(fd, ".git")) {
        add(path + "/.git", path);
        modules(git->get(), path + "/.git", depth);
      }
    }
    subdirs(fd, path, depth, [&](int inner, const std::string& p, int d) { dir(inner, p, d); });
  }

  // Calls `each` for every subdirectory of `fd` (never a symlink, never
  // .git or node_modules), one level deeper, within the bounds.
  template <typename F>
  void subdirs(int fd, const std::string& path, int depth, F&& each) {
    if (depth >= limits_.depth) {
      stop(path);
      return;
    }
    std::vector<std::string> names;
    util::for_each_entry(fd, [&](std::string_view name, unsigned char type) {
      if (entries_ >= limits_.entries) {
        stop(path);
        return false;
      }
      ++entries_;
      if (name == ".git" || name == "node_modules") return true;
      if (type == DT_DIR || (type == DT_UNKNOWN && has(fd, std::string(name).c_str(), S_IFDIR)))
        names.emplace_back(name);
      return true;
    });
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      auto inner = util::open_dir_beneath(fd, n);
      if (inner) each(inner->get(), path == "/" ? "/" + n : path + "/" + n, depth + 1);
    }
  }

  const ScanLimits& limits_;
  std::vector<std::string>& cut_;
  size_t entries_ = 0;
  std::vector<Repository> found_;
};

}  // namespace

std::vector<Repository> find_repositories(const std::vector<std::string>& roots, std::vector<std::string>& cut,
                                          const ScanLimits& limits) {
  Scanner s(limits, cut);
  for (const auto& r : roots) s.root(r);
  return s.take();
}

}  // namespace pj::git::protect
