#include "cli.h"

#include <cstring>

#include <fmt/format.h>

namespace pj::cli {

using util::Error;

const char* const kUsage = R"(usage:
  pi-jail [OPTIONS] [--] COMMAND [ARG...]   run COMMAND in a jail (e.g. pi-jail pi)
  pi-jail explain [OPTIONS] [--json]        the effective policy with provenance; runs nothing
  pi-jail doctor [--json]                   can this host build a jail? what is missing, and the fix
  pi-jail shell-init [bash|zsh|fish]        print the alias lines

options:
  -w, --workspace DIR   the read-write workspace (default: the git top level of the
                        current directory, else the current directory)
  -p, --profile NAME|FILE  base profile (default: pi; built in, or a .toml file)
  --config FILE         operator policy file to use instead of /etc/pi-jail/policy.toml
                        and ~/.config/pi-jail/policy.toml
  --no-project-config   ignore <workspace>/.pi/jail.toml
  --allow-read PATH     also show PATH, read-only
  --allow-write PATH    also show PATH, read-write
  --deny PATH           hide PATH (an empty read-only file or directory), even under a grant
  --allow-net HOST[:PORT]  a network rule for the filter (see pi-jail.toml(5))
  --timeout DURATION    stop the jail after DURATION (TERM, --grace, KILL) and exit 124;
                        DURATION is a number with an optional unit: ms, s (default), m, h
  --grace DURATION      time between TERM and KILL when stopping (default 5s)
  --report FILE         write a JSON report of the run to FILE (see pi-jail(1))
  --net-log FILE        append the network filter's decisions to FILE as JSON lines
                        (default: ~/.local/state/pi-jail/network.jsonl)
  --unsandboxed         run COMMAND with NO isolation at all (explicit, announced)
  -v, --verbose         print the jail's mounts before running
  -q, --quiet           only errors
  --version, --help

testing aid (only ever narrows the jail):
  --test-landlock-read-only DIR   make the Landlock rule for the mount at DIR read-only
                                  while the mount stays writable, to show Landlock alone holds

exit status: the command's; 128+N if it died of signal N; 125 if pi-jail failed
before the command ran; 126 command not executable; 127 command not found.
)";

namespace {

bool takes_value(std::string_view opt) {
  return opt == "-w" || opt == "--workspace" || opt == "-p" || opt == "--profile" || opt == "--config" ||
         opt == "--allow-net" || opt == "--allow-read" || opt == "--allow-write" ||
         opt == "--deny" || opt == "--test-landlock-read-only" || opt == "--timeout" || opt == "--grace" ||
         opt == "--report" || opt == "--net-log" || opt == "--unsafe-test-sandbox-exec" ||
         opt == "--test-net-timeouts";
}

}  // namespace

util::Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view unit = text.substr(digits);
  if (digits == 0 || digits > 9)
    return Error::invalid(fmt::format("'{}' is not a duration (a number with an optional unit ms, s, m, h)", text));
  long long n = std::stoll(std::string(text.substr(0, digits)));
  long long ms;
  if (unit == "ms") ms = n;
  else if (unit.empty() || unit == "s") ms = n * 1000;
  else if (unit == "m") ms = n * 60 * 1000;
  else if (unit == "h") ms = n * 3600 * 1000;
  else return Error::invalid(fmt::format("'{}': unknown unit '{}' (ms, s, m, h)", text, unit));
  if (ms <= 0) return Error::invalid(fmt::format("'{}': the duration must be positive", text));
  return std::chrono::milliseconds(ms);
}

util::Result<Invocation> parse(int argc, char** argv) {
  Invocation inv;
  int i = 1;
  if (i < argc) {
    std::string_view first = argv[i];
    if (first == "doctor") inv.mode = Mode::doctor, ++i;
    else if (first == "explain") inv.mode = Mode::explain, ++i;
    else if (first == "shell-init") inv.mode = Mode::shell_init, ++i;
  }
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;
    std::string_view name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    if (takes_value(name) && !value) {
      if (i + 1 >= argc) return Error::invalid(fmt::format("option {} needs a value", name));
      value = argv[++i];
    } else if (!takes_value(name) && value) {
      return Error::invalid(fmt::format("option {} takes no value", name));
    }
    if (name == "-w" || name == "--workspace") inv.workspace = *value;
    else if (name == "-p" || name == "--profile") inv.profile = *value;
    else if (name == "--config") inv.config = *value;
    else if (name == "--no-project-config") inv.no_project_config = true;
    else if (name == "--allow-net") inv.allow_net.push_back(*value);
    else if (name == "--allow-read") inv.allow_read.push_back(*value);
    else if (name == "--allow-write") inv.allow_write.push_back(*value);
    else if (name == "--deny") inv.deny.push_back(*value);
    else if (name == "--test-landlock-read-only") inv.test_landlock_read_only.push_back(*value);
    else if (name == "--report") inv.report = *value;
    else if (name == "--net-log") inv.net_log = *value;
    else if (name == "--timeout" || name == "--grace") {
      auto d = parse_duration(*value);
      if (!d) return std::move(d.take_error()).context(std::string(name));
      if (name == "--timeout") inv.timeout = *d;
      else inv.grace = *d;
    }
#ifdef PJ_TEST_SWITCHES
    else if (name == "--unsafe-test-no-seccomp") inv.unsafe_test_no_seccomp = true;
    else if (name == "--unsafe-test-no-landlock") inv.unsafe_test_no_landlock = true;
    else if (name == "--unsafe-test-sandbox-exec") inv.unsafe_test_sandbox_exec = *value;
    else if (name == "--test-fail-network-filter") inv.test_fail_network_filter = true;
    else if (name == "--test-net-timeouts") {
      auto comma = value->find(',');
      if (comma == std::string::npos) return Error::invalid("--test-net-timeouts: HANDSHAKE,IDLE (two durations)");
      auto hs = parse_duration(std::string_view(*value).substr(0, comma));
      if (!hs) return std::move(hs.take_error()).context("--test-net-timeouts");
      auto idle = parse_duration(std::string_view(*value).substr(comma + 1));
      if (!idle) return std::move(idle.take_error()).context("--test-net-timeouts");
      inv.test_net_timeouts = std::pair{*hs, *idle};
    }
#endif
    else if (name == "--unsandboxed") inv.isolation = Isolation::unsandboxed;
    else if (name == "-v" || name == "--verbose") inv.verbosity = util::Verbosity::verbose;
    else if (name == "-q" || name == "--quiet") inv.verbosity = util::Verbosity::quiet;
    else if (name == "--json" && (inv.mode == Mode::doctor || inv.mode == Mode::explain)) inv.json = true;
    else if (name == "-h" || name == "--help") inv.mode = Mode::help;
    else if (name == "--version") inv.mode = Mode::version;
    else return Error::invalid(fmt::format("unknown option {} (see pi-jail --help)", name));
  }
  for (; i < argc; ++i) inv.command.emplace_back(argv[i]);

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
      if (!inv.command.empty())
        return Error::invalid(fmt::format("unexpected argument '{}'", inv.command.front()));
      break;
    default: break;
  }
  return inv;
}

}  // namespace pj::cli
