// The platform's jail behind one interface: the Linux namespace jail
// (linux_backend.cc) or the macOS Seatbelt jail (seatbelt_backend.cc).
// Each pi-jail executable links exactly one; the command line, the
// policy, explain's policy part, the network filter's rules and the
// report are common (main.cc, prepare.cc, report.cc).
#pragma once

#include <memory>

#include "cli.h"
#include "prepare.h"
#include "report.h"
#include "run.h"
#include "runtime/host_report.h"

namespace pj::supervisor::backend {

// Which jail this executable builds: "linux" or "macos-seatbelt" (in
// `explain --json` and in --report).
extern const char* const kName;
// Whether this backend keeps credentials outside the jail (placeholders
// inside, the real values on the filter's side): Linux does; the Seatbelt
// backend passes what the policy passes as it is (README, Platforms).
extern const bool kKeepsCredentialsOutside;

// The network filter process's main() (filterproc/filter.h), where this
// backend has one; elsewhere a sentence and exit status 2.
int network_filter();

// What `doctor` checks on this host (test builds: with the stand-ins `inv` names).
runtime::HostReport probe_host(const cli::BackendSwitches& inv);

// A planned jail, ready to run: what differs between the backends. The
// common pipeline (main.cc) owns the rest: the run's options, the
// repository's snapshot before and audit after, the refusal summary and
// the report.
class Jail {
public:
  Jail() = default;
  Jail(const Jail&) = delete;
  Jail& operator=(const Jail&) = delete;
  virtual ~Jail() = default;
  // Hand the run's options what the plan made (the credential filter,
  // published ports) and make what must exist before the command starts
  // (Linux: the resource limits). An error is not said yet: the caller
  // says it as the set-up step that failed.
  virtual util::Status ready(RunOptions& opts) = 0;
  // Start the command in the jail (the network filter first), supervise
  // it to its end (signal delivery, terminal ownership, --timeout), reap
  // it, then say what only this backend knows (resources, write-back).
  virtual RunOutcome run(const RunOptions& opts) = 0;
};

// Plan the jail for `prepared`. In run mode: the jail, ready to run. In
// explain mode: the jail's view printed, and no jail (nullptr). An error
// was said already (the step and its fix, on stderr); its exit kind is
// the run's exit status. Fills `content` (the backend's part of the
// report) as it goes.
util::Result<std::unique_ptr<Jail>> plan(const cli::BackendInput& inv, Prepared& prepared, Report::Content& content);

}  // namespace pj::supervisor::backend
