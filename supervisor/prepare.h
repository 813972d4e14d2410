// From the command line and the caller's environment to the planner's
// input: the workspace, the program to run, $HOME, grants.
#pragma once

#include <string>
#include <string_view>

#include "cli.h"
#include "git/audit.h"
#include "netproxy/rules.h"
#include "policy_layers.h"
#include "private_dirs.h"
#include "runtime/program.h"
#include "runtime/request.h"
#include "util/result.h"

namespace pj::supervisor {

// Why preparing failed: the command could not be found (exit 127) or
// anything else (exit 125).
enum class PrepareFailure { not_found, not_executable, other };

struct Prepared {
  runtime::Request request;  // what every backend plans from
  LoadedPolicy policy;
  netproxy::Rules rules;  // the network filter's, from the policy
  runtime::Program program;  // run mode: what is executed and what it needs
  // Which directories a run makes in a hidden part of a private directory
  // join the host's (the pi profile: session directories of this
  // workspace's subdirectories); empty: none.
  KeepNew keep_new_dirs;
  // What the host's git runs or reads beyond the workspace's .git, kept
  // read-only in the jail: audited when the run ends.
  std::vector<git_audit::Watch> git_watch;
  // Pi runs and fd or rg is out of its reach: Pi tries to download them
  // from github.com (the exit summary proposes no rule for that).
  bool pi_downloads_tools = false;
  // The jailed program is Pi under the pi profile: inside, its package
  // commands are refused at once (the pi guard, jail_notes.h).
  bool pi_guard = false;
};

// Resolve everything a backend's planner needs: workspace, program,
// policy layers (backend-specific switches are the backend's to read). Touches the filesystem (stat, realpath, PATH search, reading
// policy files) but changes nothing. On failure, `failure` says which
// exit status it maps to; policy problems are all in the message.
util::Result<Prepared> prepare(const cli::Invocation& inv, PrepareFailure& failure);

// The default workspace: the nearest ancestor of `cwd` holding `.git`,
// else `cwd` itself.
std::string default_workspace(const std::string& cwd);

// Why Pi's package command `command` (install, remove, uninstall, update)
// is refused in a jail, and how to run it outside: one sentence, said
// before a jailed `pi install` starts and by the pi guard inside
// (jail_notes.h).
std::string pi_package_refusal(std::string_view command);

}  // namespace pj::supervisor
