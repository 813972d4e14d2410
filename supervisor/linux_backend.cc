// The Linux backend: a rootless namespace jail (user, mount, PID, net,
// IPC, UTS, cgroup namespaces), seccomp and Landlock; lib/linuxjail plans
// and builds it, linux_run.cc supervises it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "backend.h"
#include "filterproc/filter.h"
#include "jail_home.h"
#include "linux_limits.h"
#include "linux_run.h"
#include "ssh_access.h"
#include "placeholders.h"
#include "jail_notes.h"
#include "warm_up.h"
#include "credentials/consent.h"
#include "credentials/run_credentials.h"
#include "linuxjail/host.h"
#include "linuxjail/landlock.h"
#include "linuxjail/plan.h"
#include "linuxjail/syscall_filter.h"
#include "pi/private_dirs.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/paths.h"

namespace pj::supervisor::backend {

const char* const kName = "linux";
const bool kKeepsCredentialsOutside = true;

int network_filter() { return filterproc::network_filter_main(); }

runtime::HostReport probe_host(const cli::BackendSwitches&) { return linuxjail::probe_host(); }

namespace {

using util::JsonWriter;

// The common request plus what only this backend reads: the policy's
// hardening switches, the kernel's Landlock ABI and the test switches.
util::Result<linuxjail::PlanInput> plan_input([[maybe_unused]] const cli::BackendSwitches& inv,
                                              const Prepared& prepared) {
  linuxjail::PlanInput in;
  static_cast<runtime::Request&>(in) = prepared.request;
  if (const auto& pol = prepared.policy.resolved.policy) {
    if (pol->ptrace_allowed()) in.seccomp.debugging = linuxjail::Debugging::allowed;
    if (pol->nested_userns_allowed()) in.seccomp.nested_userns = linuxjail::NestedUserns::unsafe_allowed;
    in.landlock_use = pol->landlock();
  }
  in.landlock_abi = linuxjail::landlock_abi();
#ifdef PJ_TEST_SWITCHES
  if (inv.unsafe_test_no_landlock) {
    util::emit("WARNING", "--unsafe-test-no-landlock: the jail runs WITHOUT Landlock (test build)");
    in.landlock_abi = 0;
  }
  if (inv.unsafe_test_no_seccomp) {
    util::emit("WARNING", "--unsafe-test-no-seccomp: the command runs WITHOUT its syscall filter (test build)");
    in.seccomp.use = linuxjail::FilterUse::unsafe_test_disabled;
  }
  if (inv.unsafe_test_sandbox_exec)
    return util::Error::invalid("--unsafe-test-sandbox-exec is for the Seatbelt backend; this pi-jail is Linux's");
  for (const auto& p : inv.test_landlock_read_only) {
    auto norm = util::normalize_path(p, in.cwd);
    if (!norm) return std::move(norm.take_error()).context(fmt::format("--test-landlock-read-only {}", p));
    in.landlock_read_only.push_back(*norm);
  }
#endif
  return in;
}

void print_view(const linuxjail::JailSpec& spec) {
  util::out("# filesystem view (in mount order)\n");
  util::out("{:60} # {}\n", fmt::format("scratch tmpfs ({})", spec.scratch_fs),
            "one size for /tmp, /var/tmp and /dev/shm together ([limits] scratch)");
  // Paths and reasons can come from the project file or a script's first line.
  for (const auto& op : spec.mounts)
    util::out("{:60} # {}\n", util::printable(linuxjail::describe(op)), util::printable(op.why));
  util::out("\n# layers\n");
  util::out("namespaces: user (uid {} gid {} mapped to themselves), mount, pid, net (lo only), ipc, uts, cgroup\n",
            spec.uid, spec.gid);
  util::out("capabilities: none; no_new_privs; securebits locked\n");
  size_t rows = 0;
  for (const auto& row : linuxjail::command_table())
    if (!(row.gate == linuxjail::Gate::debugging && spec.seccomp.debugging == linuxjail::Debugging::allowed) &&
        !(row.gate == linuxjail::Gate::nested_userns &&
          spec.seccomp.nested_userns == linuxjail::NestedUserns::unsafe_allowed))
      ++rows;
  util::out(
      "seccomp: {} denied-call rules, non-native ABIs killed; debugging other processes {}; nested user "
      "namespaces {}\n",
      rows, spec.seccomp.debugging == linuxjail::Debugging::allowed ? "ALLOWED" : "denied",
      spec.seccomp.nested_userns == linuxjail::NestedUserns::unsafe_allowed ? "ALLOWED (unsafe)" : "denied");
  if (spec.landlock.handled_fs)
    util::out("landlock: ABI {}, {} rules; {}\n", spec.landlock.abi, spec.landlock.rules.size(),
              linuxjail::describe_landlock(spec.landlock.abi));
  else
    util::out("landlock: not available on this kernel; the mount view is the only filesystem layer\n");
  util::out("\n# process\ncwd {}\n", util::printable(spec.cwd));
  for (const auto& e : spec.env) util::out("env {}\n", e.substr(0, e.find('=')));
}

const char* kind_word(linuxjail::MountKind k) {
  using K = linuxjail::MountKind;
  switch (k) {
    case K::bind: return "bind";
    case K::tmpfs: return "tmpfs";
    case K::scratch: return "scratch";
    case K::proc: return "proc";
    case K::devpts: return "devpts";
    case K::mask: return "mask";
    case K::symlink: return "symlink";
    case K::seal: return "seal";
  }
  return "?";
}

void write_layers(JsonWriter& j, const linuxjail::JailSpec& spec) {
  j.key("layers").begin_object();
  j.key("namespaces").begin_array();
  for (const char* ns : {"user", "mount", "pid", "net", "ipc", "uts", "cgroup"}) j.value(ns);
  j.end_array();
  j.field("capabilities", "none");
  j.field("no_new_privs", true);
  j.key("seccomp").begin_object();
  j.field("enforced", spec.seccomp.use == linuxjail::FilterUse::enforced);
  j.field("debugging", spec.seccomp.debugging == linuxjail::Debugging::allowed ? "allowed" : "denied");
  j.field("nested_user_namespaces",
          spec.seccomp.nested_userns == linuxjail::NestedUserns::unsafe_allowed ? "allowed" : "denied");
  j.end_object();
  j.key("landlock").begin_object();
  j.field("active", spec.landlock.handled_fs != 0);
  j.field("abi", spec.landlock.abi);
  j.field("required", spec.landlock.use == linuxjail::LandlockUse::required);
  j.field("rules", static_cast<std::uint64_t>(spec.landlock.rules.size()));
  j.end_object();
  j.field("terminal", spec.terminal.streams == linuxjail::Streams::pty ? "pty" : "inherit");
  j.end_object();
}

// "published": the operator's ports, then the login callbacks the run
// served (each marked by its kind).
void write_policy(JsonWriter& j, const linuxjail::JailSpec& spec,
                  const std::vector<runtime::Request::Published>& published,
                  const std::vector<ServedLoginCallback>& login_callbacks) {
  j.key("policy").begin_object();
  j.key("mounts").begin_array();
  for (const auto& op : spec.mounts) {
    j.begin_object();
    j.field("kind", kind_word(op.kind));
    j.field("path", op.dest);
    if (op.kind == linuxjail::MountKind::bind) j.field("source", op.bind_source);
    if (op.kind == linuxjail::MountKind::symlink) j.field("source", op.link_target);
    if (op.kind == linuxjail::MountKind::bind || op.kind == linuxjail::MountKind::tmpfs ||
        op.kind == linuxjail::MountKind::scratch)
      j.field("access", op.access == linuxjail::Access::read_write ? "read-write" : "read-only");
    j.field("why", op.why);
    j.end_object();
  }
  j.end_array();
  write_environment(j, spec.env);
  j.key("published").begin_array();
  for (const auto& p : published) {
    j.begin_object();
    j.field("kind", "publish");
    j.field("host_address", p.spec.host_addr);
    j.field("host_port", p.spec.host_port);
    j.field("jail_port", p.spec.jail_port);
    j.field("why", p.why);
    j.end_object();
  }
  for (const auto& c : login_callbacks) {
    j.begin_object();
    j.field("kind", "login callback");
    j.field("host_address", c.host_address);
    j.field("host_port", static_cast<int>(c.port));
    j.field("jail_port", static_cast<int>(c.port));
    j.field("why", c.why);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

// The logins the run held back (both paths: the token exchange and the
// jail's auth.json), settled by one decision (credentials/consent.h); the notes.
std::vector<std::string> settle_logins(pi::PrivateCopies& copies, const credentials::RunCredentials& creds) {
  std::vector<pi::HeldLogin> held = copies.held_logins();
  for (auto& l : creds.held_logins())
    if (std::none_of(held.begin(), held.end(), [&](const pi::HeldLogin& h) { return h.provider == l.provider; }))
      held.push_back(std::move(l));
  if (held.empty()) return {};
  const pi::Consent c = credentials::decide(creds.logins_mode(), held);
  if (c != pi::Consent::given) {
    std::vector<std::string> notes;
    for (const auto& l : held) notes.push_back(pi::refusal_note(l, c));
    return notes;
  }
  auto notes = copies.settle_logins(c);
  for (auto& n : creds.settle_logins(c)) notes.push_back(std::move(n));
  return notes;
}

// The planned jail and everything its run keeps alive: the request, the
// credentials, the placeholders' registry and holds, the agent dir's
// private copies, the credential filter and its CA bundle, the limits.
// Members go in the reverse of this order, as the locals they were did.
class LinuxJail final : public Jail {
public:
  LinuxJail(Report::Content& content, const runtime::Request& request, util::Result<linuxjail::PlanInput> input,
            util::Result<credentials::RunCredentials> creds, std::optional<Registry> registry,
            std::optional<pi::PrivateCopies> copies, std::shared_ptr<credentials::Interceptor> interceptor,
            std::optional<CaBundleFile> ca_bundle, std::shared_ptr<JailNotes> refusals, std::shared_ptr<SshAccess> ssh,
            std::shared_ptr<linuxjail::JailSpec> spec, util::Result<Holds> holds)
      : content_(content),
        request_(request),
        input_(std::move(input)),
        creds_(std::move(creds)),
        registry_(std::move(registry)),
        copies_(std::move(copies)),
        interceptor_(std::move(interceptor)),
        ca_bundle_(std::move(ca_bundle)),
        refusals_(std::move(refusals)),
        ssh_(std::move(ssh)),
        spec_(std::move(spec)),
        holds_(std::move(holds)) {}

  util::Status ready(RunOptions& opts) override {
    auto limits = prepare_limits(request_);
    if (!limits) {
      holds_->release();
      return limits.take_error();
    }
    limits_.emplace(std::move(*limits));
    if (ca_bundle_) {
      auto made = interceptor_->made();
      auto finished = made ? ca_bundle_->finish(interceptor_->ca_pem()) : std::move(made);
      if (!finished) {
        holds_->release();
        return std::move(finished.take_error()).context("write the jail's CA bundle");
      }
    }
    opts.publish = input_->published;
    opts.login_callbacks = request_.login_callbacks;
    opts.interceptor = interceptor_;
    if (creds_) opts.watched = creds_->watched();
    if (creds_) opts.exchange = creds_->exchange();
    opts.refusals = refusals_;
    if (ssh_) opts.ssh_agent = ssh_->proxy();
    return {};
  }

  RunOutcome run(const RunOptions& opts) override {
    // The agent dir's write-back needs nothing of the jail running: done
    // while the kernel still ends its init. The placeholders wait until
    // init is gone: removing one that is still a mountpoint in the jail's
    // mount namespace detaches that mount too, which costs more than the
    // wait (measured: 6.17 ms a run against 6.34 ms).
    std::optional<std::vector<std::string>> written_back;
    auto once_ended = [&] { written_back = copies_->finish(); };
    const auto cgroups = limits_->cgroups ? limits_->cgroups->join_files() : linuxjail::cgroup::JoinFiles{};
    auto result = run_jailed(*spec_, opts, cgroups, once_ended);
    if (!written_back) once_ended();  // the jail was never launched
    holds_->release();
    // What the jail asked of the SSH agent and was refused: a security
    // event, said even with -q.
    if (ssh_) {
      content_.ssh_agent_refusals = ssh_->proxy()->stop();
      for (const auto& line : content_.ssh_agent_refusals) util::emit("WARNING", line);
    }
    add_usage(*limits_, result.resources);
    limits_->cgroups.reset();  // init is gone: its cgroups are empty
    summarise_resources(result.resources);
    // Logins made in the jail: settled now that the terminal is the
    // user's again (run_jailed restored it).
    if (creds_)
      for (auto& note : settle_logins(*copies_, *creds_)) written_back->push_back(std::move(note));
    // What was not written back is a security event: said even with -q.
    content_.write_back = std::move(*written_back);
    for (const auto& note : content_.write_back)
      note.starts_with("applied:") ? util::note("{}", note) : util::emit("WARNING", note);
    return result;
  }

private:
  Report::Content& content_;
  const runtime::Request& request_;  // the prepared request (main.cc keeps it)
  util::Result<linuxjail::PlanInput> input_;
  util::Result<credentials::RunCredentials> creds_;
  std::optional<Registry> registry_;
  std::optional<pi::PrivateCopies> copies_;
  std::shared_ptr<credentials::Interceptor> interceptor_;
  std::optional<CaBundleFile> ca_bundle_;
  std::shared_ptr<JailNotes> refusals_;
  std::shared_ptr<SshAccess> ssh_;  // after refusals_: its files go first
  std::shared_ptr<linuxjail::JailSpec> spec_;
  util::Result<Holds> holds_;
  std::optional<JailLimits> limits_;
};

}  // namespace

util::Result<std::unique_ptr<Jail>> plan(const cli::BackendInput& inv, Prepared& prepared, Report::Content& content) {
  // Before anything can clone: the handled signals go to a signalfd.
  block_handled_signals();
  content.network_filter = "proxy: HTTP 127.0.0.1:3128, SOCKS5 127.0.0.1:1080, forwarded host-loopback ports";
  auto input = plan_input(inv.switches, prepared);
  if (!input) return request_refused(input.error().message());
    // Model credentials: placeholders in the environment and Pi's
    // auth.json; the real values stay here (credentials/run_credentials.h).
#ifdef PJ_TEST_SWITCHES
  const std::vector<std::string>& token_endpoints = inv.test_token_endpoint;
#else
  const std::vector<std::string> token_endpoints;
#endif
  auto creds = credentials::RunCredentials::prepare(
      prepared.policy.resolved.policy ? &*prepared.policy.resolved.policy : nullptr, *input, token_endpoints);
  if (!creds) return said_setup_failure(creds.error().message());
  content.write_credentials = [c = *creds](JsonWriter& j) { c.write_json(j); };
  // Planned under the placeholder registry's lock (placeholders.h); explain
  // makes nothing and takes no lock.
  std::optional<Registry> registry;
  std::optional<pi::PrivateCopies> copies;
  std::shared_ptr<credentials::Interceptor> interceptor;
  std::optional<CaBundleFile> ca_bundle;
  std::shared_ptr<JailNotes> refusals;
  std::shared_ptr<SshAccess> ssh;
  if (inv.mode == cli::Mode::run) {
    // Before any lock is taken: a first run may warm the cache up (a jail of its own).
    if (auto cached = attach_compile_cache(prepared, *input); !cached) {
      say_setup_failed(cached.error().message(), {});
      return cached.take_error();
    }
    const std::string state = state_dir();
    if (state.empty())
      return said_setup_failure("pi-jail's state directory: neither $XDG_STATE_HOME nor $HOME is an absolute path",
                                "set XDG_STATE_HOME or HOME to an absolute path");
    const std::string fix =
        "pi-jail keeps its placeholders' registry and the agent dir's staging there: make it "
        "writable, or set XDG_STATE_HOME to a directory of your own";
    auto locked = Registry::lock(state);
    if (!locked) return said_setup_failure(locked.error().message(), fix);
    const pi::SecretFile auth = creds->auth_file();
    auto staged = pi::PrivateCopies::stage(state, *input, &auth);
    if (!staged) return said_setup_failure(staged.error().message(), fix);
    copies.emplace(std::move(*staged));
    copies->keep_new_dirs(prepared.keep_new_dirs);
    registry.emplace(std::move(*locked));
    // Credentials bound to hosts (every binding is known once auth.json is
    // staged): the run's CA exists before the jail is planned, so its
    // bundle is in the view from the start.
    // The filter process serves it: this process only makes the CA.
    auto made =
        make_interceptor(inv.interceptor, creds->intercept([](const std::string& w) { util::emit("WARNING", w); }));
    if (!made) return said_setup_failure(made.error().message());
    interceptor = std::move(*made);
    if (interceptor) {
      // The CA is still being made (TlsAuthority::to_hand_over): ready()
      // adds it to the bundle.
      auto bundle = CaBundleFile::begin(state);
      if (!bundle) return said_setup_failure("write the jail's CA bundle: " + bundle.error().message());
      ca_bundle.emplace(std::move(*bundle));
      input->ca_bundle = ca_bundle->path();
    }
    // What the jail is told of its refusals (jail_notes.h).
    if (input->network_filter || prepared.pi_guard) {
      auto notes = JailNotes::make(state, {.pi_downloads_tools = prepared.pi_downloads_tools});
      if (!notes) return said_setup_failure("make the jail's notes at /run/pi-jail: " + notes.error().message(), fix);
      refusals = std::make_shared<JailNotes>(std::move(*notes));
      refusals->show(*input);
      if (prepared.pi_guard)
        if (auto ok = refusals->add_pi_guard(input->exec_path, *input); !ok)
          return said_setup_failure("make the jail's pi guard: " + ok.error().message(), fix);
    }
    // Git over SSH to the allowed hosts (ssh_access.h).
    if (!input->ssh.empty()) {
      if (!refusals) return said_setup_failure("--allow-ssh: the jail has no network filter", "report a bug");
      const char* agent = std::getenv("SSH_AUTH_SOCK");
      auto made_ssh = SshAccess::make(refusals->dir(), ssh_targets(prepared.policy.resolved.policy->ssh_hosts()),
                                      prepared.policy.ctx.home, agent ? agent : "");
      if (!made_ssh)
        return said_setup_failure(made_ssh.error().message(),
                                  "add each host's key to your known_hosts as said, or leave the host out of "
                                  "--allow-ssh and [network] ssh");
      ssh = std::shared_ptr<SshAccess>(std::move(*made_ssh));
      ssh->show(*input);
      if (!agent || !*agent)
        util::warn("--allow-ssh: SSH_AUTH_SOCK is not set, so no agent signs logins inside the jail");
    }
  }
  auto facts = view::probe_paths(linuxjail::paths_to_probe(*input));
  auto planned = linuxjail::plan(*input, facts);
  if (!planned) return request_refused(planned.error().message());
  auto spec = std::make_shared<linuxjail::JailSpec>(std::move(*planned));
  if (inv.mode == cli::Mode::explain) {
    print_view(*spec);
    return std::unique_ptr<Jail>{};
  }
  if (!input->home_source.empty()) {
    std::vector<std::pair<std::string, MountNode>> dests;
    for (const auto& op : spec->mounts) {
      if (op.kind == linuxjail::MountKind::seal) continue;
      dests.emplace_back(op.dest, op.kind == linuxjail::MountKind::symlink ? MountNode::symlink
                                  : op.node == linuxjail::Node::directory  ? MountNode::directory
                                                                           : MountNode::file);
    }
    for (const auto& note : clear_mount_paths(input->home_source, input->home, dests))
      util::note("{}", util::printable(note));
  }
  auto holds = registry->hold(*spec);
  registry->unlock();
  if (!holds) return said_setup_failure(holds.error().message());
  if (spec->cwd != input->cwd)
    util::note("{} is not visible inside the jail; starting in the workspace {}", input->cwd, spec->cwd);
  if (util::verbosity() == util::Verbosity::verbose)
    for (const auto& op : spec->mounts)
      util::debug("{}  # {}", util::printable(linuxjail::describe(op)), util::printable(op.why));
  choose_streams(*spec);
  content.write_jail = [spec, published = input->published](JsonWriter& j, const RunOutcome& outcome) {
    write_layers(j, *spec);
    write_policy(j, *spec, published, outcome.login_callbacks);
  };
  return std::unique_ptr<Jail>(
      std::make_unique<LinuxJail>(content, prepared.request, std::move(input), std::move(creds), std::move(registry),
                                  std::move(copies), std::move(interceptor), std::move(ca_bundle), std::move(refusals),
                                  std::move(ssh), std::move(spec), std::move(holds)));
}

}  // namespace pj::supervisor::backend
