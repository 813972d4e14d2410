// From the command line and the caller's environment to the planner's
// input: the workspace, the program to run, $HOME, grants.
#pragma once

#include <string>
#include <string_view>

#include "cli.h"
#include "git/audit.h"
#include "netproxy/rules.h"
#include "policy/layers.h"
#include "runtime/profile_adapter.h"
#include "runtime/program.h"
#include "runtime/request.h"
#include "util/result.h"

namespace pj::supervisor {

struct Prepared {
  runtime::Request request;  // what every backend plans from
  policy::LoadedPolicy policy;
  netproxy::Rules rules;     // the network filter's, from the policy
  runtime::Program program;  // run mode: what is executed and what it needs
  // Which directories a run makes in a hidden part of a private directory
  // join the host's (the pi profile: session directories of this
  // workspace's subdirectories); empty: none.
  runtime::KeepNew keep_new_dirs;
  // What the host's git runs or reads beyond the workspace's .git, kept
  // read-only in the jail: audited when the run ends.
  std::vector<git::audit::Watch> git_watch;
  // Pi runs and fd or rg is out of its reach: Pi tries to download them
  // from github.com (the exit summary proposes no rule for that).
  bool pi_downloads_tools = false;
  // The jailed program's package commands are refused inside at once
  // (Pi under the pi profile: the pi guard, jail_notes.h).
  bool pi_guard = false;
};

// Resolve everything a backend's planner needs: workspace, program,
// policy layers, and what the profile adds (runtime/profile_adapter.h);
// backend-specific switches are the backend's to read. Reads the
// filesystem (stat, realpath, PATH search, the policy files) and makes
// what a jail needs that is missing: the profile's own directory (Pi's
// agent dir), the jail home, and for a run the workspace's session
// directories. An error's exit kind is the exit status it maps to: the
// command not found (127) or not executable (126), anything else 125;
// policy problems are all in the message.
util::Result<Prepared> prepare(const cli::PrepareInput& inv);

// The default workspace: the nearest ancestor of `cwd` holding `.git`,
// else `cwd` itself.
std::string default_workspace(const std::string& cwd);

}  // namespace pj::supervisor
