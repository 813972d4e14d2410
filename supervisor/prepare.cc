#include "prepare.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif
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
#include "pi/sessions.h"
#include "run.h"
#include "runtime/program.h"
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

// Trees of the system itself: neither a workspace nor Pi's agent dir may
// be one of them or lie inside one (a read-write /etc or host procfs).
constexpr std::string_view kSystemTrees[] = {"/proc", "/sys", "/dev", "/run", "/boot", "/etc", "/usr",
                                             "/bin",  "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
// Directories that hold everybody's or the system's data: refused as a
// whole (a project below them is fine).
constexpr std::string_view kSharedDirs[] = {"/", "/var", "/var/tmp", "/tmp", "/opt", "/srv", "/home", "/mnt",
                                            "/media", "/root"};

// Why `dir` (resolved) cannot be granted read-write as `what`, or "".
std::string system_dir_problem(const std::string& dir) {
  for (auto t : kSystemTrees)
    if (util::path_within(dir, t)) return fmt::format("it is part of the system ({})", t);
  for (auto d : kSharedDirs)
    if (dir == d) return "it is a system directory shared by everyone";
#ifdef __linux__
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) == 0) {
    // Pseudo-filesystems: the kernel's objects, not files.
    constexpr unsigned long kPseudo[] = {0x9fa0 /* proc */,       0x62656572 /* sysfs */,   0x1cd1 /* devpts */,
                                         0x63677270 /* cgroup2 */, 0x27e0eb /* cgroup */,    0x73636673 /* securityfs */,
                                         0x64626720 /* debugfs */, 0x74726163 /* tracefs */, 0xcafe4a11 /* bpf */,
                                         0x6e736673 /* nsfs */,    0x62656570 /* configfs */, 0x19800202 /* mqueue */};
    for (auto m : kPseudo)
      if (static_cast<unsigned long>(fs.f_type) == m) return "it is on a pseudo-filesystem of the kernel";
  }
#endif
  return "";
}

// Pi's agent dir ($PI_CODING_AGENT_DIR, else ~/.pi/agent), made if it is
// not there yet (0700, as Pi would on its first run), then resolved: the
// protections are planned inside the real directory, so an agent dir that
// is a symlink (into a dotfiles repository) is protected where it lives.
util::Result<std::string> prepare_agent_dir(const std::string& home, const std::string& home_real) {
  const std::string agent_dir = pi_agent_dir(home);
  std::string failed;
  int mkdir_errno = 0;
  // It is there on every run but the first: made only when it does not
  // resolve (where it exists, every mkdir below says EEXIST).
  auto real = real_path(agent_dir);
  if (!real) {
    std::string partial;
    for (auto part : util::path_components(agent_dir)) {
      partial += "/" + std::string(part);
      if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST && failed.empty()) {
        failed = partial;
        mkdir_errno = errno;
      }
    }
    real = real_path(agent_dir);
  }
  if (!real) {
    // The first mkdir that failed says why (EACCES on a read-only parent,
    // ENOENT under a dangling ~/.pi link), better than realpath's ENOENT.
    const int err = mkdir_errno ? mkdir_errno : errno;
    return Error::from_errno(fmt::format("Pi's agent dir {} cannot be made{} (fix: make it, or its parent, writable, "
                                         "or set PI_CODING_AGENT_DIR to a directory of your own)",
                                         agent_dir, failed.empty() ? "" : ": mkdir " + failed),
                             err);
  }
  if (util::path_within(home_real, *real))
    return Error::invalid(fmt::format(
        "refusing Pi's agent dir {}: it is your home directory or contains it, so all of it would be writable "
        "inside the jail; set PI_CODING_AGENT_DIR to a directory of its own (default ~/.pi/agent)",
        agent_dir));
  if (auto why = system_dir_problem(*real); !why.empty())
    return Error::invalid(fmt::format("refusing Pi's agent dir {}: {}", agent_dir, why));
  return *real;
}

