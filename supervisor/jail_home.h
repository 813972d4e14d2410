// The jail home: what a jailed command sees as $HOME. Never the real home
// (its ~/.ssh, ~/.aws, shell history and tokens stay out): each workspace
// has its own directory, kept by pi-jail between runs, so tool caches
// (~/.npm, ~/.cache/pip, ~/.cargo/registry) and tool settings persist.
//
//   $XDG_DATA_HOME/pi-jail/homes/<basename>-<hash>/   (else ~/.local/share/...)
//   $XDG_DATA_HOME/pi-jail/homes/<basename>-<hash>.workspace
//
// The .workspace file (beside, out of the jail's sight) holds the
// workspace's canonical path: a name shared by two workspaces (a hash
// collision, or a directory moved and a new one made there) is refused,
// never shared. Everything in a jail home was written by a jail of that
// workspace: it is as trusted as the workspace itself, and pi-jail reads
// nothing from it. `[home] persist = false` or --ephemeral-home gives the
// run a home of its own on the scratch file system instead.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace pj::supervisor {

// "<basename>-<16 hex digits>" for a canonical workspace path: the
// basename cut to 32 bytes of [A-Za-z0-9._-] (others become '_'), the
// hash FNV-1a 64 of the whole path. Pure.
std::string jail_home_name(std::string_view workspace);

// pi-jail's data directory: $XDG_DATA_HOME/pi-jail when absolute, else
// $HOME/.local/share/pi-jail; "" when neither is absolute.
std::string data_dir();

// The workspace's jail home under `data_dir`, made if missing (every
// component 0700, none a symlink), and checked: a directory owned by the
// caller that no one else can write, recorded for this workspace. The
// resolved path; the error names the directory and the fix.
util::Result<std::string> prepare_jail_home(const std::string& data_dir, const std::string& workspace);

// What the jail's setup puts at a path: a mount of a directory or of a
// file, or a symlink (which needs the path free).
enum class MountNode { directory, file, symlink };

// Before a run: each mount destination below $HOME (`dests`: jail paths)
// must be reachable in the jail home `jail_home` (shown at `home`)
// without a symlink, or the mount fails (the jail's setup never follows
// one). What an earlier run left on the way, a symlink or a non-directory
// where a directory is needed, or anything but a directory where a
// symlink is to be made (an earlier run's own), is removed, never
// followed (unlinkat beneath fds opened O_NOFOLLOW). The returned notes
// name what was removed. A jail of the same workspace running at the same
// time can put one back; the mount then fails closed.
std::vector<std::string> clear_mount_paths(const std::string& jail_home, const std::string& home,
                                           const std::vector<std::pair<std::string, MountNode>>& dests);

}  // namespace pj::supervisor
