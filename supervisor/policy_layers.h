// Loading the policy layers for a run: the profile, the operator files,
// the command line, the project file; then resolve().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "policy/explain.h"
#include "policy/policy.h"

namespace pj::supervisor {

struct LoadedPolicy {
  std::vector<policy::Layer> layers;
  std::vector<policy::LayerInfo> info;
  std::vector<policy::Diagnostic> errors;  // loading errors (syntax, schema, unreadable)
  policy::Resolved resolved;
};

// Pi's agent directory: $PI_CODING_AGENT_DIR, else ~/.pi/agent.
std::string pi_agent_dir(const std::string& home);

// `workspace`, `home`, `cwd` are resolved absolute paths.
LoadedPolicy load_policy(const cli::Invocation& inv, const std::string& workspace, const std::string& home,
                         const std::string& cwd);

}  // namespace pj::supervisor
