#include "prepare.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "git/identity.h"
#include "git/protect.h"
#include "git/worktree.h"
#include "jail_home.h"
#include "pi/profile_adapter.h"
#include "run.h"
#include "ssh_access.h"
#include "runtime/program.h"
#include "runtime/system_dirs.h"
#include "util/escape.h"
#include "util/json_value.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/untrusted.h"

extern char** environ;

namespace pj::supervisor {

using util::Error;

namespace {

util::Result<std::string> current_dir() {
  char buf[PATH_MAX];
  if (!::getcwd(buf, sizeof buf)) return Error::from_errno("get the current directory", errno);
  return std::string(buf);
}

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

util::Result<std::string> resolve_dir(const std::string& path, const std::string& base, std::string_view what) {
  auto norm = util::normalize_path(path, base);
  if (!norm) return std::move(norm.take_error()).context(std::string(what));
  auto real = real_path(*norm);
  if (!real) return Error::from_errno(fmt::format("{} {}", what, *norm), errno);
  struct stat st;
  if (::stat(real->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::invalid(fmt::format("{} {}: not a directory", what, *norm));
  return *real;
}

std::string home_dir() {
  const char* h = std::getenv("HOME");
  if (h && *h == '/') return h;
  if (passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/";
}

// Why the caller cannot write to the workspace inside the jail, or "".
// access(2) sees read-only mounts, ACLs and the caller's groups; for root
// it also counts capabilities, which the jail drops: root in CI on another
// user's checkout passes access() and still cannot write there.
std::string workspace_write_problem(const std::string& ws) {
  struct stat st;
  if (::stat(ws.c_str(), &st) != 0) return fmt::format("stat: {}", std::strerror(errno));
  const std::string whose =
      fmt::format("it belongs to uid {} gid {}, mode {:04o}", st.st_uid, st.st_gid, st.st_mode & 07777);
  if (::access(ws.c_str(), W_OK) != 0) {
    const int err = errno;
    if (err == EROFS) return "it is on a read-only filesystem";
    return fmt::format("{} ({})", whose, std::strerror(err));
  }
#ifdef __linux__
  // Linux only: a Seatbelt jail keeps the caller's privileges.
  const uid_t uid = ::getuid();
  std::vector<gid_t> gids{::getgid()};
  int n = ::getgroups(0, nullptr);
  if (n > 0) {
    std::vector<gid_t> more(static_cast<size_t>(n));
    n = ::getgroups(n, more.data());
    if (n > 0) gids.insert(gids.end(), more.begin(), more.begin() + n);
  }
  if (!util::mode_grants_write(st.st_uid, st.st_gid, st.st_mode, uid, gids))
    return fmt::format("{}, and the jail has no capabilities, so uid {} cannot write there even as root", whose, uid);
#endif
  return "";
}

// The places the jail can write: the workspace and every read-write grant.
std::vector<std::string> writable_places(const std::string& workspace, const policy::Policy& pol) {
  std::vector<std::string> out{workspace};
  for (const auto& g : pol.grants())
    if (g.access == policy::PathAccess::read_write) out.push_back(g.path);
  return out;
}

git::audit::Watch::What watched_as(git::protect::Part part) {
  switch (part) {
    case git::protect::Part::hooks_dir: return git::audit::Watch::What::hooks_dir;
    case git::protect::Part::config: return git::audit::Watch::What::config;
    case git::protect::Part::commondir: return git::audit::Watch::What::commondir;
    case git::protect::Part::program: return git::audit::Watch::What::program;
  }
  return git::audit::Watch::What::program;
}

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

// Every repository the jail can write, and what the host's git would run
// or read as config there (git/protect.h): read-only marks in `in`, and
// the same paths for the end-of-run audit in `watch`. Only narrows the
// view. A config file that cannot be read (a symlink or FIFO in a
// writable place, too large) is an error: what git would run is unknown.
util::Status protect_repositories(runtime::Request& in, const policy::Policy& pol,
                                  const std::optional<policy::Worktree>& worktree,
                                  std::vector<git::audit::Watch>& watch) {
  git::protect::Inputs gi;
  gi.writable = writable_places(in.workspace, pol);
  gi.home = in.home;
  gi.host_configs = git::protect::host_config_files(env_value, in.home);
  std::vector<std::string> cut;
  gi.repositories = git::protect::find_repositories(gi.writable, cut);
  if (worktree) gi.repositories.push_back({worktree->common_dir, in.workspace});
  for (const auto& where : cut)
    util::warn(
        "the search for repositories the jail can write stopped at {} (at most {} directories deep, {} "
        "entries in all): git dirs below it keep only the profile's protections",
        util::printable(where), git::protect::ScanLimits{}.depth, git::protect::ScanLimits{}.entries);
  auto plan = git::protect::plan(gi, git::protect::host_reader(gi.writable));
  if (!plan.problems.empty()) return Error::invalid(fmt::format("{}", fmt::join(plan.problems, "\n  ")));
  for (const auto& p : plan.protections) {
    // One mark per path (the profile's first): a second would make a
    // second placeholder claim on the same path.
    auto same = [&](const runtime::PathRule& r) { return r.path == p.path; };
    const bool dir = p.part == git::protect::Part::hooks_dir;
    if (std::none_of(in.read_only.begin(), in.read_only.end(), same))
      in.read_only.push_back({p.path, "git: " + p.why, dir ? runtime::Node::directory : runtime::Node::file});
    for (const auto& root : gi.writable) {
      if (!util::path_within(p.path, root) || p.path == root) continue;
      watch.push_back({root, p.path.substr(root.size() + (root == "/" ? 0 : 1)), watched_as(p.part)});
      break;
    }
  }
  return {};
}

// What is being prepared, for the profile's adapter.
runtime::Preparing preparing(const cli::PrepareInput& inv) {
  if (inv.mode != cli::Mode::run) return runtime::Preparing::explain;
  return inv.isolation == cli::Isolation::jail ? runtime::Preparing::jailed_run : runtime::Preparing::unsandboxed_run;
}

}  // namespace

std::string default_workspace(const std::string& cwd) {
  // The nearest ancestor holding a `.git` the caller owns, as git's own
  // safe.directory rule asks: another user's `.git` in a shared parent
  // (/tmp/.git) does not make that parent the workspace. Never opened.
  std::string dir = cwd;
  while (true) {
    struct stat st;
    if (::lstat((dir + "/.git").c_str(), &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
        st.st_uid == ::getuid())
      return dir;
    if (dir == "/") return cwd;
    dir = std::string(util::parent_path(dir));
  }
}

namespace {

// The places a run starts from: the current directory, $HOME and the
// workspace, with the workspaces that are refused. Returns $HOME
// resolved: guards compare resolved paths, so a $HOME given as a symlink
// cannot let the real home directory become the workspace.
util::Result<std::string> locate(const cli::PrepareInput& inv, runtime::Request& in) {
  auto cwd = current_dir();
  if (!cwd) return cwd.take_error();
  in.cwd = *cwd;

  auto home = util::normalize_path(home_dir());
  if (!home) return std::move(home.take_error()).context("$HOME");
  in.home = *home;
  std::string home_real = real_path(in.home).value_or(in.home);

  auto ws = resolve_dir(inv.workspace ? *inv.workspace : default_workspace(in.cwd), in.cwd, "workspace");
  if (!ws) return ws.take_error();
  in.workspace = *ws;
  if (in.workspace == "/" || util::path_within(home_real, in.workspace) || util::path_within(in.home, in.workspace))
    return Error::invalid(
        fmt::format("refusing workspace {}: it contains your home directory, so secrets such as ~/.ssh would be "
                    "writable inside the jail; cd into a project or pass -w DIR",
                    in.workspace));
  if (auto why = runtime::system_dir_problem(in.workspace); !why.empty())
    return Error::invalid(
        fmt::format("refusing workspace {}: {}; cd into a project or pass -w DIR", in.workspace, why));

  if (auto why = workspace_write_problem(in.workspace); !why.empty()) {
    const std::string msg = fmt::format(
        "workspace {} is not writable by you (uid {}) inside the jail: {}; run pi-jail as the workspace's owner, "
        "make it yours (chown -R {} {}), or pass -w a directory you can write",
        in.workspace, ::getuid(), why, ::getuid(), in.workspace);
    if (inv.mode != cli::Mode::explain) return Error::invalid(msg);
    util::warn("{}", msg);
  }
  return home_real;
}

// The program to run, found before the policy is resolved: what it needs
// enters the policy (policy::ProgramNeed), bounded by the operators'
// limits and listed with its provenance. A program that is not there is
// returned, not reported: it is reported where it always was, after the
// policy's own problems and the jail home.
std::optional<Error> find_program(const cli::PrepareInput& inv, const std::string& path_env, Prepared& prepared,
                                  policy::Places& places, runtime::Preparation& preparation) {
  if (inv.mode != cli::Mode::run) return std::nullopt;
  std::optional<Error> program_error;
  auto program = runtime::discover(inv.command.front(), {path_env, prepared.request.cwd, prepared.request.home});
  if (program) {
    // Unsandboxed runs show nothing: the program needs no grant there.
    if (inv.isolation == cli::Isolation::jail)
      for (const auto& need : program->needs)
        places.program.push_back({need.path, {need.why, 0, 0}, policy::Necessity::required});
    prepared.program = std::move(*program);
  } else {
    program_error = program.take_error();
  }
  preparation.argv = inv.command;
  if (!program_error) preparation.program = &prepared.program;
  return program_error;
}

// The policy's layers loaded and resolved, with what the program looks
// for in the view they make (more needs of the program: resolved again).
// Its problems stop a run, all named at once; explain shows them.
util::Status load_policy(const cli::PrepareInput& inv, const policy::Places& places, runtime::ProfileAdapter& profile,
                         const runtime::Preparation& preparation, Prepared& prepared) {
  prepared.policy = policy::load_policy(inv.policy, places);
  policy::LoadedPolicy& lp = prepared.policy;
  if (lp.resolved.policy) {
    auto more = profile.more_needs(*lp.resolved.policy, preparation);
    if (!more.empty() && inv.isolation == cli::Isolation::jail) {
      lp.ctx.program.insert(lp.ctx.program.end(), more.begin(), more.end());
      lp.resolved = policy::resolve_policy(lp.layers, lp.ctx);
    }
  }
  std::vector<policy::Diagnostic> problems = lp.errors;
  problems.insert(problems.end(), lp.resolved.errors.begin(), lp.resolved.errors.end());
  if (!problems.empty() && inv.mode != cli::Mode::explain) {
    std::string all = "the policy has problems; nothing was run:";
    for (const auto& d : problems) all += "\n  " + util::printable(d.str());  // may quote the project file
    return Error::invalid(all);
  }
  for (const auto& r : lp.resolved.refused)
    util::warn("refused {} request: {}", policy::authority_name(r.by), util::printable(r.str()));
  if (lp.resolved.policy && inv.mode == cli::Mode::run)
    for (const auto& g : lp.resolved.policy->grants())
      if (g.by == policy::Authority::git_worktree)
        util::note("{}: {} is writable (its hooks, config and pointer files read-only)", util::printable(g.src.str()),
                   util::printable(g.path));
  return {};
}

// The resolved policy into the planner's input: the view, the
// repositories' protections, the profile's shaping, and the network
// filter's rules (allowed SSH hosts among them).
util::Status apply_policy(const cli::PrepareInput& inv, const policy::Policy& pol, const policy::Places& places,
                          runtime::ProfileAdapter& profile, runtime::ProfileHints& hints, Prepared& prepared) {
  runtime::Request& in = prepared.request;
  runtime::apply_policy(pol, in);
  if (inv.isolation == cli::Isolation::jail) {
    auto git = protect_repositories(in, pol, places.worktree, prepared.git_watch);
    if (!git && inv.mode != cli::Mode::explain) return git.take_error();
    if (!git) util::warn("{}; a run would stop here (exit 125)", git.error().message());
  }
  profile.shape(in, hints);
  prepared.keep_new_dirs = hints.keep_new_dirs;
  for (const auto& r : pol.net_allow()) prepared.rules.allow(r.pattern, r.src.str(), r.private_ranges);
  for (const auto& r : pol.net_deny()) prepared.rules.deny(r.pattern, r.src.str());
  for (const auto& f : prepared.rules.forwards())
    in.forwards.push_back({f.addr.v6 ? runtime::Loopback::v6 : runtime::Loopback::v4, f.port});
  // An allowed SSH host: its port, open to the jail's listener for it
  // (and to the proxies: the same destination).
  for (const auto& t : ssh_targets(pol.ssh_hosts())) {
    prepared.rules.allow(net::NetPattern{t.host, false, t.port}, t.why + " (ssh)");
    in.ssh.push_back({t.jail_port, t.host, t.port});
  }
  return {};
}

// $HOME inside: the workspace's jail home, made now (explain shows it).
util::Status place_jail_home(const cli::PrepareInput& inv, const policy::Policy& pol, runtime::Request& in) {
  if (!pol.home_persists() || in.home == "/" || inv.isolation != cli::Isolation::jail) return {};
  const std::string data = data_dir();
  if (data.empty())
    return Error::invalid(
        "the jail home: neither $XDG_DATA_HOME nor $HOME is an absolute path; set one, or pass "
        "--ephemeral-home");
  auto home_dir = prepare_jail_home(data, in.workspace);
  if (home_dir)
    in.home_source = *home_dir;
  else if (inv.mode == cli::Mode::explain)  // shown, not fatal: explain runs nothing
    util::warn("{}; a run would stop here (exit 125)", home_dir.error().message());
  else
    return home_dir.take_error();
  return {};
}

// The host's git identity, without its secrets, at ~/.config/git/config.
void give_git_identity(const cli::PrepareInput& inv, runtime::Request& in) {
  if (in.home == "/" || inv.isolation != cli::Isolation::jail || state_dir().empty()) return;
  auto git = git::identity::prepare(state_dir(), in.home);
  if (git)
    in.shown_files.push_back({in.home + "/.config/git/config", *git,
                              "your git identity and display settings, nothing else (pi-jail(1), GIT)"});
  else
    util::warn("{}; the jail gets no git identity", git.error().message());
}

}  // namespace

util::Result<Prepared> prepare(const cli::PrepareInput& inv) {
  Prepared prepared;
  runtime::Request& in = prepared.request;
  auto home_real = locate(inv, in);
  if (!home_real) return home_real.take_error();

  policy::Places places{
      .workspace = in.workspace, .home = in.home, .cwd = in.cwd, .state_dir = state_dir(), .data_dir = data_dir()};
  const char* path_env = std::getenv("PATH");
  runtime::Preparation preparation{
      .preparing = preparing(inv), .home_real = *home_real, .path_env = path_env ? path_env : ""};
  // What the profile adds beyond its policy text (pi/profile_adapter.h).
  auto profile = pi::profile_adapter(inv.policy.profile);
  runtime::ProfileHints hints;
  if (auto placed = profile->place(places, preparation); !placed) return placed.take_error();
  std::string why_not;
  places.worktree = git::find_worktree(in.workspace, *home_real, why_not);
  if (!why_not.empty()) util::warn("{}", util::printable(why_not));

  std::optional<Error> program_error = find_program(inv, preparation.path_env, prepared, places, preparation);
  if (auto shown = profile->needs(places, preparation, places.program); !shown) return shown.take_error();
  if (auto loaded = load_policy(inv, places, *profile, preparation, prepared); !loaded) return loaded.take_error();
  const policy::Policy* pol = prepared.policy.resolved.policy ? &*prepared.policy.resolved.policy : nullptr;
  if (pol) {
    if (auto applied = apply_policy(inv, *pol, places, *profile, hints, prepared); !applied)
      return applied.take_error();
    if (auto home = place_jail_home(inv, *pol, in); !home) return home.take_error();
  }
  give_git_identity(inv, in);

  in.uid = ::getuid();
  in.gid = ::getgid();
  for (char** e = environ; *e; ++e) in.host_env.emplace_back(*e);

  if (inv.mode != cli::Mode::run) return prepared;
  if (program_error) return std::move(*program_error);  // 127 or 126, as discover() says
  in.exec_path = prepared.program.exec_path;
  in.path_first = prepared.program.path_first;
  in.argv = inv.command;
  if (auto ok = profile->check_run(preparation, prepared.policy.ctx.program, hints); !ok) return ok.take_error();
  prepared.pi_guard = hints.guard_package_commands;
  prepared.pi_downloads_tools = hints.downloads_tools;
  return prepared;
}

}  // namespace pj::supervisor
