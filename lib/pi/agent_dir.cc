#include "pi/agent_dir.h"

#include <cstdlib>

#include "util/paths.h"

namespace pj::pi {

std::string agent_dir(const std::string& home) {
  const char* dir = std::getenv("PI_CODING_AGENT_DIR");
  if (dir && *dir == '/') {
    auto norm = util::normalize_path(dir);
    if (norm) return *norm;
  }
  return home + "/.pi/agent";
}

}  // namespace pj::pi
