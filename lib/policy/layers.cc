#include "policy/layers.h"

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
#include "util/real_paths.h"
#include "util/untrusted.h"

namespace pj::policy {

namespace {

std::optional<std::string> real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

void add(LoadedPolicy& lp, Loaded loaded, bool present) {
  lp.info.push_back({loaded.layer.authority, loaded.layer.name, present});
  lp.errors.insert(lp.errors.end(), loaded.errors.begin(), loaded.errors.end());
  lp.layers.push_back(std::move(loaded.layer));
}

Diagnostic problem(std::string where, std::string message) {
  Diagnostic d;
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
    add(lp, load_file(name, Authority::profile, Presence::required), true);
    return;
  }
  std::string known;
  for (const auto& p : embedded_profiles()) {
    if (p.name == name) {
      if (auto built = prebuilt_profile(name))
        add(lp, Loaded{std::move(*built), {}}, true);
      else
        add(lp, load_layer(p.text, built_in_profile_name(name), Authority::profile), true);
      return;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  lp.errors.push_back(
      problem("--profile", fmt::format("no profile named \"{}\" (built in: {}; or give a .toml file)", name, known)));
}

Layer command_line_layer(const CommandLine& cl) {
  Layer l;
  l.authority = Authority::command_line;
  l.name = "command line";
  for (const auto& p : cl.allow_read) l.read.push_back({p, {"--allow-read", 0, 0}});
  for (const auto& p : cl.allow_write) l.write.push_back({p, {"--allow-write", 0, 0}});
  for (const auto& p : cl.deny) l.deny.push_back({p, {"--deny", 0, 0}});
  for (const auto& p : cl.allow_net) {
    auto pat = parse_net_pattern(p);
    if (pat) l.net_allow.push_back({pat->str(), {"--allow-net", 0, 0}});
  }
  for (const auto& p : cl.publish) {
    std::string why;
    auto spec = parse_publish(p, why);
    if (spec) l.publish.push_back({spec->str(), {"--publish", 0, 0}});
  }
  for (const auto& h : cl.allow_ssh) {
    std::string why;
    if (auto host = parse_ssh_host(h, why)) l.ssh.push_back({*host, {"--allow-ssh", 0, 0}});
  }
  for (const auto& name : cl.allow_net_presets) {
    const Source src{"--allow-net-preset " + name, 0, 0};
    if (const auto* p = find_net_preset(name)) {
      for (auto host : p->hosts) l.net_allow.push_back({std::string(host), src});
      l.net_presets.push_back({name, src});
    }
  }
  if (cl.ephemeral_home) l.home_persist = Flag{false, {"--ephemeral-home", 0, 0}};
  if (cl.memory || cl.pids || cl.cpus) {
    l.limits = Limits{};
    l.limits->src = {"command line", 0, 0};
    std::string why;  // checked by the command-line parser
    if (cl.memory)
      if (auto m = parse_memory_size(*cl.memory, why)) l.limits->memory = SizeSetting{*m, {"--memory", 0, 0}};
    if (cl.pids)
      if (auto n = parse_count(*cl.pids, why)) l.limits->pids = CountSetting{*n, {"--pids", 0, 0}};
    if (cl.cpus)
      if (auto n = parse_cpus(*cl.cpus, why)) l.limits->cpus = CountSetting{*n, {"--cpus", 0, 0}};
  }
  return l;
}

// The same cap as load_file's.
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
    add(lp, load_layer(**text, project, Authority::project), true);
  }
}

}  // namespace

LoadedPolicy load_policy(const CommandLine& cl, const Places& places) {
  const std::string& home = places.home;
  LoadedPolicy lp;
  load_profile(lp, "builtin");
  load_profile(lp, cl.profile);

  if (cl.config) {
    add(lp, load_file(*cl.config, Authority::system, Presence::required), true);
  } else {
    const std::string system = "/etc/pi-jail/policy.toml";
    add(lp, load_file(system, Authority::system, Presence::optional), exists(system));
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    std::string user = (xdg && *xdg == '/' ? std::string(xdg) : home + "/.config") + "/pi-jail/policy.toml";
    add(lp, load_file(user, Authority::user, Presence::optional), exists(user));
  }

  for (const auto& p : cl.allow_net) {
    if (auto pat = parse_net_pattern(p); !pat)
      lp.errors.push_back(problem("--allow-net", fmt::format("bad network pattern \"{}\": {}", p, pat.error().what())));
  }
  for (const auto& p : cl.publish) {
    std::string why;
    if (!parse_publish(p, why))
      lp.errors.push_back(problem("--publish", fmt::format("bad publish \"{}\": {}", p, why)));
  }
  for (const auto& h : cl.allow_ssh) {
    std::string why;
    if (!parse_ssh_host(h, why))
      lp.errors.push_back(problem("--allow-ssh", fmt::format("bad ssh host \"{}\": {}", h, why)));
  }
  for (const auto& p : cl.allow_net_presets)
    if (!find_net_preset(p)) {
      std::string known;
      for (const auto& n : net_presets()) known += (known.empty() ? "" : ", ") + std::string(n.name);
      lp.errors.push_back(problem("--allow-net-preset", fmt::format("unknown preset \"{}\" (known: {})", p, known)));
    }
  Layer line = command_line_layer(cl);
  lp.info.push_back({line.authority, line.name, true});
  lp.layers.push_back(std::move(line));

  if (!cl.no_project_config) {
    load_project(lp, places.workspace);
  } else {
    lp.info.push_back({Authority::project, "(ignored: --no-project-config)", false});
  }

  const char* xdg_config = std::getenv("XDG_CONFIG_HOME");
  const std::string& state = places.state_dir;
  const std::string& data = places.data_dir;
  // The profile's variables first: the order in which an unknown
  // variable's error lists them.
  std::vector<std::pair<std::string, std::string>> vars = places.vars;
  vars.insert(vars.end(),
              {{"pi_jail_state", state.empty() ? home + "/.local/state/pi-jail" : state},
               {"pi_jail_data", data.empty() ? home + "/.local/share/pi-jail" : data},
               {"pi_jail_config",
                (xdg_config && *xdg_config == '/' ? std::string(xdg_config) : home + "/.config") + "/pi-jail"}});
  Context ctx{places.workspace, home, places.cwd, std::move(vars), real_path, places.worktree};
  ctx.placed = places.placed;
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

Resolved resolve_policy(const std::vector<Layer>& layers, const Context& ctx) {
  util::RealPaths real_paths;
  Context cached = ctx;
  cached.realpath = [&real_paths](const std::string& p) { return real_paths.real(p); };
  return resolve(layers, cached);
}

}  // namespace pj::policy
