// What the host offers the Seatbelt backend: `doctor`'s checks, the
// run's private TMPDIR, and what the network filter's profile must let
// the loader read (this executable and its libraries). POSIX only.
#pragma once

#include <string>
#include <vector>

#include "runtime/host_report.h"
#include "seatbelt/plan.h"
#include "util/result.h"

namespace pj::seatbelt {

// `doctor`: is this macOS, is `sandbox_exec` there, and does it accept
// the base profile (a throw-away run of /usr/bin/true under it).
runtime::HostReport probe_host(const std::string& sandbox_exec);

// A new private directory (0700) under `parent` for the run's TMPDIR;
// returns its real path.
util::Result<std::string> make_private_dir(const std::string& parent);

// This executable's real path (the network filter is it, exec'd afresh):
// _NSGetExecutablePath on macOS, /proc/self/exe elsewhere; resolved.
util::Result<std::string> own_executable();

// The real paths of the shared libraries this process has mapped (the
// filter, the same executable, maps the same): dyld's images on macOS,
// dl_iterate_phdr elsewhere. The executable itself is not among them.
std::vector<std::string> loaded_libraries();

// Remove `path` and everything in it without following symlinks, even if
// the tree changes underneath (every step is relative to an open
// directory, opened O_NOFOLLOW). Best effort: what cannot be removed stays.
void remove_tree(const std::string& path);

}  // namespace pj::seatbelt
