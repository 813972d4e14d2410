// What this host offers: the kernel features `doctor` reports (facts
// about paths are view::probe_paths()). Reads only; changes nothing.
#pragma once

#include <string>
#include <vector>

#include "linuxjail/plan.h"
#include "runtime/host_report.h"
#include "util/result.h"

namespace pj::linuxjail {

using Check = runtime::Check;
using HostReport = runtime::HostReport;

// Everything `pi-jail doctor` reports; a throw-away jail proves it.
HostReport probe_host();

// The kernel's Landlock ABI version; 0 when Landlock is not built or not
// enabled at boot.
int landlock_abi();

// What Landlock ABI `abi` enforces, in one line.
std::string describe_landlock(int abi);

// The fix for a failure to create the jail's namespaces with `err`,
// naming the sysctl or LSM that refuses it on this host.
std::string namespace_fix(int err);

}  // namespace pj::linuxjail
