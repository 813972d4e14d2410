#include "pi/profile_adapter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pi/agent_dir.h"
#include "pi/sessions.h"
#include "runtime/system_dirs.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/unique_fd.h"
#include "util/untrusted.h"

namespace pj::pi {

using util::Error;

namespace {

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

// Pi's agent dir ($PI_CODING_AGENT_DIR, else ~/.pi/agent), made if it is
// not there yet (0700, as Pi would on its first run), then resolved: the
// protections are planned inside the real directory, so an agent dir that
// is a symlink (into a dotfiles repository) is protected where it lives.
util::Result<std::string> prepare_agent_dir(const std::string& home, const std::string& home_real) {
  const std::string agent_dir = pi::agent_dir(home);
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
  if (auto why = runtime::system_dir_problem(*real); !why.empty())
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
                              runtime::Preparing preparing, std::vector<policy::ProgramNeed>& needs) {
  auto agent = util::open_dir_nofollow(agent_dir);
  if (!agent) return Error::from_errno(fmt::format("open Pi's agent dir {}", agent_dir), agent.error().err());
  util::UniqueFd sessions(::openat(agent->get(), "sessions", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sessions.valid() && errno != ENOENT)
    return Error::from_errno(fmt::format("open {}/sessions (a link? pi-jail shows none)", agent_dir), errno);
  auto found = workspace_sessions(sessions.get(), workspace, cwd, is_directory);
  for (const auto& why : found.refused) util::warn("{}", why);
  for (const auto& d : found.shown) {
    if (!d.exists) {
      if (preparing != runtime::Preparing::jailed_run) continue;
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
          why_not = fmt::format("{} is a link to {}, and the jail shows files, not links: put {} on PATH", path, *real,
                                *real);
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
  return util::Error::invalid(package_refusal(command));
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
    std::string recorded = recorded_cwd(AT_FDCWD, *file).value_or("");
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
    util::note(
        "the session {} was recorded in {}, outside this jail's workspace {}: the jail does not show that "
        "directory, so Pi will say it does not exist (its TUI offers to continue or fork the session here). "
        "To work there, run pi-jail in it: pi-jail -w {} -- pi --session ...",
        util::printable(*file), util::printable(recorded), util::printable(workspace), util::printable(recorded));
  }
  return {};
}

// Pi's logins that wait for the browser's redirect on a fixed loopback
// port (pi-ai's dist/auth/oauth/: the same in Pi 1.4.0 and 1.6.0). Each
// also takes the redirect URL pasted into Pi, but for Radius's browser
// sign-in (it offers a device code instead). OpenRouter's waits on a
// port the kernel picks, which nothing can know to serve: its pasted URL
// works.
struct PiLoginCallback {
  std::uint16_t port;
  const char* what;
};
constexpr PiLoginCallback kPiLoginCallbacks[] = {
    {53692, "Anthropic (Claude Pro/Max)"},
    {1455, "OpenAI (ChatGPT Plus/Pro, Codex; Sign in with ChatGPT)"},
    {1456, "Radius"},
};

// ${pi_agent_dir} for every profile: a profile file may name it (a copy
// of pi.toml). Only the pi profile makes the directory.
class AgentDirVariable : public runtime::ProfileAdapter {
public:
  util::Status place(policy::Places& places, const runtime::Preparation&) override {
    agent_dir_ = agent_dir(places.home);
    define(places);
    return {};
  }

protected:
  void define(policy::Places& places) const {
    places.vars.emplace_back("pi_agent_dir", agent_dir_);
    places.placed.push_back(agent_dir_placed());
  }
  std::string agent_dir_;
};

// The pi profile: Pi's agent dir made and resolved, the sessions of this
// workspace shown, fd and rg found, PI_CODING_AGENT_DIR set inside, Pi's
// login callback ports named, and Pi's package commands and foreign
// sessions stopped before Pi starts.
class PiProfile final : public AgentDirVariable {
public:
  util::Status place(policy::Places& places, const runtime::Preparation& p) override {
    auto agent = prepare_agent_dir(places.home, p.home_real);
    if (!agent) return agent.take_error();
    agent_dir_ = *agent;
    workspace_ = places.workspace;
    cwd_ = places.cwd;
    define(places);
    return {};
  }

  util::Status needs(const policy::Places&, const runtime::Preparation& p,
                     std::vector<policy::ProgramNeed>& out) override {
    if (p.preparing == runtime::Preparing::unsandboxed_run) return {};
    return show_pi_sessions(agent_dir_, workspace_, cwd_, p.preparing, out);
  }

  // fd and rg for Pi, looked for in the view the policy makes.
  std::vector<policy::ProgramNeed> more_needs(const policy::Policy& pol, const runtime::Preparation& p) override {
    std::vector<policy::ProgramNeed> tools;
    if (!runs_pi(p)) return tools;
    tools_not_found_ = show_pi_search_tools(p.path_env, pol, workspace_, tools);
    return tools;
  }

  // Pi inside is told where its agent dir is: the real directory, where
  // the jail shows it. Its default, $HOME/.pi/agent, does not lead there
  // when ~/.pi is a symlink (a dotfiles setup): the link is not in the
  // jail's home, and Pi would start with no models ("Unknown provider").
  void shape(runtime::Request& in, runtime::ProfileHints& hints) override {
    in.env_set.emplace_back("PI_CODING_AGENT_DIR", agent_dir_);
    for (const auto& c : kPiLoginCallbacks) in.login_callbacks.push_back({c.port, c.what, "profile pi"});
    in.logs_in = true;
    in.logs_in_source = "profile pi";
    // Every project's sessions are there: the jail sees only those of
    // this workspace (show_pi_sessions), whether or not any is shown.
    in.private_hidden.push_back(agent_dir_ + "/sessions");
    hints.keep_new_dirs = [workspace = in.workspace](const std::string&, std::string_view name, int made) {
      return why_not_kept(name, made, workspace, is_directory);
    };
  }

  util::Status check_run(const runtime::Preparation& p, const std::vector<policy::ProgramNeed>& granted,
                         runtime::ProfileHints& hints) override {
    if (runs_pi(p) && p.preparing == runtime::Preparing::jailed_run) {
      if (auto ok = refuse_pi_package_command(p.argv); !ok) return ok.take_error();
      hints.guard_package_commands = true;
    }
    if (runs_pi(p))
      if (auto ok = check_foreign_session(p.argv, workspace_, cwd_, agent_dir_, granted); !ok) return ok.take_error();
    hints.downloads_tools = !tools_not_found_.empty();
    if (!tools_not_found_.empty() && pi_tui(p.argv))
      util::note(
          "Pi downloads fd and rg from github.com when it cannot find them, and the jail refuses that "
          "(Pi then warns at start): {}. Install them (Debian/Ubuntu: apt install fd-find ripgrep) or put "
          "them on PATH",
          util::printable(fmt::format("{}", fmt::join(tools_not_found_, "; "))));
    return {};
  }

private:
  // The program is Pi: its package's entry point, or a command named pi.
  static bool runs_pi(const runtime::Preparation& p) {
    return p.program && !p.argv.empty() &&
           (p.program->exec_path.find("/pi-coding-agent/") != std::string::npos || p.argv.front() == "pi" ||
            p.argv.front().ends_with("/pi"));
  }

  // Pi looks for fd and rg when its TUI starts (print, JSON and RPC modes
  // do not, unless a find or grep tool is enabled): the note is for the TUI.
  static bool pi_tui(const std::vector<std::string>& argv) {
    return ::isatty(STDIN_FILENO) && std::none_of(argv.begin() + 1, argv.end(), [](const std::string& a) {
             return a == "-p" || a == "--print" || a == "--mode" || a.starts_with("--mode=");
           });
  }

  std::string workspace_, cwd_;
  std::vector<std::string> tools_not_found_;
};

}  // namespace

policy::PlacedDir agent_dir_placed() {
  return {"pi_agent_dir", "Pi's agent dir", "$PI_CODING_AGENT_DIR, else ~/.pi/agent",
          "set PI_CODING_AGENT_DIR to a directory within it"};
}

std::unique_ptr<runtime::ProfileAdapter> profile_adapter(std::string_view profile) {
  if (profile == "pi") return std::make_unique<PiProfile>();
  return std::make_unique<AgentDirVariable>();
}

std::string package_refusal(std::string_view command) {
  return fmt::format(
      "pi {} inside the jail would be thrown away: the jail keeps Pi's packages and extensions read-only. Run it "
      "outside the jail (`command pi {} ...` when pi is an alias for pi-jail pi); the next jailed Pi loads what "
      "is installed, read-only",
      util::printable(command), util::printable(command));
}

}  // namespace pj::pi
