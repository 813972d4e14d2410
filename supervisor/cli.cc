#include "cli.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "policy/layer.h"
#include "util/numbers.h"

namespace pj::cli {

using util::Error;

const char* const kUsage = R"(usage:
  pi-jail [OPTIONS] [--] COMMAND [ARG...]   run COMMAND in a jail (e.g. pi-jail pi)
  pi-jail [OPTIONS] explain [--json]        the effective policy with provenance; runs nothing
  pi-jail doctor [--json]                   can this host build a jail? what is missing, and the fix
  pi-jail shell-init [bash|zsh|fish]        print the alias lines
  pi-jail help                              this text

Options may come before or after the subcommand. To run a program named
like a subcommand, put -- before it: pi-jail -- doctor.

options:
  -w, --workspace DIR   the read-write workspace (default: the git top level of the
                        current directory, else the current directory)
  -p, --profile NAME|FILE  base profile (default: pi; built in, or a .toml file)
  --config FILE         operator policy file to use instead of /etc/pi-jail/policy.toml
                        and ~/.config/pi-jail/policy.toml
  --no-project-config   ignore <workspace>/.pi/jail.toml
  --allow-read PATH     also show PATH, read-only
  --allow-write PATH    also show PATH, read-write (PATH must exist)
  --deny PATH           hide PATH (an empty read-only file or directory), even under a grant
  --allow-net HOST[:PORT]  a network rule for the filter (see pi-jail.toml(5))
  --allow-ssh HOST[:PORT]  git and ssh reach HOST (port 22) over SSH: its keys from your
                        known_hosts, logins to it signed by your agent, nothing else
  --publish [127.0.0.1:]PORT[:JAILPORT]  serve the jail's port JAILPORT (default PORT)
                        on the host's loopback at PORT, for a server the command starts
  --allow-net-preset NAME  the hosts of a package ecosystem: npm, pypi, crates, github
  --ephemeral-home      $HOME inside is this run's own, discarded at the end (default: the
                        workspace's jail home under ~/.local/share/pi-jail/homes/, kept)
  --memory SIZE         limit the jail's memory to SIZE (2G, 512M); needs a delegated cgroup
  --pids N              at most N processes and threads in the jail at once (default 4096)
  --cpus N              at most N CPUs of time (1.5); needs a delegated cgroup
  --timeout DURATION    stop the jail after DURATION (TERM, --grace, KILL) and exit 124;
                        DURATION is a number with an optional unit: ms, s (default), m, h
  --grace DURATION      time between TERM and KILL when stopping (default 5s)
  --report FILE         write a JSON report of the run to FILE (see pi-jail(1))
  --net-log FILE        append the network filter's decisions to FILE as JSON lines
                        (default: ~/.local/state/pi-jail/network.jsonl)
  --unsandboxed         run COMMAND with NO isolation at all (explicit, announced)
  --json                doctor and explain: print JSON
  -v, --verbose         more detail (explain: the jail's plan; run: the mounts)
  -q, --quiet           only errors
  -h, --help            this text
  --version             the version and the backend
)"
// The test-only switches exist (and are listed) only in builds made with
// -Dtest_switches=true.
#ifdef PJ_TEST_SWITCHES
                           R"(
test builds only (-Dtest_switches=true; never in a release):
  --test-landlock-read-only DIR   make the Landlock rule for the mount at DIR read-only
                                  while the mount stays writable, to show Landlock alone holds
  --unsafe-test-no-seccomp        run without the syscall filter
  --unsafe-test-no-landlock       run without Landlock
  --unsafe-test-sandbox-exec FILE run FILE in place of /usr/bin/sandbox-exec (macOS backend)
  --test-fail-network-filter      make the network filter's start fail
  --test-filter-probe             the network filter process tries files, exec, ptrace and
                                  kill after its lock-down, and says what each got
  --test-filter-misbehave WHAT    the network filter process, once ready: abort (on its
                                  first request), stop-reading (floods name questions and
                                  reads no answer), jail-socket (asks for a socket in the jail)
  --test-net-timeouts HS,IDLE     the network filter's handshake and idle timeouts
  PJ_TEST_BIND (environment)      lines NAME=PLACEHOLDER=VALUE@HOST:PORT, each a credential
                                  for the network filter to substitute (never an argument:
                                  the jail's init would show it)
  --test-upstream-ca FILE         trust FILE's CAs for servers behind bound hosts
  --test-token-endpoint PROVIDER@HOST:PORT/PATH
                                  also treat HOST:PORT/PATH as PROVIDER's OAuth token endpoint
  --test-resolve HOST:PORT=IP:PORT2
                                  once the rules allow HOST:PORT, connect to IP:PORT2 for it
)"
#endif
                           R"(
exit status: the command's; 128+N if it died of signal N; 124 if --timeout stopped it;
125 if pi-jail failed before the command ran (or could not write its own output);
126 command not executable; 127 command not found.
)";

