// The Linux side of the compile cache (runtime/compile_cache.h): the
// warm-up jail that writes it, and the session's read-only view of it.
#pragma once

#include "linuxjail/plan.h"
#include "prepare.h"
#include "util/result.h"

namespace pj::supervisor {

// Run mode: when the policy keeps the compile cache on and the program is
// a Node script whose installation the jail cannot write, find (or make,
// with a warm-up jail) its cache, then grant it to `in` read-only and
// point NODE_COMPILE_CACHE at it. Any problem is said and the run goes on
// without the cache: it only ever costs start-up time. Fails only when a
// termination signal (INT, TERM, ...) stopped the warm-up
// (Error::stopped_by_signal: pi-jail ends with 128+N): the user meant to
// stop the whole run, and nothing else is to run.
util::Status attach_compile_cache(const Prepared& prepared, linuxjail::PlanInput& in);

}  // namespace pj::supervisor
