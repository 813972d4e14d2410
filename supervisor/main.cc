// pi-jail: run a command (usually Pi) inside a rootless jail: a Linux
// namespace jail, or a Seatbelt jail on macOS (backend.h).
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "backend.h"
#include "filterlink/process.h"
#include "cli.h"
#include "credentials/run_credentials.h"
#include "doctor.h"
#include "git/audit.h"
#include "policy/explain.h"
#include "prepare.h"
#include "report.h"
#include "run.h"
#include "util/log.h"
#ifdef __linux__
#include "linuxjail/sys.h"
#endif

namespace {

using namespace pj;

constexpr int kSetupFailed = 125;

int shell_init(const std::string& shell) {
  if (shell == "fish")
    util::out("alias pi 'pi-jail pi'\n");
  else
    util::out("alias pi='pi-jail pi'\n");
  return 0;
}

// Print the policy for `explain`; returns explain's exit status: 0, or
// 125 when the policy or a credential it passes has a problem.
int explain_policy(bool json, const supervisor::Prepared& prepared) {
  policy::ExplainInput ex;
  const auto& lp = prepared.policy;
  ex.policy = lp.resolved.policy ? &*lp.resolved.policy : nullptr;
  ex.layers = lp.info;
  ex.workspace = prepared.request.workspace;
  ex.jail_home = prepared.request.home_source;
  ex.backend = supervisor::backend::kName;
  // As the plans take them: a callback on a forwarded port is left out.
  for (const auto& c : prepared.request.login_callbacks)
    if (runtime::login_callback_free(prepared.request, c.port))
      ex.login_callbacks.push_back({c.port, c.what, c.source});
  policy::Resolved with_load_errors = lp.resolved;
  with_load_errors.errors.insert(with_load_errors.errors.begin(), lp.errors.begin(), lp.errors.end());
  ex.resolved = &with_load_errors;
  // Each credential the run would pass, how and where its real value may
  // go, and where a login inside is intercepted (credentials/run_credentials.h);
  // never a value. A backend that keeps none outside has none of this.
  const bool outside = supervisor::backend::kKeepsCredentialsOutside;
  runtime::Request r = prepared.request;
  auto creds = ex.policy && outside
                   ? credentials::RunCredentials::prepare(ex.policy, r)
                   : util::Result<credentials::RunCredentials>(util::Error::invalid("not kept outside"));
  if (creds) {
    ex.login_endpoints = creds->login_endpoints();
    ex.login_endpoints_source = prepared.request.logs_in_source;
  }
  util::out("{}", json ? policy::explain_json(ex) : policy::explain_text(ex));
  int status = with_load_errors.errors.empty() ? 0 : kSetupFailed;
  if (ex.policy && !json && !outside) {
    util::out(
        "\ncredentials: not kept outside on this backend: a credential the policy passes enters the jail with its "
        "real value (README, Platforms)\n");
  } else if (ex.policy && !json) {
    util::out(
        "\ncredentials (placeholders inside the jail; the network filter sends the real value to the bound "
        "hosts only):\n");
    if (!creds) {
      util::out("  {}\n", util::printable(creds.error().message()));
      status = kSetupFailed;
    } else {
      creds->preview_auth();
      for (const auto& line : creds->explain_lines()) util::out("  {}\n", line);
    }
  }
  return status;
}

// Whether explain shows the backend's view after the policy: with -v,
// as text, when the policy resolved.
bool explain_shows_view(bool json, const supervisor::Prepared& prepared) {
  return prepared.policy.resolved.policy && !json && util::verbosity() == util::Verbosity::verbose;
}

// The pipeline's run, the same on every backend: plan the jail (the
// backend), the run's options, the repository's snapshot, the run (the
// backend: start, signals, terminal, reap), then the refusal summary,
// what the jail left in scratch places, and the repository's audit.
// Explain mode ends after the plan, which printed the view.
supervisor::RunOutcome plan_and_run(const cli::BackendInput& plan_in, const cli::RunInput& run_in,
                                    supervisor::Prepared& prepared, supervisor::Report::Content& content) {
  auto planned = supervisor::backend::plan(plan_in, prepared, content);
  if (!planned) return supervisor::ended_by(planned.error());  // said by plan()
  if (!*planned) return {};                                    // explain: the view was printed
  supervisor::backend::Jail& jail = **planned;
  std::optional<pj::policy::Policy::UpstreamProxy> upstream;
  if (prepared.policy.resolved.policy) upstream = prepared.policy.resolved.policy->upstream_proxy();
  auto opts = supervisor::run_options(run_in, prepared.rules, upstream);
  if (!opts) return supervisor::setup_failed(opts.error().message());
  if (auto st = jail.ready(*opts); !st) return supervisor::setup_failed(st.error().message());
  const auto repository = git::audit::snapshot(prepared.request.workspace, prepared.git_watch);
  auto result = jail.run(*opts);
  supervisor::summarise_refusals(result.decisions, {.pi_downloads_tools = prepared.pi_downloads_tools});
  if (!result.discarded.empty()) util::note("{}", result.discarded);
  content.repository_audit = git::audit::audit(prepared.request.workspace, repository, prepared.git_watch);
  git::audit::print(content.repository_audit, prepared.request.workspace);
  return result;
}

// Prepare, then plan and run one command; fills `content` as it goes.
supervisor::RunOutcome prepare_and_run(const cli::Invocation& inv, supervisor::Report::Content& content) {
  auto prepared = supervisor::prepare(inv.prepare_input());
  if (!prepared) {
    util::error("{}", prepared.error().message());
    return supervisor::ended_by(prepared.error());
  }
  content.workspace = prepared->request.workspace;
  content.interpreter = prepared->program.interpreter;
  content.path_first = prepared->program.path_first;
  content.refused = prepared->policy.resolved.refused;
  if (inv.isolation == cli::Isolation::unsandboxed) {
    if (inv.report) util::warn("--report is not written for --unsandboxed runs: nothing is enforced to report");
    supervisor::exec_unsandboxed(prepared->request.exec_path, prepared->request.argv);
  }
  if (inv.mode != cli::Mode::explain) return plan_and_run(inv.backend_input(), inv.run, *prepared, content);
  const int status = explain_policy(inv.json, *prepared);
  if (!explain_shows_view(inv.json, *prepared)) {
    supervisor::RunOutcome out;
    out.exit_code = status;
    return out;
  }
  util::out("\n");
  auto view = plan_and_run(inv.backend_input(), inv.run, *prepared, content);
  if (view.failure.empty()) view.exit_code = status;  // the view was printed
  return view;
}

int run(const cli::Invocation& inv) {
  std::optional<supervisor::Report> report;
  if (inv.report && inv.mode == cli::Mode::run) {
    auto r = supervisor::Report::open(*inv.report);
    if (!r) {
      supervisor::say_setup_failed(r.error().message(), "");
      return kSetupFailed;
    }
    report.emplace(std::move(*r));
  }
  supervisor::Report::Content content;
  content.backend = supervisor::backend::kName;
  content.command = inv.command;
  content.started = std::chrono::system_clock::now();
  supervisor::RunOutcome outcome = prepare_and_run(inv, content);
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

// Modes whose output is pi-jail's own: a failed write to stdout (a full
// disk, a closed pipe's reader gone) is an error, not a silent success.
int with_stdout_checked(int status) {
  if (auto st = util::flush_stdout(); !st) {
    util::error("{}", st.error().message());
    return kSetupFailed;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // The network filter process (filterlink/process.h) is this executable
  // exec'd afresh by the supervisor: told apart before anything else, its
  // control socket (fd 3) kept.
  if (argc == 2 && std::string_view(argv[1]) == filterlink::kNetworkFilterArg)
    return supervisor::backend::network_filter();
  // What pi-jail inherited above fd 2 (a terminal opened as `3</dev/tty`,
  // what an IDE or a shell leaked) is used by nothing here, and the jail's
  // init is a clone of pi-jail: it would hold it for the whole run (the
  // command never gets it: fds from 3 up are closed at its exec). Closed
  // first thing; a run stops if that failed.
  int inherited_fds_error = 0;
#ifdef __linux__
  if (linuxjail::sys::close_range(3, ~0U) != 0) inherited_fds_error = errno;
#endif
  auto inv = cli::parse(argc, argv);
  if (!inv) {
    util::error("{}", inv.error().message());
    return kSetupFailed;
  }
#ifdef PJ_TEST_SWITCHES
  cli::take_test_bindings(inv->interceptor);
#endif
  util::set_verbosity(inv->verbosity);
  switch (inv->mode) {
    case cli::Mode::help: util::out("{}", cli::kUsage); return with_stdout_checked(0);
    case cli::Mode::version:
      util::out("pi-jail {} ({})\n", PI_JAIL_VERSION, supervisor::backend::kName);
      return with_stdout_checked(0);
    case cli::Mode::doctor:
      return with_stdout_checked(
          supervisor::doctor(supervisor::backend::probe_host(inv->backend), inv->json, supervisor::jail_evidence()));
    case cli::Mode::shell_init: return with_stdout_checked(shell_init(inv->shell));
    case cli::Mode::explain: return with_stdout_checked(run(*inv));
    case cli::Mode::run:
      if (inherited_fds_error) {
        supervisor::say_setup_failed(
            fmt::format("close the file descriptors pi-jail inherited above 2 (close_range: {})",
                        std::strerror(inherited_fds_error)),
            "run pi-jail on Linux 5.9 or later");
        return kSetupFailed;
      }
      return run(*inv);
  }
  return kSetupFailed;
}
