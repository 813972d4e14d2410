// Lexical path helpers. They never touch the filesystem: symlinks are the
// caller's business (resolve on the host, then verify inodes in the jail).
#pragma once

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

}  // namespace pj::util
