// The network filter process (DESIGN "Process model", "Network"): the
// supervisor execs its own executable afresh with --network-filter, the
// control socket (filterlink/channel.h) as fd 3 and an empty environment,
// so that nothing of the supervisor's memory (withheld secrets) is
// carried over: on Linux as a clone of itself named pi-jail-filter, on
// macOS through sandbox-exec under the filter's own Seatbelt profile
// (seatbelt/filter_profile.h). The filter receives its configuration,
// starts the relay (netproxy::Proxy), locks down (lockdown.h), says ready,
// then serves the listeners it is given (a run-time one until it is told
// to close it, which it says it did) until told to stop or until the
// supervisor is gone. It opens no file after its start (the trust anchors
// come as descriptors; on macOS none at all but what the loader maps).
// Names are asked of the supervisor, decisions are sent to it (which logs
// and reports them), and it writes nothing of the host's.
#pragma once

#include "filterlink/process.h"

namespace pj::filterproc {

// The filter's main(): 0 after `stop` or the supervisor's end, 2 when fd 3
// is not a control socket (the command line is not for people), 125 when
// it could not start (said to the supervisor as a failure message, and
// on stderr).
int network_filter_main();

}  // namespace pj::filterproc
