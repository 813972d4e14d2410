// The pi profile's adapter (runtime/profile_adapter.h): Pi's agent dir
// made and resolved, this workspace's sessions shown, fd and rg found,
// PI_CODING_AGENT_DIR set inside, the ports of Pi's login callbacks
// named (runtime::Request::login_callbacks), Pi's package commands and
// other projects' sessions stopped before Pi starts. The one place that chooses
// an adapter by the profile's name.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "policy/policy.h"
#include "runtime/profile_adapter.h"

namespace pj::pi {

// The adapter of `profile` (a built-in name or a file): Pi's for "pi";
// for every other, one that only defines ${pi_agent_dir} (unmade), which
// a profile file may name.
std::unique_ptr<runtime::ProfileAdapter> profile_adapter(std::string_view profile);

// ${pi_agent_dir} as a directory the caller places (policy::PlacedDir).
policy::PlacedDir agent_dir_placed();

// Why Pi's package command `command` (install, remove, uninstall, update)
// is refused in a jail, and how to run it outside: one sentence, said
// before a jailed `pi install` starts and by the pi guard inside.
std::string package_refusal(std::string_view command);

}  // namespace pj::pi
