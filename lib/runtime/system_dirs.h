// Directories a run may never make writable: the trees of the system
// itself, the directories everybody shares, and the kernel's
// pseudo-filesystems. The workspace and a profile's own writable
// directory (Pi's agent dir) are checked here before anything is made.
#pragma once

#include <string>

namespace pj::runtime {

// Why `dir` (resolved) cannot be granted read-write, or "".
std::string system_dir_problem(const std::string& dir);

}  // namespace pj::runtime
