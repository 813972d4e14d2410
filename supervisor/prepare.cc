#include "prepare.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "runtime/program.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/paths.h"

extern char** environ;

namespace pj::supervisor {

using util::Error;

namespace {

util::Result<std::string> current_dir() {
  char buf[PATH_MAX];
  if (!::getcwd(buf, sizeof buf)) return Error::from_errno("get the current directory", errno);
  return std::string(buf);
}

util::Result<std::string> resolve_dir(const std::string& path, const std::string& base, std::string_view what) {
  auto norm = util::normalize_path(path, base);
  if (!norm) return std::move(norm.take_error()).context(std::string(what));
  char real[PATH_MAX];
  if (!::realpath(norm->c_str(), real)) return Error::from_errno(fmt::format("{} {}", what, *norm), errno);
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::invalid(fmt::format("{} {}: not a directory", what, *norm));
  return std::string(real);
}

std::string home_dir() {
  const char* h = std::getenv("HOME");
  if (h && *h == '/') return h;
  if (passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/";
}

}  // namespace

std::string default_workspace(const std::string& cwd) {
  std::string dir = cwd;
  while (true) {
    struct stat st;
    if (::lstat((dir + "/.git").c_str(), &st) == 0) return dir;
    if (dir == "/") return cwd;
    dir = std::string(util::parent_path(dir));
  }
}

namespace {

// A git worktree's .git is a file naming its git dir, which lives in the
// main repository's .git: commits need that writable (objects, refs,
// the worktree's index); its hooks and config stay read-only, as the
// workspace's own would.
void add_worktree_git_dir(runtime::Request& in) {
  std::ifstream dotgit(in.workspace + "/.git");
  std::string line;
  if (!dotgit || !std::getline(dotgit, line) || !line.starts_with("gitdir: ")) return;
  auto gitdir = util::normalize_path(line.substr(8), in.workspace);
  if (!gitdir) return;
  std::string common = *gitdir;
  std::ifstream commondir(*gitdir + "/commondir");
  std::string rel;
  if (commondir && std::getline(commondir, rel)) {
    auto c = util::normalize_path(rel, *gitdir);
    if (c) common = *c;
  }
  char real[PATH_MAX];
  if (!::realpath(common.c_str(), real)) return;
  common = real;
  if (util::path_within(in.home, common)) return;  // never all of $HOME
  in.grants.push_back({common, runtime::Access::read_write, "git worktree: the main repository's git dir"});
  in.read_only.push_back({common + "/hooks", "git worktree: hooks run on the host", runtime::Node::directory});
  in.read_only.push_back({common + "/config", "git worktree: config names commands", runtime::Node::file});
}

}  // namespace

util::Result<Prepared> prepare(const cli::Invocation& inv, PrepareFailure& failure) {
  failure = PrepareFailure::other;
  Prepared prepared;
  runtime::Request& in = prepared.request;
  auto cwd = current_dir();
  if (!cwd) return cwd.take_error();
  in.cwd = *cwd;

  auto ws = resolve_dir(inv.workspace ? *inv.workspace : default_workspace(in.cwd), in.cwd, "workspace");
  if (!ws) return ws.take_error();
  in.workspace = *ws;

  auto home = util::normalize_path(home_dir());
  if (!home) return std::move(home.take_error()).context("$HOME");
  in.home = *home;
  if (in.workspace == "/" || util::path_within(in.home, in.workspace))
    return Error::invalid(fmt::format(
        "refusing workspace {}: it contains your home directory, so secrets such as ~/.ssh would be "
        "writable inside the jail; cd into a project or pass -w DIR",
        in.workspace));

  if (inv.profile == "pi") {
    // The pi profile grants Pi's agent directory: make it if it is not
    // there yet, as Pi would on its first run (0700, the caller's own).
    const std::string agent_dir = pi_agent_dir(in.home);  // the views below point into it
    std::string partial;
    for (auto part : util::path_components(agent_dir)) {
      partial += "/" + std::string(part);
      ::mkdir(partial.c_str(), 0700);
    }
  }
  prepared.policy = load_policy(inv, in.workspace, in.home, in.cwd);
  LoadedPolicy& lp = prepared.policy;
  std::vector<policy::Diagnostic> problems = lp.errors;
  problems.insert(problems.end(), lp.resolved.errors.begin(), lp.resolved.errors.end());
  if (!problems.empty() && inv.mode != cli::Mode::explain) {
    std::string all = "the policy has problems; nothing was run:";
    for (const auto& d : problems) all += "\n  " + util::printable(d.str());  // may quote the project file
    return Error::invalid(all);
  }
  for (const auto& r : lp.resolved.refused)
    util::warn("refused {} request: {}", policy::authority_name(r.by), util::printable(r.str()));
  if (lp.resolved.policy) {
    runtime::apply_policy(*lp.resolved.policy, in);
    add_worktree_git_dir(in);
    for (const auto& r : lp.resolved.policy->net_allow()) prepared.rules.allow(r.pattern, r.src.str());
    for (const auto& r : lp.resolved.policy->net_deny()) prepared.rules.deny(r.pattern, r.src.str());
    for (const auto& f : prepared.rules.forwards()) in.forwards.emplace_back(f.addr.str(), f.port);
  }

  in.uid = ::getuid();
  in.gid = ::getgid();
  for (char** e = environ; *e; ++e) in.host_env.emplace_back(*e);

  if (inv.mode != cli::Mode::run) return prepared;
  const char* path_env = std::getenv("PATH");
  runtime::Missing missing;
  auto program = runtime::discover(inv.command.front(), {path_env ? path_env : "", in.cwd, in.home}, missing);
  if (!program) {
    failure = missing == runtime::Missing::not_executable ? PrepareFailure::not_executable : PrepareFailure::not_found;
    return program.take_error();
  }
  in.exec_path = program->exec_path;
  for (const auto& need : program->needs) in.grants.push_back({need.path, runtime::Access::read_only, need.why});
  prepared.program = std::move(*program);
  in.argv = inv.command;
  return prepared;
}

}  // namespace pj::supervisor
