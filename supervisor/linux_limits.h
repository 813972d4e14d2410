// The Linux jail's resource limits, as this host can enforce them: the
// process limit by RLIMIT_NPROC inside the jail's user namespace (and a
// pids cgroup where one is delegated; for root, whose tasks the kernel
// exempts from RLIMIT_NPROC, the pids cgroup is the only way), memory and
// CPU by cgroups the operator delegates (`[limits] cgroup`). A limit that
// was asked for and cannot be enforced stops the run before anything runs.
#pragma once

#include <cstdint>
#include <optional>

#include "linuxjail/cgroup.h"
#include "run.h"
#include "runtime/request.h"
#include "util/result.h"

namespace pj::supervisor {

struct JailLimits {
  std::optional<linuxjail::cgroup::RunCgroups> cgroups;  // removed when this goes
  std::vector<ResourceUse::Limit> limits;                // for the report
};

util::Result<JailLimits> prepare_limits(const runtime::Request& r);

// The cgroups' counts into `use` (after the jail has ended).
void add_usage(const JailLimits& l, ResourceUse& use);

}  // namespace pj::supervisor
