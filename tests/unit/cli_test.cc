#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"

using namespace pj::cli;

namespace {
pj::util::Result<Invocation> parse_args(std::vector<std::string> args) {
  args.insert(args.begin(), "pi-jail");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("the command and its own options are left alone") {
  auto inv = parse_args({"-w", "/ws", "--allow-read=/opt", "pi", "-p", "--deny", "x"});
  REQUIRE(inv.ok());
  CHECK(inv->mode == Mode::run);
  CHECK(*inv->workspace == "/ws");
  CHECK(inv->policy.allow_read == std::vector<std::string>{"/opt"});
  CHECK(inv->command == std::vector<std::string>{"pi", "-p", "--deny", "x"});
  CHECK(inv->policy.deny.empty());
}

TEST_CASE("-- ends pi-jail's options") {
  auto inv = parse_args({"--", "--version"});
  REQUIRE(inv.ok());
  CHECK(inv->mode == Mode::run);
  CHECK(inv->command == std::vector<std::string>{"--version"});
}

TEST_CASE("--unsandboxed is recorded as an explicit choice") {
  auto inv = parse_args({"--unsandboxed", "true"});
  REQUIRE(inv.ok());
  CHECK(inv->isolation == Isolation::unsandboxed);
  auto def = parse_args({"true"});
  REQUIRE(def.ok());
  CHECK(def->isolation == Isolation::jail);
}

TEST_CASE("bad command lines are errors, never defaults") {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{}, "no command"},
      {{"--bogus", "true"}, "unknown option --bogus"},
      {{"-w"}, "needs a value"},
      {{"--unsandboxed=yes", "true"}, "takes no value"},
      {{"shell-init", "tcsh"}, "unknown shell"},
      {{"doctor", "extra"}, "unexpected argument"},
      {{"--pids", "0", "true"}, "--pids 0: 0 would let nothing run"},
      {{"--pids", "many", "true"}, "--pids many: expected a whole number"},
      {{"--cpus", "1,5", "true"}, "--cpus 1,5: expected a number of CPUs"},
      {{"--memory", "0", "true"}, "--memory 0: 0 "},
      {{"--memory", "2X", "true"}, "--memory 2X: expected a size"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    auto inv = parse_args(c.args);
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().message().find(c.message) != std::string::npos);
  }
}

TEST_CASE("--memory, --pids and --cpus are kept as given (the policy applies them)") {
  auto inv = parse_args({"--memory", "512M", "--pids", "64", "--cpus", "1.5", "true"});
  REQUIRE(inv.ok());
  CHECK(inv->policy.memory == "512M");
  CHECK(inv->policy.pids == "64");
  CHECK(inv->policy.cpus == "1.5");
  auto explain = parse_args({"explain", "--pids", "64"});
  CHECK(explain.ok());
}

TEST_CASE("each stage is given its part of the command line") {
  auto inv =
      parse_args({"-w", "/ws", "-p", "own.toml", "--allow-net", "example.org", "--ephemeral-home", "--timeout", "90",
                  "--grace", "2s", "--net-log", "net.jsonl", "--report", "r.json", "--unsandboxed", "env", "-i"});
  REQUIRE(inv.ok());
  const PrepareInput prepare = inv->prepare_input();
  CHECK(prepare.mode == Mode::run);
  CHECK(prepare.isolation == Isolation::unsandboxed);
  CHECK(prepare.workspace == "/ws");
  CHECK(prepare.policy.profile == "own.toml");
  CHECK(prepare.policy.allow_net == std::vector<std::string>{"example.org"});
  CHECK(prepare.policy.ephemeral_home);
  CHECK(prepare.command == std::vector<std::string>{"env", "-i"});
  CHECK(inv->run.timeout == std::chrono::seconds(90));
  CHECK(inv->run.grace == std::chrono::seconds(2));
  CHECK(inv->run.net_log == "net.jsonl");
  CHECK(inv->report == "r.json");
  auto explain = parse_args({"explain", "--profile", "own.toml"});
  REQUIRE(explain.ok());
  CHECK(explain->prepare_input().mode == Mode::explain);
  CHECK(explain->prepare_input().policy.profile == "own.toml");
  CHECK(explain->backend_input().mode == Mode::explain);
}

TEST_CASE("subcommands") {
  CHECK(parse_args({"doctor", "--json"})->json);
  CHECK(parse_args({"explain"})->mode == Mode::explain);
  CHECK(parse_args({"shell-init", "fish"})->shell == "fish");
  CHECK(parse_args({"shell-init"})->shell == "bash");
}

TEST_CASE("options may come before the subcommand") {
  auto q = parse_args({"-q", "doctor"});
  REQUIRE(q.ok());
  CHECK(q->mode == Mode::doctor);
  CHECK(q->verbosity == pj::util::Verbosity::quiet);
  auto w = parse_args({"-w", "/ws", "explain", "--json"});
  REQUIRE(w.ok());
  CHECK(w->mode == Mode::explain);
  CHECK(*w->workspace == "/ws");
  CHECK(w->json);
  auto j = parse_args({"--json", "-v", "doctor"});
  REQUIRE(j.ok());
  CHECK(j->mode == Mode::doctor);
  CHECK(j->json);
  // A program named like a subcommand runs after --, or after the command.
  auto dd = parse_args({"-w", "/ws", "--", "doctor"});
  REQUIRE(dd.ok());
  CHECK(dd->mode == Mode::run);
  CHECK(dd->command == std::vector<std::string>{"doctor"});
  auto after = parse_args({"env", "explain"});
  REQUIRE(after.ok());
  CHECK(after->mode == Mode::run);
  CHECK(after->command == std::vector<std::string>{"env", "explain"});
}

