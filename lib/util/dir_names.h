// Reading the names in a directory through an fd the caller already
// holds, without dup(2) and a DIR stream (fdopendir costs an fstat and
// two fcntl besides, and the dup a close).
#pragma once

#include <functional>
#include <string_view>

namespace pj::util {

// Calls `each` with every name in the directory open at `dirfd` (not
// "." or ".."), from its start, in the filesystem's order, until `each`
// returns false. Reads through `dirfd` itself: its offset moves (as it
// did through a dup). False when the directory cannot be read (then
// `each` may have seen some names).
bool for_each_name(int dirfd, const std::function<bool(std::string_view name)>& each);

// The same, with each entry's type as the directory itself records it
// (dirent's d_type: DT_REG, DT_DIR, DT_LNK, ...; DT_UNKNOWN where the
// filesystem does not say, and then only lstat tells). Costs no system
// call per entry.
bool for_each_entry(int dirfd, const std::function<bool(std::string_view name, unsigned char type)>& each);

}  // namespace pj::util
