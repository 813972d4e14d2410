// The platform's jail behind one interface: the Linux namespace jail
// (linux_backend.cc) or the macOS Seatbelt jail (seatbelt_backend.cc).
// Each pi-jail executable links exactly one; the command line, the
// policy, explain's policy part, the network filter's rules and the
// report are common (main.cc, prepare.cc, report.cc).
#pragma once

#include "cli.h"
#include "prepare.h"
#include "report.h"
#include "run.h"
#include "runtime/host_report.h"

namespace pj::supervisor::backend {

// Which jail this executable builds: "linux" or "macos-seatbelt" (in
// `explain --json` and in --report).
extern const char* const kName;

// What `doctor` checks on this host (test builds: with the stand-ins `inv` names).
runtime::HostReport probe_host(const cli::Invocation& inv);

// Plan the jail for `prepared` and then, in run mode, run the command in
// it and supervise it to the end; in explain mode, print the jail's view.
// Fills `content` (the backend's part of the report) as it goes.
RunOutcome plan_and_run(const cli::Invocation& inv, Prepared& prepared, Report::Content& content);

}  // namespace pj::supervisor::backend
