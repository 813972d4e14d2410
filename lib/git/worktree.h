// Finding a git worktree in the workspace without trusting it: the
// workspace is written by the jail, so its `.git` file is a claim, not a
// grant. It is believed only when git itself would believe it.
#pragma once

#include <optional>
#include <string>

#include "policy/policy.h"

namespace pj::git {

// `workspace` and `home` resolved. The worktree whose `.git` file is at
// the top of `workspace`, when all of these hold (git's own checks, see
// git-worktree(1) "DETAILS"):
//   - `.git` is a regular file of at most 4 KiB, "gitdir: PATH";
//   - PATH is a directory <common>/worktrees/<name>, whose `gitdir` file
//     names this `.git` file back (the link `git worktree add` writes),
//   - and whose `commondir` names <common>, a git dir (HEAD, objects/,
//     refs/) that is neither $HOME nor an ancestor of it.
// Nothing is followed or read that could block (util/untrusted.h). When
// `.git` is a file but the claim fails, `why_not` says why (the caller
// warns: the worktree's repository then stays outside the jail).
std::optional<policy::Worktree> find_worktree(const std::string& workspace, const std::string& home,
                                              std::string& why_not);

}  // namespace pj::git
