// pi-jail: run a command (usually Pi) inside a rootless namespace jail.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "cli.h"
#include "doctor.h"
#include "linuxjail/host.h"
#include "linuxjail/plan.h"
#include "policy/explain.h"
#include "prepare.h"
#include "report.h"
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

// Plan and run one command; fills `content` for the report as it goes.
supervisor::RunOutcome plan_and_run(const cli::Invocation& inv, supervisor::Report::Content& content,
                                    std::optional<linuxjail::JailSpec>& spec_out) {
  supervisor::RunOutcome out;  // setup_failed, 125 until something runs
  supervisor::PrepareFailure failure;
  auto prepared = supervisor::prepare(inv, failure);
  if (!prepared) {
    util::error("{}", prepared.error().message());
    out.failure = prepared.error().message();
    if (failure == supervisor::PrepareFailure::not_found) out.exit_code = 127;
    if (failure == supervisor::PrepareFailure::not_executable) out.exit_code = 126;
    if (out.exit_code != kSetupFailed) out.ending = supervisor::RunOutcome::Ending::not_executed;
    return out;
  }
  linuxjail::PlanInput* input = &prepared->input;
  content.workspace = input->workspace;
  content.refused = prepared->policy.resolved.refused;
  if (inv.isolation == cli::Isolation::unsandboxed) {
    if (inv.report) util::warn("--report is not written for --unsandboxed runs: nothing is enforced to report");
    supervisor::exec_unsandboxed(input->exec_path, input->argv);
  }

  if (inv.mode == cli::Mode::explain) {
    policy::ExplainInput ex;
    const auto& lp = prepared->policy;
    ex.policy = lp.resolved.policy ? &*lp.resolved.policy : nullptr;
    ex.resolved = &lp.resolved;
    ex.layers = lp.info;
    ex.workspace = input->workspace;
    policy::Resolved with_load_errors = lp.resolved;
    with_load_errors.errors.insert(with_load_errors.errors.begin(), lp.errors.begin(), lp.errors.end());
    ex.resolved = &with_load_errors;
    if (inv.json) {
      fmt::print("{}", policy::explain_json(ex));
    } else {
      fmt::print("{}", policy::explain_text(ex));
    }
    out.exit_code = with_load_errors.errors.empty() ? 0 : kSetupFailed;
    if (!ex.policy || inv.json || util::verbosity() != util::Verbosity::verbose) return out;
  }

  auto facts = linuxjail::probe_paths(linuxjail::paths_to_probe(*input));
  auto spec = linuxjail::plan(*input, facts);
  if (!spec) {
    util::error("{}", spec.error().message());
    out.failure = spec.error().message();
    return out;
  }
  spec_out.emplace(std::move(*spec));
  content.spec = &*spec_out;
  if (inv.mode == cli::Mode::explain) {
    fmt::print("\n");
    print_view(*spec_out);
    return out;
  }
  if (spec_out->cwd != input->cwd)
    util::note("{} is not visible inside the jail; starting in the workspace {}", input->cwd, spec_out->cwd);
  if (util::verbosity() == util::Verbosity::verbose)
    for (const auto& op : spec_out->mounts) util::debug("{}  # {}", linuxjail::describe(op), op.why);
  supervisor::choose_streams(*spec_out);
  supervisor::RunOptions opts;
  opts.timeout = inv.timeout;
  opts.grace = inv.grace;
  opts.rules = prepared->rules;
  auto log = supervisor::open_net_log(inv.net_log);
  if (!log) {
    util::error("{}; nothing was run", log.error().message());
    out.failure = log.error().message();
    return out;
  }
  opts.net_log_fd = log->get();
  auto result = supervisor::run_jailed(*spec_out, opts);
  // The jail is gone: remove the placeholders it was given, if still empty.
  for (const auto& [path, node] : linuxjail::placeholders(*spec_out)) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (node == linuxjail::Node::directory && S_ISDIR(st.st_mode)) ::rmdir(path.c_str());
    else if (node == linuxjail::Node::file && S_ISREG(st.st_mode) && st.st_size == 0) ::unlink(path.c_str());
  }
  supervisor::summarise_refusals(result.decisions);
  return result;
}

int run(const cli::Invocation& inv) {
  // Before anything can clone: the handled signals go to a signalfd.
  supervisor::block_handled_signals();
  std::optional<supervisor::Report> report;
  if (inv.report && inv.mode == cli::Mode::run) {
    auto r = supervisor::Report::open(*inv.report);
    if (!r) {
      util::error("{}; nothing was run", r.error().message());
      return kSetupFailed;
    }
    report.emplace(std::move(*r));
  }
  supervisor::Report::Content content;
  content.command = inv.command;
  content.started = std::chrono::system_clock::now();
  std::optional<linuxjail::JailSpec> spec;
  supervisor::RunOutcome outcome = plan_and_run(inv, content, spec);
  content.ended = std::chrono::system_clock::now();
  content.decisions = outcome.decisions;
  content.outcome = outcome;
  if (report) {
    if (auto st = report->write(content); !st) {
      util::error("{}", st.error().message());
      if (outcome.exit_code == 0) return kSetupFailed;
    }
  }
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
