// The Linux supervisor: launch the namespace jail for a JailSpec and
// supervise it (signals, terminal, network filter, timeout) to the end.
#pragma once

#include <functional>

#include "linuxjail/cgroup.h"
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
// `cgroups`: the run's cgroups, which the jail's init joins before it
// forks anything (the caller keeps the files open). `once_ended`, when set,
// is called once nothing of the jail runs any more, before its init is
// reaped: as soon as init says so (kControlEnded), while the kernel still
// ends init, or else after init is gone. Not called when the jail could
// not be launched.
RunOutcome run_jailed(const linuxjail::JailSpec& spec, const RunOptions& opts,
                      const linuxjail::cgroup::JoinFiles& cgroups = {}, const std::function<void()>& once_ended = {});

}  // namespace pj::supervisor