namespace {

// Which invocations an option means something for. An option given where
// it means nothing is refused, never ignored.
enum class Scope {
  any,      // -v, -q, --help, --version
  policy,   // run and explain: the jail's policy
  run,      // run only: what happens while a command runs
  json,     // doctor and explain
  backend,  // run, explain and doctor (the Seatbelt stand-in)
};

struct Option {
  std::string_view name;
  std::string_view short_name;
  bool takes_value;
  Scope scope;
};

constexpr Option kOptions[] = {
    {"--workspace", "-w", true, Scope::policy},
    {"--profile", "-p", true, Scope::policy},
    {"--config", "", true, Scope::policy},
    {"--no-project-config", "", false, Scope::policy},
    {"--allow-read", "", true, Scope::policy},
    {"--allow-write", "", true, Scope::policy},
    {"--deny", "", true, Scope::policy},
    {"--allow-net", "", true, Scope::policy},
    {"--publish", "", true, Scope::policy},
    {"--allow-ssh", "", true, Scope::policy},
    {"--allow-net-preset", "", true, Scope::policy},
    {"--ephemeral-home", "", false, Scope::policy},
    {"--memory", "", true, Scope::policy},
    {"--pids", "", true, Scope::policy},
    {"--cpus", "", true, Scope::policy},
    {"--timeout", "", true, Scope::run},
    {"--grace", "", true, Scope::run},
    {"--report", "", true, Scope::run},
    {"--net-log", "", true, Scope::run},
    {"--unsandboxed", "", false, Scope::run},
    {"--json", "", false, Scope::json},
    {"--verbose", "-v", false, Scope::any},
    {"--quiet", "-q", false, Scope::any},
    {"--help", "-h", false, Scope::any},
    {"--version", "", false, Scope::any},
#ifdef PJ_TEST_SWITCHES
    {"--test-landlock-read-only", "", true, Scope::policy},
    {"--unsafe-test-no-seccomp", "", false, Scope::policy},
    {"--unsafe-test-no-landlock", "", false, Scope::policy},
    {"--unsafe-test-sandbox-exec", "", true, Scope::backend},
    {"--test-fail-network-filter", "", false, Scope::run},
    {"--test-filter-probe", "", false, Scope::run},
    {"--test-filter-misbehave", "", true, Scope::run},
    {"--test-net-timeouts", "", true, Scope::run},
    {"--test-upstream-ca", "", true, Scope::run},
    {"--test-token-endpoint", "", true, Scope::run},
    {"--test-resolve", "", true, Scope::run},
#endif
};

const Option* find_option(std::string_view name) {
  for (const auto& o : kOptions)
    if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
  return nullptr;
}

std::optional<Mode> subcommand(std::string_view word) {
  if (word == "doctor") return Mode::doctor;
  if (word == "explain") return Mode::explain;
  if (word == "shell-init") return Mode::shell_init;
  if (word == "help") return Mode::help;
  return std::nullopt;
}

std::string_view mode_name(Mode m) {
  switch (m) {
    case Mode::run: return "running a command";
    case Mode::explain: return "explain";
    case Mode::doctor: return "doctor";
    case Mode::shell_init: return "shell-init";
    case Mode::help: return "help";
    case Mode::version: return "--version";
  }
  return "?";
}

bool applies(Scope scope, Mode m) {
  switch (scope) {
    case Scope::any: return true;
    case Scope::policy: return m == Mode::run || m == Mode::explain;
    case Scope::run: return m == Mode::run;
    case Scope::json: return m == Mode::doctor || m == Mode::explain;
    case Scope::backend: return m == Mode::run || m == Mode::explain || m == Mode::doctor;
  }
  return false;
}

std::string_view where_it_applies(Scope scope) {
  switch (scope) {
    case Scope::any: return "everywhere";
    case Scope::policy: return "running a command and to explain";
    case Scope::run: return "running a command only";
    case Scope::json: return "doctor and explain only (pi-jail doctor --json)";
    case Scope::backend: return "running a command, explain and doctor";
  }
  return "?";
}

util::Status apply(Invocation& inv, std::string_view name, const std::optional<std::string>& value) {
  if (name == "--workspace")
    inv.workspace = *value;
  else if (name == "--profile")
    inv.policy.profile = *value;
  else if (name == "--config")
    inv.policy.config = *value;
  else if (name == "--no-project-config")
    inv.policy.no_project_config = true;
  else if (name == "--allow-net")
    inv.policy.allow_net.push_back(*value);
  else if (name == "--publish")
    inv.policy.publish.push_back(*value);
  else if (name == "--allow-ssh")
    inv.policy.allow_ssh.push_back(*value);
  else if (name == "--allow-net-preset")
    inv.policy.allow_net_presets.push_back(*value);
  else if (name == "--ephemeral-home")
    inv.policy.ephemeral_home = true;
  else if (name == "--allow-read")
    inv.policy.allow_read.push_back(*value);
  else if (name == "--allow-write")
    inv.policy.allow_write.push_back(*value);
  else if (name == "--deny")
    inv.policy.deny.push_back(*value);
  else if (name == "--report")
    inv.report = *value;
  else if (name == "--net-log")
    inv.run.net_log = *value;
  else if (name == "--memory" || name == "--pids" || name == "--cpus") {
    std::string why;
    bool ok = name == "--memory" ? policy::parse_memory_size(*value, why).has_value()
              : name == "--pids" ? policy::parse_count(*value, why).has_value()
                                 : policy::parse_cpus(*value, why).has_value();
    if (!ok) return Error::invalid(fmt::format("{} {}: {}", name, *value, why));
    (name == "--memory" ? inv.policy.memory : name == "--pids" ? inv.policy.pids : inv.policy.cpus) = *value;
  } else if (name == "--timeout" || name == "--grace") {
    auto d = parse_duration(*value);
    if (!d) return std::move(d.take_error()).context(std::string(name));
    if (name == "--timeout")
      inv.run.timeout = *d;
    else
      inv.run.grace = *d;
  }
#ifdef PJ_TEST_SWITCHES
  else if (name == "--test-landlock-read-only")
    inv.backend.test_landlock_read_only.push_back(*value);
  else if (name == "--unsafe-test-no-seccomp")
    inv.backend.unsafe_test_no_seccomp = true;
  else if (name == "--unsafe-test-no-landlock")
    inv.backend.unsafe_test_no_landlock = true;
  else if (name == "--unsafe-test-sandbox-exec")
    inv.backend.unsafe_test_sandbox_exec = *value;
  else if (name == "--test-fail-network-filter")
    inv.run.test_fail_network_filter = true;
  else if (name == "--test-filter-probe")
    inv.run.test_filter_probe = true;
  else if (name == "--test-filter-misbehave") {
    if (*value != "abort" && *value != "stop-reading" && *value != "jail-socket")
      return Error::invalid("--test-filter-misbehave: abort, stop-reading or jail-socket");
    inv.run.test_filter_misbehave = *value;
  } else if (name == "--test-net-timeouts") {
    auto comma = value->find(',');
    if (comma == std::string::npos) return Error::invalid("--test-net-timeouts: HANDSHAKE,IDLE (two durations)");
    auto hs = parse_duration(std::string_view(*value).substr(0, comma));
    if (!hs) return std::move(hs.take_error()).context("--test-net-timeouts");
    auto idle = parse_duration(std::string_view(*value).substr(comma + 1));
    if (!idle) return std::move(idle.take_error()).context("--test-net-timeouts");
    inv.run.test_net_timeouts = std::pair{*hs, *idle};
  } else if (name == "--test-upstream-ca")
    inv.interceptor.test_upstream_ca = *value;
  else if (name == "--test-token-endpoint")
    inv.test_token_endpoint.push_back(*value);
  else if (name == "--test-resolve")
    inv.run.test_resolve.push_back(*value);
#endif
  else if (name == "--unsandboxed")
    inv.isolation = Isolation::unsandboxed;
  else if (name == "--verbose")
    inv.verbosity = util::Verbosity::verbose;
  else if (name == "--quiet")
    inv.verbosity = util::Verbosity::quiet;
  else if (name == "--json")
    inv.json = true;
  return {};
}

}  // namespace

