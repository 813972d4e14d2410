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
  policy::Context ctx;  // what `resolved` was resolved in (resolve again with more program needs)
};

// Pi's agent directory: $PI_CODING_AGENT_DIR, else ~/.pi/agent.
std::string pi_agent_dir(const std::string& home);

// Where a run's policy is anchored: the values of ~, ${home},
// ${workspace} and ${pi_agent_dir}, and what was found in the workspace.
struct Places {
  std::string workspace;  // resolved
  std::string home;       // $HOME as the jail will see it
  std::string cwd;
  std::string agent_dir;  // resolved when it exists (the pi profile makes it)
  std::optional<policy::Worktree> worktree;  // checked (git/worktree.h)
  // What the program to run needs (runtime::discover()); empty for explain.
  std::vector<policy::ProgramNeed> program = {};
};

LoadedPolicy load_policy(const cli::Invocation& inv, const Places& places);

// policy::resolve(layers, ctx), with ctx.realpath answered for the length
// of the call from one util::RealPaths: the resolution asks about the same
// few paths and their ancestors again and again, and changes nothing.
policy::Resolved resolve_policy(const std::vector<policy::Layer>& layers, const policy::Context& ctx);

}  // namespace pj::supervisor
