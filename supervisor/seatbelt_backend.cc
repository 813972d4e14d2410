// The macOS backend: the command runs under Seatbelt (sandbox-exec) with
// a profile planned by lib/seatbelt from the same request as on Linux;
// seatbelt_run.cc supervises it. Built on macOS as pi-jail, and on Linux
// (test builds) as pi-jail-seatbelt, whose tests run it with a stand-in
// for sandbox-exec: they show the wiring, never containment.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "backend.h"
#include "filterproc/filter.h"
#include "jail_notes.h"
#include "seatbelt/host.h"
#include "seatbelt/plan.h"
#include "seatbelt_run.h"
#include "util/escape.h"
#include "util/log.h"

namespace pj::supervisor::backend {

const char* const kName = "macos-seatbelt";
const bool kKeepsCredentialsOutside = false;

// The network filter's process: this executable, exec'd afresh by
// sandbox-exec under the filter's own profile (seatbelt_run.cc).
int network_filter() { return filterproc::network_filter_main(); }

namespace {

using util::JsonWriter;

std::string sandbox_exec([[maybe_unused]] const cli::BackendSwitches& inv) {
#ifdef PJ_TEST_SWITCHES
  if (inv.unsafe_test_sandbox_exec) return *inv.unsafe_test_sandbox_exec;
#endif
  return std::string(seatbelt::kSandboxExec);
}

// Switches that only the Linux backend knows stop the run: silently
// ignoring one would make a test or a script believe it had an effect.
util::Status check_switches(const cli::BackendInput& inv, const Prepared& prepared) {
#ifdef PJ_TEST_SWITCHES
  auto linux_only = [](std::string_view what) {
    return util::Error::invalid(fmt::format("{} is a Linux backend switch; this pi-jail runs Seatbelt jails", what));
  };
  if (inv.switches.unsafe_test_no_seccomp) return linux_only("--unsafe-test-no-seccomp");
  if (inv.switches.unsafe_test_no_landlock) return linux_only("--unsafe-test-no-landlock");
  if (!inv.switches.test_landlock_read_only.empty()) return linux_only("--test-landlock-read-only");
  // The stand-in token endpoints reach the Linux filter process only.
  if (!inv.test_token_endpoint.empty()) return linux_only("--test-token-endpoint");
  if (inv.switches.unsafe_test_sandbox_exec)
    util::emit("WARNING", fmt::format("--unsafe-test-sandbox-exec: the command runs under {}, a stand-in for "
                                      "sandbox-exec that enforces NOTHING (test build)",
                                      *inv.switches.unsafe_test_sandbox_exec));
#endif
  // Not built for Seatbelt yet: stop rather than run without what the
  // operator granted (or with a port nobody is relaying).
  if (!prepared.request.sockets.empty())
    return util::Error::invalid(
        fmt::format("socket grant {} ({}): socket grants are not supported on macOS yet; "
                    "remove [filesystem] sockets from the operator file for this host",
                    prepared.request.sockets.front().path, prepared.request.sockets.front().why));
  if (!prepared.request.published.empty())
    return util::Error::invalid(
        fmt::format("publish {} ({}): published ports are not supported on macOS yet; the "
                    "Seatbelt jail shares the host's network, so start the server on a "
                    "port the network policy allows instead",
                    prepared.request.published.front().spec.str(), prepared.request.published.front().why));
  if (!prepared.request.ssh.empty())
    return util::Error::invalid(
        fmt::format("ssh {}:{}: --allow-ssh (and [network] ssh) is not supported on macOS "
                    "yet; push from outside the jail on this host",
                    prepared.request.ssh.front().host, prepared.request.ssh.front().port));
  if (const auto& pol = prepared.policy.resolved.policy; pol && pol->landlock() == policy::LandlockUse::required)
    util::note("the policy requires Landlock, a Linux layer; on macOS Seatbelt is the filesystem layer");
  // macOS has no per-jail memory, CPU or process accounting an unprivileged
  // process can set (RLIMIT_NPROC there counts all of the user's
  // processes): a limit asked for is refused, the default is not enforced.
  const auto& l = prepared.request.limits;
  auto cannot = [](std::string_view what, const std::string& src) {
    return util::Error::invalid(
        fmt::format("the {} limit ({}) cannot be enforced by the macOS Seatbelt jail; fix: "
                    "remove it, or run on Linux",
                    what, src));
  };
  if (inv.mode == cli::Mode::run) {
    if (l.memory) return cannot("memory", l.memory_src);
    if (l.millicpus) return cannot("CPU", l.cpus_src);
    if (l.pids_src != "default") return cannot("process", l.pids_src);
  }
  return {};
}

// Where the run's private TMPDIR is made: the caller's $TMPDIR (on macOS
// a per-user directory), else /tmp.
std::string tmp_parent() {
  const char* t = std::getenv("TMPDIR");
  return t && *t == '/' ? std::string(t) : "/tmp";
}

// The run's private TMPDIR, removed with everything in it at the end.
class PrivateDir {
public:
  explicit PrivateDir(std::string path) : path_(std::move(path)) {}
  PrivateDir(PrivateDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  ~PrivateDir() {
    if (!path_.empty()) seatbelt::remove_tree(path_);
  }

private:
  std::string path_;
};

void print_view(const seatbelt::SeatbeltSpec& spec, bool placeholders) {
  auto generated = std::string_view(spec.profile).substr(seatbelt::base_profile().size());
  util::out("# Seatbelt profile: the base profile (profiles/seatbelt/pi-jail.sb), then these rules\n{}\n", generated);
  util::out("# parameters (every path and port the rules name; handed to sandbox-exec with -D)\n");
  for (const auto& p : spec.params) {
    bool port = placeholders && (p.name == "PROXY_HTTP" || p.name == "PROXY_SOCKS");
    util::out("{:12} = {:50} # {}\n", p.name,
              port ? "localhost:(a free port, chosen at start)" : util::printable(p.value), util::printable(p.why));
  }
  if (placeholders) util::out("# TMPDIR (pi-jail.XXXXXX) and the network filter's ports are made when a run starts\n");
  util::out("\n# layers\n");
  util::out("sandbox: Seatbelt (sandbox-exec), deny by default; children inherit it and cannot leave it\n");
  util::out("processes: no PID namespace; the command's process group is killed when it ends\n");
  util::out(
      "network: TCP to the network filter's two ports on localhost, and the host-loopback ports the "
      "policy names\n");
  const bool listens = std::any_of(spec.params.begin(), spec.params.end(),
                                   [](const seatbelt::Param& p) { return p.name.starts_with("LOGIN_CALLBACK_"); });
  util::out("listening: {}\n",
            listens ? "on localhost (127.0.0.1 and ::1) at the login callback ports only (LOGIN_CALLBACK_*), for the "
                      "whole run; the host's own logins cannot use a port the jail holds"
                    : "nowhere");
  util::out(
      "network filter: a process of its own (pi-jail exec'd afresh, empty environment) under sandbox-exec with "
      "its own profile: no file but its executable and libraries, no process, outbound TCP only to the rules' "
      "ports\n");
  util::out("\n# process\ncwd {}\n", spec.cwd);
  for (const auto& e : spec.env) util::out("env {}\n", e.substr(0, e.find('=')));
}

void write_jail(JsonWriter& j, const seatbelt::SeatbeltSpec& spec, const std::string& sandbox_exec, bool pty) {
  j.key("layers").begin_object();
  j.field("sandbox", "seatbelt");
  j.field("sandbox_exec", sandbox_exec);
  j.field("processes", "process group");
  j.field("terminal", pty ? "pty" : "inherit");
  j.end_object();
  j.key("policy").begin_object();
  j.key("parameters").begin_array();
  for (const auto& p : spec.params) {
    j.begin_object();
    j.field("name", p.name).field("value", p.value).field("why", p.why);
    j.end_object();
  }
  j.end_array();
  write_environment(j, spec.env);
  j.end_object();
}

// The planned jail and what its run keeps: the private TMPDIR, the
// PTY, the network filter's listeners and image, the credential filter
// (its CA handed to the filter's process) and its CA bundle, the jail's
// notes. Members go in the reverse of this order, as the locals they
// were did.
class SeatbeltJail final : public Jail {
public:
  SeatbeltJail(std::optional<PrivateDir> tmp, std::optional<Pty> pty, Listeners listeners, FilterImage filter,
               std::shared_ptr<credentials::Interceptor> interceptor, std::optional<CaBundleFile> ca_bundle,
               std::shared_ptr<JailNotes> notes, std::shared_ptr<seatbelt::SeatbeltSpec> spec, std::string exec)
      : tmp_(std::move(tmp)),
        pty_(std::move(pty)),
        listeners_(std::move(listeners)),
        filter_(std::move(filter)),
        interceptor_(std::move(interceptor)),
        ca_bundle_(std::move(ca_bundle)),
        notes_(std::move(notes)),
        spec_(std::move(spec)),
        exec_(std::move(exec)) {}

