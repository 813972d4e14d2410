// The Linux supervisor: launch the namespace jail for a JailSpec and
// supervise it (signals, terminal, network filter, timeout) to the end.
#pragma once

#include "linuxjail/spec.h"
#include "run.h"

namespace pj::supervisor {

// The signals the supervisor handles itself. Block them (before cloning
// the jail) with block_handled_signals().
void block_handled_signals();

// If any of fds 0-2 is a terminal: the command gets a PTY of the jail's
// own on each of them, never the real terminal (fills spec.terminal from
// the outer terminal). Otherwise streams pass through.
void choose_streams(linuxjail::JailSpec& spec);

// Launch the jail for `spec` and supervise it until it ends.
// `cgroup_procs`: the run's cgroups' cgroup.procs files, which the jail's
// init joins first (the caller keeps them open).
RunOutcome run_jailed(const linuxjail::JailSpec& spec, const RunOptions& opts, std::vector<int> cgroup_procs = {});

}  // namespace pj::supervisor