// Whether `path` is a directory, links followed (pi::IsDirectory).
bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Pi's sessions of this workspace (pi/sessions.h): the one part of the
// agent dir the jail writes in place, each directory a read-write need of
// the program. A run makes the workspace's and the starting directory's
// when they are missing (0700, as Pi would); explain, which changes
// nothing, shows those that exist. Nothing else is made in the agent dir.
util::Status show_pi_sessions(const std::string& agent_dir, const std::string& workspace, const std::string& cwd,
                              cli::Mode mode, std::vector<policy::ProgramNeed>& needs) {
  auto agent = util::open_dir_nofollow(agent_dir);
  if (!agent) return Error::from_errno(fmt::format("open Pi's agent dir {}", agent_dir), agent.error().err());
  util::UniqueFd sessions(::openat(agent->get(), "sessions", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sessions.valid() && errno != ENOENT)
    return Error::from_errno(fmt::format("open {}/sessions (a link? pi-jail shows none)", agent_dir), errno);
  auto found = pi::workspace_sessions(sessions.get(), workspace, cwd, is_directory);
  for (const auto& why : found.refused) util::warn("{}", why);
  for (const auto& d : found.shown) {
    if (!d.exists) {
      if (mode != cli::Mode::run) continue;
      if (!sessions.valid()) {
        if (::mkdirat(agent->get(), "sessions", 0700) != 0 && errno != EEXIST)
          return Error::from_errno(fmt::format("make {}/sessions", agent_dir), errno);
        sessions.reset(::openat(agent->get(), "sessions", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sessions.valid()) return Error::from_errno(fmt::format("open {}/sessions", agent_dir), errno);
      }
      if (::mkdirat(sessions.get(), d.name.c_str(), 0700) != 0 && errno != EEXIST)
        return Error::from_errno(fmt::format("make {}/sessions/{}", agent_dir, d.name), errno);
    }
    needs.push_back({agent_dir + "/sessions/" + d.name,
                     {fmt::format("Pi's sessions of this workspace (sessions/{})", d.name), 0, 0},
                     policy::Necessity::required,
                     policy::PathAccess::read_write});
  }
  return {};
}

// fd and rg for Pi's find and grep tools. Pi looks for `fd` or `fdfind`
// and `rg` on PATH (and in its agent dir's bin/) and, when they are not
// there, downloads them from github.com, which the jail refuses (a
// warning in the TUI at every start). Those on the caller's PATH outside
// the system directories (~/.cargo/bin, ~/.local/bin, /opt/...) are shown
// read-only where they are, so PATH finds them inside as outside: added
// to `shown` as optional needs of the program (policy::ProgramNeed), which
// the policy grants or refuses. Returns the tools Pi will not find, with
// why, for one note.
std::vector<std::string> show_pi_search_tools(std::string_view path_env, const policy::Policy& pol,
                                              const std::string& workspace, std::vector<policy::ProgramNeed>& shown) {
  struct Tool {
    const char* what;
    std::vector<const char*> names;
  };
  const Tool tools[] = {{"fd", {"fd", "fdfind"}}, {"rg", {"rg"}}};
  std::vector<std::string> missing;
  auto in_system_view = [&](const std::string& p) {
    return std::any_of(pol.system().begin(), pol.system().end(),
                       [&](const auto& e) { return util::path_within(e.path, p); });
  };
  for (const auto& tool : tools) {
    std::string found, why_not;
    for (size_t start = 0; start <= path_env.size() && found.empty();) {
      size_t end = std::min(path_env.find(':', start), path_env.size());
      std::string dir(path_env.substr(start, end - start));
      start = end + 1;
      if (dir.empty() || dir.front() != '/') continue;  // relative entries name no fixed place
      for (const char* name : tool.names) {
        std::string path = dir + "/" + name;
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) continue;
        // Shown already, links included: the system directories, the
        // workspace, the agent dir's copy (its bin/ is Pi's own place).
        const bool in_private = std::any_of(pol.private_dirs().begin(), pol.private_dirs().end(),
                                            [&](const auto& e) { return util::path_within(e.path, path); });
        if (in_system_view(path) || in_private || util::path_within(workspace, path)) {
          found = path;
          break;
        }
        auto real = real_path(path);
        if (!real) continue;
        if (*real != path) {
          why_not = fmt::format("{} is a link to {}, and the jail shows files, not links: put {} on PATH", path,
                                *real, *real);
          continue;
        }
        shown.push_back({path, {fmt::format("Pi's {} (found on PATH)", name), 0, 0}, policy::Necessity::optional});
        found = path;
        break;
      }
    }
    if (found.empty()) missing.push_back(why_not.empty() ? fmt::format("{} is not on PATH", tool.what) : why_not);
  }
  return missing;
}

// `pi install X` (and -l, remove, uninstall, update): Pi's package
// commands (package-manager-cli.js parsePackageCommand, whose command is
// the first argument). Inside the jail what they install goes to the run's
// copy of the agent dir, or to the workspace's .pi/, which stays
// read-only, and is thrown away: the run stops before anything starts,
// saying how to install outside.
util::Status refuse_pi_package_command(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return {};
  const std::string& command = argv[1];
  if (command != "install" && command != "remove" && command != "uninstall" && command != "update") return {};
  return util::Error::invalid(pi_package_refusal(command));
}

// Pi run with `--session FILE` of a session recorded in another
// directory. When FILE lies among another project's sessions the jail
// does not show it, and Pi would start a new conversation there that the
// run discards: the run stops, naming the fix. Elsewhere (a file in the
// workspace) Pi says the directory does not exist and its TUI offers to
// continue or fork here: one note says why and what to do.
util::Status check_foreign_session(const std::vector<std::string>& argv, const std::string& workspace,
                                   const std::string& cwd, const std::string& agent_dir,
                                   const std::vector<policy::ProgramNeed>& needs) {
  for (size_t i = 1; i + 1 < argv.size(); ++i) {
    if (argv[i] != "--session") continue;
    auto file = util::normalize_path(argv[i + 1], cwd);
    if (!file) continue;
    // The file may lie among the sessions, which jails write: read as
    // pi::recorded_cwd reads (no link followed, no FIFO waited on).
    std::string recorded = pi::recorded_cwd(AT_FDCWD, *file).value_or("");
    if (recorded.empty() || recorded.front() != '/' || util::path_within(recorded, workspace)) continue;
    if (recorded.size() > 300) recorded = recorded.substr(0, 300) + "...";
    const std::string dir(util::parent_path(*file));
    const bool shown = std::any_of(needs.begin(), needs.end(), [&](const auto& n) { return n.path == dir; });
    if (util::path_within(*file, agent_dir + "/sessions") && !shown)
      return Error::invalid(fmt::format(
          "the session {} was recorded in {}, outside this jail's workspace {}: the jail shows only this "
          "workspace's sessions, so Pi would start a new conversation that is not kept. Run pi-jail in that "
          "directory: pi-jail -w {} -- pi --session ...",
          util::printable(*file), util::printable(recorded), util::printable(workspace), util::printable(recorded)));
    util::note("the session {} was recorded in {}, outside this jail's workspace {}: the jail does not show that "
               "directory, so Pi will say it does not exist (its TUI offers to continue or fork the session here). "
               "To work there, run pi-jail in it: pi-jail -w {} -- pi --session ...",
               util::printable(*file), util::printable(recorded), util::printable(workspace),
               util::printable(recorded));
  }
  return {};
}

// Why the caller cannot write to the workspace inside the jail, or "".
// access(2) sees read-only mounts, ACLs and the caller's groups; for root
// it also counts capabilities, which the jail drops: root in CI on another
// user's checkout passes access() and still cannot write there.
std::string workspace_write_problem(const std::string& ws) {
  struct stat st;
  if (::stat(ws.c_str(), &st) != 0) return fmt::format("stat: {}", std::strerror(errno));
  const std::string whose = fmt::format("it belongs to uid {} gid {}, mode {:04o}", st.st_uid, st.st_gid,
                                        st.st_mode & 07777);
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

git_audit::Watch::What watched_as(git_protect::Part part) {
  switch (part) {
    case git_protect::Part::hooks_dir: return git_audit::Watch::What::hooks_dir;
    case git_protect::Part::config: return git_audit::Watch::What::config;
    case git_protect::Part::commondir: return git_audit::Watch::What::commondir;
    case git_protect::Part::program: return git_audit::Watch::What::program;
  }
  return git_audit::Watch::What::program;
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
                                  std::vector<git_audit::Watch>& watch) {
  git_protect::Inputs gi;
  gi.writable = writable_places(in.workspace, pol);
  gi.home = in.home;
  gi.host_configs = git_protect::host_config_files(env_value, in.home);
  std::vector<std::string> cut;
  gi.repositories = git_protect::find_repositories(gi.writable, cut);
  if (worktree) gi.repositories.push_back({worktree->common_dir, in.workspace});
  for (const auto& where : cut)
    util::warn("the search for repositories the jail can write stopped at {} (at most {} directories deep, {} "
               "entries in all): git dirs below it keep only the profile's protections",
               util::printable(where), git_protect::ScanLimits{}.depth, git_protect::ScanLimits{}.entries);
  auto plan = git_protect::plan(gi, git_protect::host_reader(gi.writable));
  if (!plan.problems.empty())
    return Error::invalid(fmt::format("{}", fmt::join(plan.problems, "\n  ")));
  for (const auto& p : plan.protections) {
    // One mark per path (the profile's first): a second would make a
    // second placeholder claim on the same path.
    auto same = [&](const runtime::PathRule& r) { return r.path == p.path; };
    const bool dir = p.part == git_protect::Part::hooks_dir;
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

}  // namespace

std::string pi_package_refusal(std::string_view command) {
  return fmt::format(
      "pi {} inside the jail would be thrown away: the jail keeps Pi's packages and extensions read-only. Run it "
      "outside the jail (`command pi {} ...` when pi is an alias for pi-jail pi); the next jailed Pi loads what "
      "is installed, read-only",
      util::printable(command), util::printable(command));
}

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

util::Result<Prepared> prepare(const cli::Invocation& inv, PrepareFailure& failure) {
  failure = PrepareFailure::other;
  Prepared prepared;
  runtime::Request& in = prepared.request;
  auto cwd = current_dir();
  if (!cwd) return cwd.take_error();
  in.cwd = *cwd;

  auto home = util::normalize_path(home_dir());
  if (!home) return std::move(home.take_error()).context("$HOME");
  in.home = *home;
  // Guards compare resolved paths: $HOME given as a symlink must not let
  // the real home directory become the workspace.
  const std::string home_real = real_path(in.home).value_or(in.home);

  auto ws = resolve_dir(inv.workspace ? *inv.workspace : default_workspace(in.cwd), in.cwd, "workspace");
  if (!ws) return ws.take_error();
  in.workspace = *ws;
  if (in.workspace == "/" || util::path_within(home_real, in.workspace) || util::path_within(in.home, in.workspace))
    return Error::invalid(fmt::format(
        "refusing workspace {}: it contains your home directory, so secrets such as ~/.ssh would be "
        "writable inside the jail; cd into a project or pass -w DIR",
        in.workspace));
  if (auto why = system_dir_problem(in.workspace); !why.empty())
    return Error::invalid(fmt::format("refusing workspace {}: {}; cd into a project or pass -w DIR", in.workspace, why));

  if (auto why = workspace_write_problem(in.workspace); !why.empty()) {
    const std::string msg = fmt::format(
        "workspace {} is not writable by you (uid {}) inside the jail: {}; run pi-jail as the workspace's owner, "
        "make it yours (chown -R {} {}), or pass -w a directory you can write",
        in.workspace, ::getuid(), why, ::getuid(), in.workspace);
    if (inv.mode != cli::Mode::explain) return Error::invalid(msg);
    util::warn("{}", msg);
  }

  Places places{in.workspace, in.home, in.cwd, pi_agent_dir(in.home), std::nullopt};
  if (inv.profile == "pi") {
    auto agent = prepare_agent_dir(in.home, home_real);
    if (!agent) return agent.take_error();
    places.agent_dir = *agent;
  }
  std::string why_not;
  places.worktree = find_worktree(in.workspace, home_real, why_not);
  if (!why_not.empty()) util::warn("{}", util::printable(why_not));

  // The program to run, found before the policy is resolved: what it
  // needs enters the policy (policy::ProgramNeed), bounded by the
  // operators' limits and listed with its provenance. A program that is
  // not there is reported where it always was, after the policy's own
  // problems and the jail home.
  const char* path_env = std::getenv("PATH");
  std::optional<util::Error> program_error;
  runtime::Missing missing = runtime::Missing::not_found;
  if (inv.mode == cli::Mode::run) {
    auto program = runtime::discover(inv.command.front(), {path_env ? path_env : "", in.cwd, in.home}, missing);
    if (program) {
      // Unsandboxed runs show nothing: the program needs no grant there.
      if (inv.isolation == cli::Isolation::jail)
        for (const auto& need : program->needs) places.program.push_back({need.path, {need.why, 0, 0}, policy::Necessity::required});
      prepared.program = std::move(*program);
    } else {
      program_error = program.take_error();
    }
  }
  if (inv.profile == "pi" && inv.isolation == cli::Isolation::jail) {
    if (auto shown = show_pi_sessions(places.agent_dir, in.workspace, in.cwd, inv.mode, places.program); !shown)
      return shown.take_error();
  }
  const bool runs_pi = !program_error && inv.mode == cli::Mode::run &&
                       (prepared.program.exec_path.find("/pi-coding-agent/") != std::string::npos ||
                        inv.command.front() == "pi" || inv.command.front().ends_with("/pi"));

  prepared.policy = load_policy(inv, places);
  LoadedPolicy& lp = prepared.policy;
  // fd and rg for Pi, looked for in the view the policy makes; those it
  // does not show yet are more needs of the program: resolved again.
  std::vector<std::string> tools_not_found;
  if (inv.profile == "pi" && runs_pi && lp.resolved.policy) {
    std::vector<policy::ProgramNeed> tools;
    tools_not_found = show_pi_search_tools(path_env ? path_env : "", *lp.resolved.policy, in.workspace, tools);
    if (!tools.empty() && inv.isolation == cli::Isolation::jail) {
      lp.ctx.program.insert(lp.ctx.program.end(), tools.begin(), tools.end());
      lp.resolved = resolve_policy(lp.layers, lp.ctx);
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
  if (lp.resolved.policy) {
    runtime::apply_policy(*lp.resolved.policy, in);
    if (inv.isolation == cli::Isolation::jail) {
      auto git = protect_repositories(in, *lp.resolved.policy, places.worktree, prepared.git_watch);
      if (!git && inv.mode != cli::Mode::explain) return git.take_error();
      if (!git) util::warn("{}; a run would stop here (exit 125)", git.error().message());
    }
    // Pi inside is told where its agent dir is: the real directory, where
    // the jail shows it. Its default, $HOME/.pi/agent, does not lead there
    // when ~/.pi is a symlink (a dotfiles setup): the link is not in the
    // jail's home, and Pi would start with no models ("Unknown provider").
    if (inv.profile == "pi") {
      in.env_set.emplace_back("PI_CODING_AGENT_DIR", places.agent_dir);
      // Every project's sessions are there: the jail sees only those of
      // this workspace (show_pi_sessions), whether or not any is shown.
      in.private_hidden.push_back(places.agent_dir + "/sessions");
      prepared.keep_new_dirs = [workspace = in.workspace](const std::string&, std::string_view name, int made) {
        return pi::why_not_kept(name, made, workspace, is_directory);
      };
    }
    for (const auto& r : lp.resolved.policy->net_allow())
      prepared.rules.allow(r.pattern, r.src.str(), r.private_ranges);
    for (const auto& r : lp.resolved.policy->net_deny()) prepared.rules.deny(r.pattern, r.src.str());
    for (const auto& f : prepared.rules.forwards())
      in.forwards.push_back({f.addr.v6 ? runtime::Loopback::v6 : runtime::Loopback::v4, f.port});
  }

  // $HOME inside: the workspace's jail home, made now (explain shows it).
  if (lp.resolved.policy && lp.resolved.policy->home_persists() && in.home != "/" &&
      inv.isolation == cli::Isolation::jail) {
    const std::string data = data_dir();
    if (data.empty())
      return Error::invalid("the jail home: neither $XDG_DATA_HOME nor $HOME is an absolute path; set one, or pass "
                            "--ephemeral-home");
    auto home_dir = prepare_jail_home(data, in.workspace);
    if (home_dir) in.home_source = *home_dir;
    else if (inv.mode == cli::Mode::explain)  // shown, not fatal: explain runs nothing
      util::warn("{}; a run would stop here (exit 125)", home_dir.error().message());
    else
      return home_dir.take_error();
  }
  // The host's git identity, without its secrets, at ~/.config/git/config.
  if (in.home != "/" && inv.isolation == cli::Isolation::jail && !state_dir().empty()) {
    auto git = git_identity::prepare(state_dir(), in.home);
    if (git)
      in.shown_files.push_back({in.home + "/.config/git/config", *git,
                                "your git identity and display settings, nothing else (pi-jail(1), GIT)"});
    else
      util::warn("{}; the jail gets no git identity", git.error().message());
  }

  in.uid = ::getuid();
  in.gid = ::getgid();
  for (char** e = environ; *e; ++e) in.host_env.emplace_back(*e);

  if (inv.mode != cli::Mode::run) return prepared;
  if (program_error) {
    failure = missing == runtime::Missing::not_executable ? PrepareFailure::not_executable : PrepareFailure::not_found;
    return std::move(*program_error);
  }
  in.exec_path = prepared.program.exec_path;
  in.path_first = prepared.program.path_first;
  in.argv = inv.command;
  // Pi looks for them when its TUI starts (print, JSON and RPC modes do
  // not, unless a find or grep tool is enabled): the note is for the TUI.
  const bool pi_tui = ::isatty(STDIN_FILENO) &&
                      std::none_of(inv.command.begin() + 1, inv.command.end(), [](const std::string& a) {
                        return a == "-p" || a == "--print" || a == "--mode" || a.starts_with("--mode=");
                      });
  if (inv.profile == "pi" && runs_pi && inv.isolation == cli::Isolation::jail) {
    if (auto ok = refuse_pi_package_command(inv.command); !ok) return ok.take_error();
    prepared.pi_guard = true;
  }
  if (inv.profile == "pi" && runs_pi) {
    if (auto ok = check_foreign_session(inv.command, in.workspace, in.cwd, places.agent_dir, lp.ctx.program); !ok)
      return ok.take_error();
  }
  prepared.pi_downloads_tools = !tools_not_found.empty();
  if (!tools_not_found.empty() && pi_tui)
    util::note("Pi downloads fd and rg from github.com when it cannot find them, and the jail refuses that "
               "(Pi then warns at start): {}. Install them (Debian/Ubuntu: apt install fd-find ripgrep) or put "
               "them on PATH",
               util::printable(fmt::format("{}", fmt::join(tools_not_found, "; "))));
  return prepared;
}

}  // namespace pj::supervisor
