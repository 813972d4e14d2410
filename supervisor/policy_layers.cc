#include "policy_layers.h"

#include <sys/stat.h>
#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#include <climits>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "policy/profiles.h"
#include "util/paths.h"

namespace pj::supervisor {

using policy::Authority;
using policy::Presence;

namespace {

std::optional<std::string> real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

void add(LoadedPolicy& lp, policy::Loaded loaded, bool present) {
  lp.info.push_back({loaded.layer.authority, loaded.layer.name, present});
  lp.errors.insert(lp.errors.end(), loaded.errors.begin(), loaded.errors.end());
  lp.layers.push_back(std::move(loaded.layer));
}

policy::Diagnostic problem(std::string where, std::string message) {
  policy::Diagnostic d;
  d.where.file = std::move(where);
  d.message = std::move(message);
  return d;
}

// The host's RAM in bytes (0: unknown), which a "25%" scratch size is a
// share of. Only Linux needs it: the macOS backend ignores the size.
std::uint64_t ram_bytes() {
#if defined(__linux__)
  struct sysinfo si;
  if (::sysinfo(&si) == 0) return static_cast<std::uint64_t>(si.totalram) * si.mem_unit;
#endif
  return 0;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

void load_profile(LoadedPolicy& lp, const std::string& name) {
  if (name.find('/') != std::string::npos || name.ends_with(".toml")) {
    add(lp, policy::load_file(name, Authority::profile, Presence::required), true);
    return;
  }
  std::string known;
  for (const auto& p : policy::embedded_profiles()) {
    if (p.name == name) {
      add(lp, policy::load_layer(p.text, fmt::format("profile {} (built in)", name), Authority::profile), true);
      return;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  lp.errors.push_back(problem("--profile", fmt::format("no profile named \"{}\" (built in: {}; or give a .toml file)",
                                                         name, known)));
}

policy::Layer command_line_layer(const cli::Invocation& inv) {
  policy::Layer l;
  l.authority = Authority::command_line;
  l.name = "command line";
  for (const auto& p : inv.allow_read) l.read.push_back({p, {"--allow-read", 0, 0}});
  for (const auto& p : inv.allow_write) l.write.push_back({p, {"--allow-write", 0, 0}});
  for (const auto& p : inv.deny) l.deny.push_back({p, {"--deny", 0, 0}});
  for (const auto& p : inv.allow_net) {
    std::string why;
    auto pat = policy::parse_net_pattern(p, why);
    if (pat) l.net_allow.push_back({pat->str(), {"--allow-net", 0, 0}});
  }
  return l;
}

}  // namespace

std::string pi_agent_dir(const std::string& home) {
  const char* dir = std::getenv("PI_CODING_AGENT_DIR");
  if (dir && *dir == '/') {
    auto norm = util::normalize_path(dir);
    if (norm) return *norm;
  }
  return home + "/.pi/agent";
}

LoadedPolicy load_policy(const cli::Invocation& inv, const std::string& workspace, const std::string& home,
                         const std::string& cwd) {
  LoadedPolicy lp;
  load_profile(lp, inv.profile);

  if (inv.config) {
    add(lp, policy::load_file(*inv.config, Authority::system, Presence::required), true);
  } else {
    const std::string system = "/etc/pi-jail/policy.toml";
    add(lp, policy::load_file(system, Authority::system, Presence::optional), exists(system));
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    std::string user = (xdg && *xdg == '/' ? std::string(xdg) : home + "/.config") + "/pi-jail/policy.toml";
    add(lp, policy::load_file(user, Authority::user, Presence::optional), exists(user));
  }

  for (const auto& p : inv.allow_net) {
    std::string why;
    if (!policy::parse_net_pattern(p, why))
      lp.errors.push_back(problem("--allow-net", fmt::format("bad network pattern \"{}\": {}", p, why)));
  }
  policy::Layer cli = command_line_layer(inv);
  lp.info.push_back({cli.authority, cli.name, true});
  lp.layers.push_back(std::move(cli));

  if (!inv.no_project_config) {
    const std::string project = workspace + "/.pi/jail.toml";
    struct stat st;
    if (::lstat(project.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      // Attacker-written: never follow a link out of the workspace.
      lp.errors.push_back(problem(project, "is a symlink; a project file must be a regular file"));
      lp.info.push_back({Authority::project, project, true});
    } else {
      add(lp, policy::load_file(project, Authority::project, Presence::optional), exists(project));
    }
  } else {
    lp.info.push_back({Authority::project, "(ignored: --no-project-config)", false});
  }

  policy::Context ctx{workspace, home, cwd, {{"pi_agent_dir", pi_agent_dir(home)}}, real_path};
  ctx.ram_bytes = ram_bytes();
  lp.resolved = policy::resolve(lp.layers, ctx);
  return lp;
}

}  // namespace pj::supervisor