TEST_CASE("help, as a subcommand and as an option anywhere") {
  CHECK(parse_args({"help"})->mode == Mode::help);
  CHECK(parse_args({"-q", "help"})->mode == Mode::help);
  CHECK(parse_args({"doctor", "--help"})->mode == Mode::help);
  CHECK(parse_args({"-h"})->mode == Mode::help);
  CHECK(parse_args({"--version"})->mode == Mode::version);
  auto extra = parse_args({"help", "doctor"});
  REQUIRE_FALSE(extra.ok());
  CHECK(extra.error().message() == "unexpected argument 'doctor' after help");
}

TEST_CASE("an option where it means nothing is refused with a sentence saying where it goes") {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"explain", "--unsandboxed"},
       "--unsandboxed applies to running a command only, not to explain (explain shows the jail's policy; "
       "--unsandboxed has none)"},
      {{"--unsandboxed", "explain"},
       "--unsandboxed applies to running a command only, not to explain (explain shows the jail's policy; "
       "--unsandboxed has none)"},
      {{"explain", "--report", "r.json"}, "--report applies to running a command only, not to explain"},
      {{"explain", "--timeout", "5s"}, "--timeout applies to running a command only, not to explain"},
      {{"-w", "/ws", "doctor"}, "-w (--workspace) applies to running a command and to explain, not to doctor"},
      {{"doctor", "--allow-read", "/opt"}, "--allow-read applies to running a command and to explain, not to doctor"},
      {{"shell-init", "--json"},
       "--json applies to doctor and explain only (pi-jail doctor --json), not to shell-init"},
      {{"--json", "pi"},
       "--json applies to doctor and explain only (pi-jail doctor --json); to pass it to the command, put it after "
       "the command's name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    auto inv = parse_args(c.args);
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().message() == c.message);
  }
}

// The unit tests link the supervisor's own cli.cc, built with or without
// PJ_TEST_SWITCHES as this build's pi-jail is (-Dtest_switches); the
// release case is also checked on the packaged binary (tests/package),
// which holds none of these names.
// Every test-only switch, with a value where it takes one.
constexpr std::pair<const char*, const char*> kTestSwitches[] = {
    {"--test-landlock-read-only", "x"},
    {"--unsafe-test-no-seccomp", nullptr},
    {"--unsafe-test-no-landlock", nullptr},
    {"--unsafe-test-sandbox-exec", "x"},
    {"--test-fail-network-filter", nullptr},
    {"--test-net-timeouts", "1s,1s"},
    {"--test-upstream-ca", "x"},
    {"--test-token-endpoint", "p@h:1/t"},
    {"--test-resolve", "a:1=127.0.0.1:2"},
    {"--test-filter-probe", nullptr},
    {"--test-filter-misbehave", "abort"},
};
#ifdef PJ_TEST_SWITCHES
namespace {
std::vector<std::string> with_value(const std::pair<const char*, const char*>& sw) {
  std::vector<std::string> args{sw.first};
  if (sw.second) args.emplace_back(sw.second);
  args.emplace_back("true");
  return args;
}
}  // namespace

TEST_CASE("test-only switches are accepted and listed in a test build") {
  for (const auto& sw : kTestSwitches) {
    CAPTURE(sw.first);
    CHECK(std::string_view(kUsage).find(sw.first) != std::string_view::npos);
    auto inv = parse_args(with_value(sw));
    CHECK_MESSAGE(inv.ok(), (inv.ok() ? std::string() : inv.error().message()));
  }
}

TEST_CASE("test-only switches reach the stage that reads them") {
  auto inv =
      parse_args({"--unsafe-test-no-seccomp", "--test-landlock-read-only", "/ws/ro", "--unsafe-test-sandbox-exec",
                  "fake", "--test-token-endpoint", "p@h:1/t", "--test-upstream-ca", "ca.pem", "--test-net-timeouts",
                  "1s,2s", "--test-resolve", "a:1=127.0.0.1:2", "--test-filter-misbehave", "abort", "true"});
  REQUIRE(inv.ok());
  const BackendInput backend = inv->backend_input();
  CHECK(backend.mode == Mode::run);
  CHECK(backend.switches.unsafe_test_no_seccomp);
  CHECK_FALSE(backend.switches.unsafe_test_no_landlock);
  CHECK(backend.switches.test_landlock_read_only == std::vector<std::string>{"/ws/ro"});
  CHECK(backend.switches.unsafe_test_sandbox_exec == "fake");
  CHECK(backend.test_token_endpoint == std::vector<std::string>{"p@h:1/t"});
  CHECK(backend.interceptor.test_upstream_ca == "ca.pem");
  CHECK(inv->run.test_net_timeouts == std::pair{std::chrono::milliseconds(1000), std::chrono::milliseconds(2000)});
  CHECK(inv->run.test_resolve == std::vector<std::string>{"a:1=127.0.0.1:2"});
  CHECK(inv->run.test_filter_misbehave == "abort");
}
#else
TEST_CASE("test-only switches are neither accepted nor listed in a release build") {
  // The unit tests compile cli.cc as a release does (no PJ_TEST_SWITCHES).
  for (const auto& named : kTestSwitches) {
    const char* sw = named.first;
    CAPTURE(sw);
    CHECK(std::string_view(kUsage).find(sw) == std::string_view::npos);
    auto inv = parse_args({sw, "x", "true"});
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().message() == std::string("unknown option ") + sw + " (see pi-jail --help)");
  }
}
#endif
