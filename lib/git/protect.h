// What the host's git would run or read as configuration from a place
// the jail can write (DESIGN property 5), asked of git's own
// configuration rather than taken from a fixed list: for every
// repository the jail can write (the workspace's, nested ones, git dirs
// inside a writable grant such as a bare remote for `git push`), its
// hooks directory, config, config.worktree and commondir; the hooks
// directory its config names (core.hooksPath); every config file it
// includes (include.path and includeIf.*.path, whatever the condition:
// the jail could make an onbranch: condition hold); and the scripts that
// command-running keys name (git::config::command_reason) when they lie
// in a writable place.
//
// plan() is pure: it reads config through the injected ReadConfig and
// only ever returns read-only protections, which can only narrow the
// view; nothing read from a config file becomes a grant. The config
// files read may be jail-written (property 6): read_config() reads them
// only through util/untrusted.h, never through a symlink, capped.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace pj::git::protect {

// A repository the host's git may use.
struct Repository {
  std::string git_dir;    // absolute, normalised
  std::string work_tree;  // absolute; empty for a bare repository
};

// What a protected path is to git, which decides its placeholder and
// what the end-of-run audit looks for.
enum class Part {
  hooks_dir,  // a directory of hooks git runs
  config,     // a file git reads as config
  commondir,  // a git dir's pointer to where its config and hooks are
  program,    // a script a config key makes git run
};

struct Protection {
  std::string path;  // absolute, normalised
  Part part;
  std::string why;
};

// A config file as read: `path` is where it was read (a file outside
// every writable place, resolved through its symlinks; one inside, as
// named: never followed); `text` is nullopt when there is no such file.
struct ConfigText {
  std::string path;
  std::optional<std::string> text;
};
using ReadConfig = std::function<util::Result<ConfigText>(const std::string& path)>;

struct Inputs {
  std::vector<std::string> writable;      // the places the jail can write, resolved
  std::vector<std::string> host_configs;  // system and global config files, absolute
  std::vector<Repository> repositories;
  std::string home;  // for "~/" in config paths
};

// Bounds on one plan.
struct Limits {
  size_t files = 1024;     // config files read, in all (each repository's own count)
  int include_depth = 10;  // git's own limit (config.c MAX_INCLUDE_DEPTH)
  size_t words = 32;       // words of one command looked at
};

struct Plan {
  std::vector<Protection> protections;  // each path once, in discovery order
  // Config files that could not be read (a symlink or FIFO inside a
  // writable place, over the cap, more files than the bound): the run
  // cannot say what git would run, so it stops (exit 125).
  std::vector<std::string> problems;
};

[[nodiscard]] Plan plan(const Inputs& in, const ReadConfig& read, const Limits& limits = {});

// ReadConfig for the host: a path inside one of `writable` is read
// beneath that place with util::read_untrusted_file (no symlink anywhere
// below it, no FIFO, at most `cap` bytes); any other path is the
// operator's file, resolved (realpath) and then read the same way.
ReadConfig host_reader(std::vector<std::string> writable, size_t cap = 256 * 1024);

// The system and global config files the host's git reads, in its order
// (git-config(1) FILES; GIT_CONFIG_NOSYSTEM, GIT_CONFIG_SYSTEM,
// GIT_CONFIG_GLOBAL and XDG_CONFIG_HOME as git reads them), from
// `getenv` and `home`.
std::vector<std::string> host_config_files(const std::function<std::optional<std::string>(const char*)>& getenv,
                                           const std::string& home);

// Bounds on the search for repositories below the writable places.
struct ScanLimits {
  int depth = 6;           // directories below each writable place
  size_t entries = 50000;  // directory entries looked at, in all
};

// Every repository at or below each of `roots` (resolved directories the
// jail can write): a directory holding a `.git` directory, a directory
// that is a git dir itself (HEAD, objects/, refs/: a bare repository),
// and the submodule git dirs in a git dir's modules/. Never follows a
// symlink; does not descend into node_modules (package managers unpack
// there, and a checkout there is not one the user's git runs in) or a
// git dir's objects. Where a bound stops it, `cut` names the place.
std::vector<Repository> find_repositories(const std::vector<std::string>& roots, std::vector<std::string>& cut,
                                          const ScanLimits& limits = {});

}  // namespace pj::git::protect
