// Where Pi keeps its agent dir: $PI_CODING_AGENT_DIR when it is an
// absolute path, else ~/.pi/agent (pi-coding-agent's getAgentDir).
#pragma once

#include <string>

namespace pj::pi {

// The agent dir as Pi would find it for `home`, normalised, not resolved.
std::string agent_dir(const std::string& home);

}  // namespace pj::pi
