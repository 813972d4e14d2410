// The end-of-run audit of the workspace's repository (DESIGN property 5).
// pi-jail keeps .git/hooks and .git/config read-only when they exist at
// start; a repository the jail creates (git init) or parts of one that
// did not exist (.git/modules/<name>/, .git/worktrees/<id>/) are the
// jail's to write, and the host's own git would later run what they say.
// snapshot() records what the repository looks like before the jail
// starts; audit() lists, after the jail is gone, every hook and
// command-running setting that is new or changed since, and every
// structural change (.git replaced by a symlink or a file, a commondir
// that appeared).
//
// Everything under the workspace is hostile input (property 6): nothing
// is followed through a symlink, no FIFO is opened for more than a
// non-blocking look, no file over a cap is read (each is a finding
// instead), the walk and the list are bounded, and every string in a
// Finding is already escaped (git::config::escape).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/json.h"

namespace pj::git::audit {

// Bounds on one snapshot or audit.
struct Limits {
  size_t findings = 40;            // listed; the rest are counted
  size_t entries = 20000;          // directory entries looked at, in all
  size_t files_read = 64;          // config and pointer files read
  size_t file_bytes = 256 * 1024;  // one config file, at most
  int module_depth = 6;            // .git/modules/a/modules/b/...
};

// What an audited object was at snapshot time: enough to tell a change
// (a rename, a rewrite, a chmod) without reading it.
struct Stamp {
  mode_t mode = 0;  // type and permissions, from lstat
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  long mtime_s = 0, mtime_ns = 0, ctime_s = 0, ctime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

struct Finding {
  std::string path;  // workspace-relative, escaped
  int line = 0;      // in a config file; 0 when none
  std::string key;   // a config key, escaped; empty when none
  std::string what;  // what it is and why it matters (values escaped)
};

struct Audit {
  std::vector<Finding> findings;  // at most Limits::findings
  size_t unlisted = 0;            // found beyond that
  bool empty() const { return findings.empty() && unlisted == 0; }
};

// A path outside the workspace's own .git that the run kept read-only
// because git runs or reads it (git/protect.h): audited as well, by
// what it is to git.
struct Watch {
  enum class What { hooks_dir, config, commondir, program };
  std::string root;  // the writable place holding it, resolved (never followed below)
  std::string rel;   // below `root`
  What what;
};

class Snapshot {
public:
  // False when the workspace could not be looked at: audit() then treats
  // everything it finds as new.
  bool taken() const { return taken_; }

private:
  friend Snapshot snapshot(std::string_view workspace, const std::vector<Watch>& watched, const Limits& limits);
  friend Audit audit(std::string_view workspace, const Snapshot& before, const std::vector<Watch>& watched,
                     const Limits& limits);
  bool taken_ = false;
  // workspace-relative path (absolute for a watched path elsewhere) -> stamp
  std::map<std::string, Stamp> objects_;
};

// Before the jail starts. Reads no file content, only directory entries
// and lstat data. `watched`: the paths besides the workspace's .git.
Snapshot snapshot(std::string_view workspace, const std::vector<Watch>& watched = {}, const Limits& limits = {});

// After the jail is gone: what is new or changed since `before`, with
// the same `watched` paths.
Audit audit(std::string_view workspace, const Snapshot& before, const std::vector<Watch>& watched = {},
            const Limits& limits = {});

// The warning block on stderr, printed whatever the verbosity (-q too):
// a security finding is never quiet. Nothing when `a` is empty.
void print(const Audit& a, std::string_view workspace);

// The report's "repository_audit" array.
void write_json(util::JsonWriter& j, const Audit& a);

}  // namespace pj::git::audit
