// pi-jail: run a command (usually Pi) inside a rootless namespace jail.
#include <unistd.h>

#include <fmt/format.h>

#include "cli.h"
#include "doctor.h"
#include "linuxjail/host.h"
#include "linuxjail/plan.h"
#include "prepare.h"
#include "run.h"
#include "util/log.h"

namespace {

using namespace pj;

constexpr int kSetupFailed = 125;

int shell_init(const std::string& shell) {
  if (shell == "fish")
    fmt::print("alias pi 'pi-jail pi'\n");
  else
    fmt::print("alias pi='pi-jail pi'\n");
  return 0;
}

void print_view(const linuxjail::JailSpec& spec) {
  fmt::print("# filesystem view (in mount order)\n");
  for (const auto& op : spec.mounts) fmt::print("{:60} # {}\n", linuxjail::describe(op), op.why);
  fmt::print("\n# layers\n");
  fmt::print("namespaces: user (uid {} gid {} mapped to themselves), mount, pid, net (lo only), ipc, uts, cgroup\n",
             spec.uid, spec.gid);
  fmt::print("capabilities: none; no_new_privs; securebits locked\n");
  size_t rows = 0;
  for (const auto& row : linuxjail::command_table())
    if (!(row.gate == linuxjail::Gate::debugging && spec.seccomp.debugging == linuxjail::Debugging::allowed) &&
        !(row.gate == linuxjail::Gate::nested_userns &&
          spec.seccomp.nested_userns == linuxjail::NestedUserns::unsafe_allowed))
      ++rows;
  fmt::print("seccomp: {} denied-call rules, non-native ABIs killed; debugging other processes {}; nested user "
             "namespaces {}\n",
             rows, spec.seccomp.debugging == linuxjail::Debugging::allowed ? "ALLOWED" : "denied",
             spec.seccomp.nested_userns == linuxjail::NestedUserns::unsafe_allowed ? "ALLOWED (unsafe)" : "denied");
  if (spec.landlock.handled_fs)
    fmt::print("landlock: ABI {}, {} rules; {}\n", spec.landlock.abi, spec.landlock.rules.size(),
               linuxjail::describe_landlock(spec.landlock.abi));
  else
    fmt::print("landlock: not available on this kernel; the mount view is the only filesystem layer\n");
  fmt::print("\n# process\ncwd {}\n", spec.cwd);
  for (const auto& e : spec.env) fmt::print("env {}\n", e.substr(0, e.find('=')));
}

int run(const cli::Invocation& inv) {
  // Before anything can clone: the forwarded signals go to a signalfd.
  supervisor::block_handled_signals();
  supervisor::PrepareFailure failure;
  auto input = supervisor::prepare(inv, failure);
  if (!input) {
    util::error("{}", input.error().message());
    if (failure == supervisor::PrepareFailure::not_found) return 127;
    if (failure == supervisor::PrepareFailure::not_executable) return 126;
    return kSetupFailed;
  }
  if (inv.isolation == cli::Isolation::unsandboxed) supervisor::exec_unsandboxed(input->exec_path, input->argv);

  auto facts = linuxjail::probe_paths(linuxjail::paths_to_probe(*input));
  auto spec = linuxjail::plan(*input, facts);
  if (!spec) {
    util::error("{}", spec.error().message());
    return kSetupFailed;
  }
  if (inv.mode == cli::Mode::explain) {
    print_view(*spec);
    return 0;
  }
  if (spec->cwd != input->cwd)
    util::note("{} is not visible inside the jail; starting in the workspace {}", input->cwd, spec->cwd);
  if (util::verbosity() == util::Verbosity::verbose)
    for (const auto& op : spec->mounts) util::debug("{}  # {}", linuxjail::describe(op), op.why);
  supervisor::choose_streams(*spec);
  supervisor::RunOptions opts;
  opts.timeout = inv.timeout;
  opts.grace = inv.grace;
  auto outcome = supervisor::run_jailed(*spec, opts);
  return outcome.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  auto inv = cli::parse(argc, argv);
  if (!inv) {
    util::error("{}", inv.error().message());
    return kSetupFailed;
  }
  util::set_verbosity(inv->verbosity);
  switch (inv->mode) {
    case cli::Mode::help: fmt::print("{}", cli::kUsage); return 0;
    case cli::Mode::version: fmt::print("pi-jail {}\n", PI_JAIL_VERSION); return 0;
    case cli::Mode::doctor: return supervisor::doctor(inv->json);
    case cli::Mode::shell_init: return shell_init(inv->shell);
    case cli::Mode::explain:
    case cli::Mode::run: return run(*inv);
  }
  return kSetupFailed;
}
