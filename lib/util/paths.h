// Lexical path helpers. They never touch the filesystem: symlinks are the
// caller's business (resolve on the host, then verify inodes in the jail).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace pj::util {

// Make `path` absolute against `base` (itself absolute) and normalise it:
// no "." or empty components, ".." folded. A ".." that would climb above
// "/" is an error, not a silent clamp.
Result<std::string> normalize_path(std::string_view path, std::string_view base = "/");

// True when `path` is `root` or lies below it (both normalised).
bool path_within(std::string_view path, std::string_view root);

// "/a/b/c" -> {"a", "b", "c"}; "/" -> {}.
std::vector<std::string_view> path_components(std::string_view normalized);

// "/a/b" -> "/a"; "/a" -> "/".
std::string_view parent_path(std::string_view normalized);

// Whether a file's mode bits alone let `uid` (with groups `gids`) write
// to it: owner bits for its owner, group bits for a member of its group,
// else the other bits. No capability counts: a jail has none, so root
// there writes only where these bits say (a CI runner's root on another
// user's checkout cannot).
bool mode_grants_write(uid_t owner, gid_t group, mode_t mode, uid_t uid, const std::vector<gid_t>& gids);

}  // namespace pj::util
