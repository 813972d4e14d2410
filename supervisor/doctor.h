#pragma once

#include "runtime/host_report.h"

namespace pj::supervisor {

// `pi-jail doctor`: print the backend's checks (text or JSON); 0 when a
// jail can be built here, 1 when not.
int doctor(const runtime::HostReport& report, bool json);

}  // namespace pj::supervisor
