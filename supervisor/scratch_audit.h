// What a run wrote into the jail's scratch places (/tmp, /var/tmp,
// /dev/shm: one tmpfs that ends with the run), said in one line at the
// end so that work left there does not vanish without a word.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pj::supervisor::scratch {

struct Discarded {
  std::uint64_t files = 0;  // everything but directories: files, links, FIFOs, ...
  std::uint64_t bytes = 0;  // their sizes (st_size)
  bool capped = false;      // the walk stopped at kMaxEntries or kMaxDepth
  // The top-level entries that hold something, largest first: path, bytes, files.
  struct Top {
    std::string path;
    std::uint64_t bytes = 0, files = 0;
  };
  std::vector<Top> top;
};

inline constexpr std::uint64_t kMaxEntries = 100000;
inline constexpr int kMaxDepth = 64;

// Walk each directory fd (named by the path it has inside the jail)
// without following a link and without crossing into another mount
// (the workspace or a grant mounted below /tmp is not scratch). The
// names are the jail's: the caller escapes them (discarded_line does).
Discarded survey(const std::vector<std::pair<std::string, int>>& dirs);

// "the jail wrote N files (SIZE) outside the workspace, in places
// discarded now: /tmp/a (SIZE), ..." with at most `shown` paths,
// escaped and cut; "" when nothing was written.
std::string discarded_line(const Discarded& d, size_t shown = 3);

}  // namespace pj::supervisor::scratch
