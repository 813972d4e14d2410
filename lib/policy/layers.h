// Loading the policy layers for a run: the built-in profile, the chosen
// profile, the operator files, the command line, the project file; then
// resolve(). Reads the operator files and the project file (capped, no
// link followed); changes nothing.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policy/explain.h"
#include "policy/policy.h"

namespace pj::policy {

struct LoadedPolicy {
  std::vector<Layer> layers;
  std::vector<LayerInfo> info;
  std::vector<Diagnostic> errors;  // loading errors (syntax, schema, unreadable)
  Resolved resolved;
  Context ctx;  // what `resolved` was resolved in (resolve again with more program needs)
};

// What the command line says of the policy: the profile, where the
// operator's file is, whether the project may ask, and the command
// line's own layer. Values as given; checked here, where each error
// names its option.
struct CommandLine {
  std::string profile = "pi";
  std::optional<std::string> config;  // replaces the operator file locations
  bool no_project_config = false;
  std::vector<std::string> allow_read, allow_write, deny, allow_net;
  std::vector<std::string> publish;               // --publish, checked by parse_publish
  std::vector<std::string> allow_net_presets;     // --allow-net-preset NAME
  std::vector<std::string> allow_ssh;             // --allow-ssh HOST[:PORT], checked by parse_ssh_host
  bool ephemeral_home = false;                    // --ephemeral-home: [home] persist = false
  std::optional<std::string> memory, pids, cpus;  // --memory, --pids, --cpus: [limits]
};

// Where a run's policy is anchored: the values of ~, ${home},
// ${workspace}, ${pi_jail_state}, ${pi_jail_data}, the profile's own
// variables, and what was found in the workspace.
struct Places {
  std::string workspace;  // resolved
  std::string home;       // $HOME as the jail will see it
  std::string cwd;
  std::optional<Worktree> worktree = {};  // checked (git/worktree.h)
  // pi-jail's own state and data directories; empty: under `home`.
  std::string state_dir = {}, data_dir = {};
  // The variables the profile's adapter defines (${pi_agent_dir}), and
  // those of them that name a directory the caller places.
  std::vector<std::pair<std::string, std::string>> vars = {};
  std::vector<PlacedDir> placed = {};
  // What the program to run needs (runtime::discover()); empty for explain.
  std::vector<ProgramNeed> program = {};
};

LoadedPolicy load_policy(const CommandLine& cl, const Places& places);

// resolve(layers, ctx), with ctx.realpath answered for the length of the
// call from one util::RealPaths: the resolution asks about the same few
// paths and their ancestors again and again, and changes nothing.
Resolved resolve_policy(const std::vector<Layer>& layers, const Context& ctx);

}  // namespace pj::policy