PrepareInput Invocation::prepare_input() const {
  return {.mode = mode, .isolation = isolation, .workspace = workspace, .policy = policy, .command = command};
}

BackendInput Invocation::backend_input() const {
  BackendInput in;
  in.mode = mode;
  in.switches = backend;
  in.interceptor = interceptor;
#ifdef PJ_TEST_SWITCHES
  in.test_token_endpoint = test_token_endpoint;
#endif
  return in;
}

util::Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view unit = text.substr(digits);
  if (digits == 0 || digits > 9)
    return Error::invalid(fmt::format("'{}' is not a duration (a number with an optional unit ms, s, m, h)", text));
  long long n = *util::parse_number<long long>(text.substr(0, digits));
  long long ms;
  if (unit == "ms")
    ms = n;
  else if (unit.empty() || unit == "s")
    ms = n * 1000;
  else if (unit == "m")
    ms = n * 60 * 1000;
  else if (unit == "h")
    ms = n * 3600 * 1000;
  else
    return Error::invalid(fmt::format("'{}': unknown unit '{}' (ms, s, m, h)", text, unit));
  if (ms <= 0) return Error::invalid(fmt::format("'{}': the duration must be positive", text));
  return std::chrono::milliseconds(ms);
}

// pi-jail's options come first, in any order with at most one subcommand
// word among them; the first other word (or whatever follows --) starts
// the command, whose own options are left alone.
#ifdef PJ_TEST_SWITCHES
void take_test_bindings(InterceptorInput& in) {
  char* value = std::getenv("PJ_TEST_BIND");
  if (!value) return;
  std::string_view text(value);
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) in.test_bind.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  std::fill(value, value + text.size(), '\0');
  ::unsetenv("PJ_TEST_BIND");
}
#endif

