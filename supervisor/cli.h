// The command line: argv -> Invocation (plain data), and the part of it
// each stage of a run reads.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policy/layers.h"
#include "util/log.h"
#include "util/result.h"

namespace pj::cli {

enum class Mode { run, explain, doctor, shell_init, help, version };

// Running with no isolation is a named, explicit choice.
enum class Isolation { jail, unsandboxed };

// Each stage of a run reads its own part of the command line: what it
// is not given, it cannot depend on, and a test builds that part alone.
// The test-only fields exist only in builds made with
// -Dtest_switches=true (PJ_TEST_SWITCHES): a release build has neither
// them nor their options, so no code path of it can reach them.

// What supervisor::prepare() reads: what is being prepared, the
// workspace, the command, and what the command line says of the policy.
struct PrepareInput {
  Mode mode = Mode::run;  // run or explain
  Isolation isolation = Isolation::jail;
  std::optional<std::string> workspace;  // -w DIR; default: the git top level
  policy::CommandLine policy;
  std::vector<std::string> command;  // run: COMMAND [ARG...]
};

// What supervisor::run_options() reads: how a run is stopped, where the
// network filter's decisions go, and the filter's test behaviour.
struct RunInput {
  std::optional<std::chrono::milliseconds> timeout;  // --timeout
  std::chrono::milliseconds grace{5000};             // --grace
  std::optional<std::string> net_log;                // --net-log FILE
#ifdef PJ_TEST_SWITCHES
  // The network filter's start fails on purpose, to show that the
  // command then never starts.
  bool test_fail_network_filter = false;
  // The network filter process, once locked down, tries to open files,
  // exec, ptrace and signal the supervisor, and says how each failed
  // (--test-filter-probe); or aborts on its first request
  // (--test-filter-misbehave). Passed in its settings, never to the jail.
  bool test_filter_probe = false;
  std::string test_filter_misbehave;  // abort, stop-reading, jail-socket
  // --test-net-timeouts HANDSHAKE,IDLE (durations), the network filter's
  // handshake and idle timeouts, so tests need not wait.
  std::optional<std::pair<std::chrono::milliseconds, std::chrono::milliseconds>> test_net_timeouts;
  std::vector<std::string> test_resolve;  // HOST:PORT=IP:PORT2: connect there once HOST:PORT is allowed
#endif
};

// What supervisor::make_interceptor() reads from the command line: in
// test builds, credentials for the network filter without the
// supervisor's credential table (PJ_TEST_BIND, take_test_bindings) and
// --test-upstream-ca FILE, extra anchors for upstream servers. Empty in
// a release build.
struct InterceptorInput {
#ifdef PJ_TEST_SWITCHES
  std::vector<std::string> test_bind;
  std::optional<std::string> test_upstream_ca;
#endif
};

// The test switches that turn off, narrow or stand in for a backend's
// layers, which its planner and supervisor::backend::probe_host() read.
// Empty in a release build.
struct BackendSwitches {
#ifdef PJ_TEST_SWITCHES
  std::vector<std::string> test_landlock_read_only;  // only narrows
  bool unsafe_test_no_seccomp = false;
  bool unsafe_test_no_landlock = false;
  // Run this program in place of /usr/bin/sandbox-exec (a stand-in that
  // enforces nothing; the Seatbelt backend's wiring tests).
  std::optional<std::string> unsafe_test_sandbox_exec;
#endif
};

// What supervisor::backend::plan() reads.
struct BackendInput {
  Mode mode = Mode::run;  // run or explain
  BackendSwitches switches;
  InterceptorInput interceptor;
#ifdef PJ_TEST_SWITCHES
  std::vector<std::string> test_token_endpoint;  // PROVIDER@HOST:PORT/PATH: a stand-in token endpoint
#endif
};

// The command line, parsed. Each field is kept once: run_options() and
// make_interceptor() take their part as it is; prepare() and
// backend::plan(), which read the mode too, take what prepare_input() and
// backend_input() make of it.
struct Invocation {
  Mode mode = Mode::run;
  Isolation isolation = Isolation::jail;  // --unsandboxed
  std::vector<std::string> command;       // run: COMMAND [ARG...]
  std::optional<std::string> workspace;   // -w DIR
  // --profile, --config, the grants and --memory, --pids, --cpus (checked
  // here too), as policy::load_policy() takes them.
  policy::CommandLine policy;
  RunInput run;
  BackendSwitches backend;
  InterceptorInput interceptor;
#ifdef PJ_TEST_SWITCHES
  std::vector<std::string> test_token_endpoint;  // --test-token-endpoint
#endif
  std::optional<std::string> report;  // --report FILE
  util::Verbosity verbosity = util::Verbosity::normal;
  bool json = false;  // doctor and explain
  std::string shell;  // shell-init

  PrepareInput prepare_input() const;
  BackendInput backend_input() const;
};

util::Result<Invocation> parse(int argc, char** argv);

#ifdef PJ_TEST_SWITCHES
// Test builds only: the lines of PJ_TEST_BIND (NAME=PLACEHOLDER=VALUE@
// HOST:PORT) into in.test_bind, then the variable's bytes overwritten and
// the variable removed, so no copy of this process (the jail's init is
// one) and no environment made from it holds the value. An environment
// variable, not an argument: nothing in the jail can read it afterwards.
void take_test_bindings(InterceptorInput& in);
#endif

// "90", "90s", "1500ms", "5m", "2h" -> milliseconds; > 0.
util::Result<std::chrono::milliseconds> parse_duration(std::string_view text);

extern const char* const kUsage;

}  // namespace pj::cli