  util::Status ready(RunOptions& opts) override {
    opts.interceptor = interceptor_;
    opts.refusals = notes_;
    return {};
  }

  RunOutcome run(const RunOptions& opts) override {
    return run_sandboxed(*spec_, exec_, std::move(pty_), std::move(listeners_), filter_, opts);
  }

private:
  std::optional<PrivateDir> tmp_;
  std::optional<Pty> pty_;
  Listeners listeners_;
  FilterImage filter_;
  std::shared_ptr<credentials::Interceptor> interceptor_;
  std::optional<CaBundleFile> ca_bundle_;
  std::shared_ptr<JailNotes> notes_;
  std::shared_ptr<seatbelt::SeatbeltSpec> spec_;
  std::string exec_;
};

}  // namespace

runtime::HostReport probe_host(const cli::BackendSwitches& inv) { return seatbelt::probe_host(sandbox_exec(inv)); }

util::Result<std::unique_ptr<Jail>> plan(const cli::BackendInput& inv, Prepared& prepared, Report::Content& content) {
  // A step of pi-jail's own set-up: the step, its errno and the fix.
  auto step_failed_with = [](const util::Error& e, std::string_view fix) {
    return said_setup_failure(e.message(), fix);
  };
  if (auto st = check_switches(inv, prepared); !st) return request_refused(st.error().message());
  const bool explain = inv.mode == cli::Mode::explain;

  seatbelt::PlanInput in;
  in.request = prepared.request;
  std::optional<PrivateDir> tmp;
  std::optional<Pty> pty;
  Listeners listeners;
  FilterImage filter;
  if (explain) {
    in.tmpdir = tmp_parent() + "/pi-jail.XXXXXX";
    in.http_port = in.socks_port = 65535;
  } else {
    auto dir = seatbelt::make_private_dir(tmp_parent());
    if (!dir) return step_failed_with(dir.error(), "set TMPDIR to a directory you can write, or unset it to use /tmp");
    tmp.emplace(*dir);
    in.tmpdir = *dir;
    auto opened = open_pty();
    if (!opened)
      return step_failed_with(opened.error(),
                              "close unused terminals, or run without a terminal (stdin and stdout redirected)");
    pty = std::move(*opened);
    if (pty) in.tty = pty->path;
    auto l = open_listeners();
    if (!l)
      return step_failed_with(l.error(), "the network filter needs 127.0.0.1: check that the loopback interface is up");
    listeners = std::move(*l);
    in.http_port = listeners.http_port;
    in.socks_port = listeners.socks_port;
    // The network filter is this executable: found now, at the start.
    auto image = filter_image();
    if (!image) return step_failed_with(image.error(), "report a bug");
    filter = std::move(*image);
  }

  // Credentials bound to hosts: the jail trusts the run's CA through the
  // TLS libraries' variables, naming the bundle file (read-only grant).
  // The filter's process serves it: this process only makes the CA.
  std::shared_ptr<credentials::Interceptor> interceptor;
  std::optional<CaBundleFile> ca_bundle;
  if (!explain) {
    auto made = make_interceptor(inv.interceptor);
    if (!made) return said_setup_failure(made.error().message());
    interceptor = std::move(*made);
    if (interceptor) {
      if (auto ca = interceptor->made(); !ca) return said_setup_failure(ca.error().message());
      auto bundle = CaBundleFile::write(state_dir(), interceptor->ca_pem());
      if (!bundle) return said_setup_failure("write the jail's CA bundle: " + bundle.error().message());
      ca_bundle.emplace(std::move(*bundle));
      in.request.ca_bundle = ca_bundle->path();
      in.request.grants.push_back({ca_bundle->path(), runtime::Access::read_only, "the run's CA bundle (credentials)"});
    }
  }
  // What the jail is told of its refusals, and Pi's package commands
  // refused at once (jail_notes.h): this jail reads the notes directory
  // at its own path.
  std::shared_ptr<JailNotes> notes;
  if (!explain) {
    const std::string state = state_dir();
    if (state.empty())
      return said_setup_failure("pi-jail's state directory: neither $XDG_STATE_HOME nor $HOME is an absolute path",
                                "set XDG_STATE_HOME or HOME to an absolute path");
    auto made = JailNotes::make(state, {.pi_downloads_tools = prepared.pi_downloads_tools}, NotesSeen::in_place);
    if (!made) return step_failed_with(made.error(), "make pi-jail's state directory writable, or set XDG_STATE_HOME");
    notes = std::make_shared<JailNotes>(std::move(*made));
    notes->show(in.request);
    if (prepared.pi_guard)
      if (auto ok = notes->add_pi_guard(in.request.exec_path, in.request); !ok)
        return said_setup_failure("make the jail's pi guard: " + ok.error().message());
  }
  auto facts = view::probe_paths(seatbelt::paths_to_probe(in));
  if (explain) {
    facts[in.tmpdir] = {};
    facts[in.tmpdir].kind = view::PathFact::Kind::directory;
    facts[in.tmpdir].resolved = in.tmpdir;
  }
  auto planned = seatbelt::plan(in, facts);
  if (!planned) return request_refused(planned.error().message());
  auto spec = std::make_shared<seatbelt::SeatbeltSpec>(std::move(*planned));
  if (explain) {
    print_view(*spec, true);
    return std::unique_ptr<Jail>{};
  }
  if (spec->cwd != in.request.cwd)
    util::note("{} is not visible inside the jail; starting in the workspace {}", in.request.cwd, spec->cwd);
  if (util::verbosity() == util::Verbosity::verbose)
    for (const auto& p : spec->params)
      util::debug("-D {}={}  # {}", p.name, util::printable(p.value), util::printable(p.why));
  const std::string exec = sandbox_exec(inv.switches);
  content.network_filter = fmt::format(
      "proxy on the host's loopback: HTTP 127.0.0.1:{}, SOCKS5 127.0.0.1:{}, served by a process of its own under "
      "sandbox-exec; the host-loopback ports the policy names are reached directly",
      in.http_port, in.socks_port);
  content.write_jail = [spec, exec, has_pty = pty.has_value()](JsonWriter& j, const RunOutcome&) {
    write_jail(j, *spec, exec, has_pty);
  };

  return std::unique_ptr<Jail>(std::make_unique<SeatbeltJail>(
      std::move(tmp), std::move(pty), std::move(listeners), std::move(filter), std::move(interceptor),
      std::move(ca_bundle), std::move(notes), std::move(spec), exec));
}

}  // namespace pj::supervisor::backend