util::Result<Invocation> parse(int argc, char** argv) {
  Invocation inv;
  std::optional<Mode> sub;
  bool help = false, version = false;
  std::vector<const Option*> given;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      if (sub) break;
      sub = subcommand(arg);
      if (!sub) break;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    const Option* opt = find_option(name);
    if (!opt) return Error::invalid(fmt::format("unknown option {} (see pi-jail --help)", name));
    if (opt->takes_value && !value) {
      if (i + 1 >= argc) return Error::invalid(fmt::format("option {} needs a value", name));
      value = argv[++i];
    } else if (!opt->takes_value && value) {
      return Error::invalid(fmt::format("option {} takes no value", name));
    }
    if (opt->name == "--help")
      help = true;
    else if (opt->name == "--version")
      version = true;
    else if (auto st = apply(inv, opt->name, value); !st)
      return st.take_error();
    given.push_back(opt);
  }
  for (; i < argc; ++i) inv.command.emplace_back(argv[i]);

  inv.mode = help ? Mode::help : version ? Mode::version : sub.value_or(Mode::run);
  if (inv.mode == Mode::version || (help && sub != Mode::help)) return inv;  // --help wins, as usual
  for (const Option* o : given) {
    if (applies(o->scope, inv.mode)) continue;
    std::string shown(o->name);
    if (!o->short_name.empty()) shown = fmt::format("{} ({})", o->short_name, o->name);
    if (inv.mode == Mode::run && o->scope == Scope::json)
      return Error::invalid(fmt::format("{} applies to {}; to pass it to the command, put it after the command's name",
                                        o->name, where_it_applies(o->scope)));
    return Error::invalid(fmt::format("{} applies to {}, not to {}{}", shown, where_it_applies(o->scope),
                                      mode_name(inv.mode),
                                      inv.mode == Mode::explain && o->name == "--unsandboxed"
                                          ? " (explain shows the jail's policy; --unsandboxed has none)"
                                          : ""));
  }

  switch (inv.mode) {
    case Mode::run:
      if (inv.command.empty()) return Error::invalid("no command given (see pi-jail --help)");
      break;
    case Mode::shell_init:
      if (inv.command.size() > 1) return Error::invalid("shell-init takes one shell name");
      inv.shell = inv.command.empty() ? "bash" : inv.command.front();
      if (inv.shell != "bash" && inv.shell != "zsh" && inv.shell != "fish")
        return Error::invalid(fmt::format("shell-init: unknown shell '{}' (bash, zsh or fish)", inv.shell));
      inv.command.clear();
      break;
    case Mode::doctor:
    case Mode::explain:
    case Mode::help:
      if (!inv.command.empty())
        return Error::invalid(
            fmt::format("unexpected argument '{}' after {}", inv.command.front(), mode_name(inv.mode)));
      break;
    case Mode::version: break;
  }
  return inv;
}

}  // namespace pj::cli
