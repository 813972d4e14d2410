// What `pi-jail doctor` reports about a host, the same shape for every
// backend: one check per requirement, and whether a jail can be built.
#pragma once

#include <string>
#include <vector>

namespace pj::runtime {

struct Check {
  std::string name;
  enum class State { ok, missing, info } state;
  std::string detail;  // what was found
  std::string fix;     // what to do when missing
};

// `jail_possible` is true only when every required check passed, proven
// by building a throw-away jail.
struct HostReport {
  std::vector<Check> checks;
  bool jail_possible = false;
};

}  // namespace pj::runtime
