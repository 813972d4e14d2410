#include "policy_layers.h"

#include "jail_home.h"

#include <sys/stat.h>
#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#include <climits>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "policy/profiles.h"
#include "run.h"
#include "util/paths.h"
#include "util/real_paths.h"
#include "util/untrusted.h"

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
      if (auto built = policy::prebuilt_profile(name)) add(lp, policy::Loaded{std::move(*built), {}}, true);
      else add(lp, policy::load_layer(p.text, policy::built_in_profile_name(name), Authority::profile), true);
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
    auto pat = policy::parse_net_pattern(p);
    if (pat) l.net_allow.push_back({pat->str(), {"--allow-net", 0, 0}});
  }
  for (const auto& p : inv.publish) {
    std::string why;
    auto spec = policy::parse_publish(p, why);
    if (spec) l.publish.push_back({spec->str(), {"--publish", 0, 0}});
  }
  for (const auto& h : inv.allow_ssh) {
    std::string why;
    if (auto host = policy::parse_ssh_host(h, why)) l.ssh.push_back({*host, {"--allow-ssh", 0, 0}});
  }
  for (const auto& name : inv.allow_net_presets) {
    const policy::Source src{"--allow-net-preset " + name, 0, 0};
    if (const auto* p = policy::find_net_preset(name)) {
      for (auto host : p->hosts) l.net_allow.push_back({std::string(host), src});
      l.net_presets.push_back({name, src});
    }
  }
  if (inv.ephemeral_home) l.home_persist = policy::Flag{false, {"--ephemeral-home", 0, 0}};
  if (inv.memory || inv.pids || inv.cpus) {
    l.limits = policy::Limits{};
    l.limits->src = {"command line", 0, 0};
    std::string why;  // checked by cli::parse
    if (inv.memory)
      if (auto m = policy::parse_memory_size(*inv.memory, why)) l.limits->memory = policy::SizeSetting{*m, {"--memory", 0, 0}};
    if (inv.pids)
      if (auto n = policy::parse_count(*inv.pids, why)) l.limits->pids = policy::CountSetting{*n, {"--pids", 0, 0}};
    if (inv.cpus)
      if (auto n = policy::parse_cpus(*inv.cpus, why)) l.limits->cpus = policy::CountSetting{*n, {"--cpus", 0, 0}};
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

namespace {

// The same cap as policy::load_file's.
constexpr size_t kMaxPolicyFile = 1 << 20;

// The project's .pi/jail.toml, written by the jail: read beneath the
// workspace without following a symlink anywhere, without waiting on a
// FIFO, and capped (util/untrusted.h).
void load_project(LoadedPolicy& lp, const std::string& workspace) {
  const std::string project = workspace + "/.pi/jail.toml";
  auto text = util::read_untrusted_file(project, kMaxPolicyFile);
  if (!text) {
    lp.errors.push_back(problem(project, text.error().message() + "; a project file must be a regular file"));
    lp.info.push_back({Authority::project, project, true});
  } else if (!*text) {
    lp.info.push_back({Authority::project, project, false});
  } else {
    add(lp, policy::load_layer(**text, project, Authority::project), true);
  }
}

}  // namespace

LoadedPolicy load_policy(const cli::Invocation& inv, const Places& places) {
  const std::string& home = places.home;
  LoadedPolicy lp;
  load_profile(lp, "builtin");
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
    if (auto pat = policy::parse_net_pattern(p); !pat)
      lp.errors.push_back(problem("--allow-net", fmt::format("bad network pattern \"{}\": {}", p, pat.error().what())));
  }
  for (const auto& p : inv.publish) {
    std::string why;
    if (!policy::parse_publish(p, why))
      lp.errors.push_back(problem("--publish", fmt::format("bad publish \"{}\": {}", p, why)));
  }
  for (const auto& h : inv.allow_ssh) {
    std::string why;
    if (!policy::parse_ssh_host(h, why))
      lp.errors.push_back(problem("--allow-ssh", fmt::format("bad ssh host \"{}\": {}", h, why)));
  }
  for (const auto& p : inv.allow_net_presets)
    if (!policy::find_net_preset(p)) {
      std::string known;
      for (const auto& n : policy::net_presets()) known += (known.empty() ? "" : ", ") + std::string(n.name);
      lp.errors.push_back(problem("--allow-net-preset", fmt::format("unknown preset \"{}\" (known: {})", p, known)));
    }
  policy::Layer cli = command_line_layer(inv);
  lp.info.push_back({cli.authority, cli.name, true});
  lp.layers.push_back(std::move(cli));

  if (!inv.no_project_config) {
    load_project(lp, places.workspace);
  } else {
    lp.info.push_back({Authority::project, "(ignored: --no-project-config)", false});
  }

  const char* xdg_config = std::getenv("XDG_CONFIG_HOME");
  const std::string state = state_dir();
  const std::string data = data_dir();
  policy::Context ctx{places.workspace,
                      home,
                      places.cwd,
                      {{"pi_agent_dir", places.agent_dir},
                       {"pi_jail_state", state.empty() ? home + "/.local/state/pi-jail" : state},
                       {"pi_jail_data", data.empty() ? home + "/.local/share/pi-jail" : data},
                       {"pi_jail_config",
                        (xdg_config && *xdg_config == '/' ? std::string(xdg_config) : home + "/.config") + "/pi-jail"}},
                      real_path,
                      places.worktree};
  ctx.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  ctx.ram_bytes = ram_bytes();
  ctx.program = places.program;
  lp.resolved = resolve_policy(lp.layers, ctx);
  lp.ctx = std::move(ctx);
  return lp;
}

policy::Resolved resolve_policy(const std::vector<policy::Layer>& layers, const policy::Context& ctx) {
  util::RealPaths real_paths;
  policy::Context cached = ctx;
  cached.realpath = [&real_paths](const std::string& p) { return real_paths.real(p); };
  return policy::resolve(layers, cached);
}

}  // namespace pj::supervisor
