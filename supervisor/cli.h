// The command line: argv -> Invocation (plain data).
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

struct Invocation {
  Mode mode = Mode::run;
  std::optional<std::string> workspace;
  // --profile, --config, the grants and --memory, --pids, --cpus (checked
  // here too), as policy::load_policy() takes them.
  policy::CommandLine policy;
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds grace{5000};
  std::optional<std::string> report;  // --report FILE
  std::optional<std::string> net_log;  // --net-log FILE
#ifdef PJ_TEST_SWITCHES
  // Test builds only (-Dtest_switches=true): a release build has neither
  // these fields nor their options, so no code path of it can reach them.
  std::vector<std::string> test_landlock_read_only;  // only narrows
  bool unsafe_test_no_seccomp = false;
  bool unsafe_test_no_landlock = false;
  // Run this program in place of /usr/bin/sandbox-exec (a stand-in that
  // enforces nothing; the Seatbelt backend's wiring tests).
  std::optional<std::string> unsafe_test_sandbox_exec;
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
  // PJ_TEST_BIND (take_test_bindings), credentials for the network
  // filter without the supervisor's credential table; --test-upstream-ca
  // FILE, extra anchors for upstream servers.
  std::vector<std::string> test_bind;
  std::optional<std::string> test_upstream_ca;
  std::vector<std::string> test_resolve;  // HOST:PORT=IP:PORT2: connect there once HOST:PORT is allowed
  std::vector<std::string> test_token_endpoint;  // PROVIDER@HOST:PORT/PATH: a stand-in token endpoint
#endif
  Isolation isolation = Isolation::jail;
  util::Verbosity verbosity = util::Verbosity::normal;
  bool json = false;
  std::string shell;                 // shell-init
  std::vector<std::string> command;  // run: COMMAND [ARG...]
};

util::Result<Invocation> parse(int argc, char** argv);

#ifdef PJ_TEST_SWITCHES
// Test builds only: the lines of PJ_TEST_BIND (NAME=PLACEHOLDER=VALUE@
// HOST:PORT) into inv.test_bind, then the variable's bytes overwritten and
// the variable removed, so no copy of this process (the jail's init is
// one) and no environment made from it holds the value. An environment
// variable, not an argument: nothing in the jail can read it afterwards.
void take_test_bindings(Invocation& inv);
#endif

// "90", "90s", "1500ms", "5m", "2h" -> milliseconds; > 0.
util::Result<std::chrono::milliseconds> parse_duration(std::string_view text);

extern const char* const kUsage;

}  // namespace pj::cli
