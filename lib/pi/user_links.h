// The user's symlinks at the top of a private directory (Pi's agent dir):
// many keep settings.json or auth.json as a link into a dotfiles
// repository. Such a link is followed only to a regular file the user
// owns, reached without passing through anything the jail can write.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::pi {

// A top-level file that is the user's link to a regular file elsewhere:
// the jail gets a copy of the target, and write-back replaces the target,
// never the link.
struct UserLink {
  std::string text;    // what the link says (readlink), checked again before write-back
  std::string target;  // where it leads (resolved), for messages
  util::UniqueFd dir;  // the target's directory
  std::string name;    // the target's name there
};

// `path` resolved as realpath(3) does, one component at a time; an error
// when the walk enters any of `writable` (resolved paths), where a jail
// could retarget a link for the next run.
util::Result<std::string> resolve_outside(const std::string& path, const std::vector<std::string>& writable);

// The link `name` in the directory open at `dir` (host path `dir_path`),
// followed when it leads to a regular file the caller owns, of at most
// 1 MiB, outside `writable`; else an error saying why ("it leads to X,
// which is a FIFO").
util::Result<UserLink> follow_user_link(int dir, const std::string& dir_path, const std::string& name,
                                        const std::vector<std::string>& writable);

}  // namespace pj::pi
