// A trusted, read-only compile cache for Node programs: a jail starts
// Node without compiling its sources again.
//
// Node keeps compiled code in NODE_COMPILE_CACHE; a jail's /tmp is empty
// every run, so a jailed Pi compiles its ~9 MB of JavaScript each time. A
// cache the jail could write would poison every later run (compiled code
// is code), so the cache a session reads is written only by a warm-up jail
// that sees nothing the jail controls: the installation read-only, an
// empty cache directory writable, no workspace, no agent dir, no network,
// a minimal environment. Sessions get it read-only.
//
// Keyed by the installation: (device, inode, size, mtime, ctime) of the
// Node binary, the script and its package.json, so that upgrading Node or
// the program (npm writes new files) never reuses a stale cache. ctime
// cannot be set from user space, so `touch -d` cannot fake an old key.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/program.h"
#include "runtime/request.h"
#include "util/result.h"

namespace pj::runtime::compile_cache {

// Whether `p` is a script whose #! interpreter is Node ("node", "nodejs",
// "node22", ...).
bool is_node_program(const Program& p);

// The package.json of the package holding `script`: the nearest one above
// it, not climbing out of a node_modules tree; "" when there is none.
std::string package_json_of(const std::string& script);

// The installation's key (32 hex digits); nullopt when a file cannot be
// stat'ed.
std::optional<std::string> installation_key(const Program& p);

// Where caches live: $XDG_CACHE_HOME/pi-jail/compile-cache, else
// ~/.cache/pi-jail/compile-cache (`home` is $HOME); "" when neither is an
// absolute path.
std::string cache_root(const char* xdg_cache_home, const std::string& home);

// Why the jail could write one of `paths` (the installation, the cache):
// it lies inside, or holds, the workspace or a read-write grant of `r`;
// "" when it cannot.
std::string writable_in_jail(const Request& r, const std::vector<std::string>& paths);

// How a warm-up ended: the cache was made; the program failed (status,
// timeout: not tried again for this installation); or not now (the jail
// could not be built: tried again next run).
enum class Warmed { made, program_failed, not_now };
struct WarmUpOutcome {
  Warmed warmed = Warmed::not_now;
  std::string why;  // unless made
};

// Runs the warm-up jail with `dir` (resolved) as its one writable
// directory. An error is for the whole run, not the cache (the user
// stopped the warm-up: Error::stopped_by_signal()): ensure() returns it
// as it is.
using WarmUp = std::function<util::Result<WarmUpOutcome>(const std::string& dir)>;

// The cache directory for `key` under `root` (resolved path), made by
// `warm_up` when missing: into a fresh temporary directory under an
// exclusive lock, renamed into place only when the warm-up succeeded, so
// concurrent first runs make it once and a killed warm-up leaves nothing
// that is used (its leftovers are removed by the next warm-up). A warm-up
// whose program failed leaves KEY.failed, and is not tried again for that key;
// one the user stopped (an error) leaves nothing, and is tried again. The
// directory above pi-jail/ must be the caller's or root's, and writable by
// others only when sticky; `root` and
// everything below it must be real directories (no symlink on the way)
// owned by the caller and writable by nobody else; otherwise this refuses
// and says why.
util::Result<std::string> ensure(const std::string& root, const std::string& key, const WarmUp& warm_up);

}  // namespace pj::runtime::compile_cache
