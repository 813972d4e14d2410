#pragma once

#include "runtime/host_report.h"

namespace pj::supervisor {

// What says this process already runs inside a pi-jail jail.
struct JailEvidence {
  bool pi_jail_env = false;   // PI_JAIL=1, set in every jail's environment
  bool no_new_privs = false;  // set in every jail; unknown counts as set
};
JailEvidence jail_evidence();

// `pi-jail doctor`: print the backend's checks (text or JSON); 0 when a
// jail can be built here, 1 when not. Inside a jail it says so, and leaves
// out the host's fixes, which would not apply.
int doctor(const runtime::HostReport& report, bool json, const JailEvidence& evidence);

}  // namespace pj::supervisor
