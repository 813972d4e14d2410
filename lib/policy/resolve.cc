// resolve(): layers -> Policy. Operators grant; the system file's limits
// bound every layer below it; the user file's limits bound the project;
// a project only requests. Denies from any layer win.
#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

#include "policy/policy.h"
#include "util/paths.h"

namespace pj::policy {

using util::path_within;

std::string Refusal::str() const {
  std::string s = fmt::format("{}: {}: {}", request.str(), what, reason);
  if (limit) s += fmt::format(" (limit: {})", limit->str());
  return s;
}

namespace {

// Does limit pattern `l` cover request pattern `r`? Both normalised.
bool net_covers(const NetPattern& l, const NetPattern& r) {
  bool host_ok;
  if (l.wildcard) {
    std::string suffix = "." + l.host;  // ".example.com"
    std::string rh = "." + r.host;
    host_ok = rh.size() > suffix.size() ? rh.ends_with(suffix) : rh == suffix && r.wildcard;
  } else {
    host_ok = !r.wildcard && r.host == l.host;
  }
  if (!host_ok) return false;
  if (l.port == 0) return r.port == 0 || r.port == 80 || r.port == 443;
  return r.port == l.port;
}

// Is `inner` at most `outer`? nullopt when a share of RAM meets a size
// and the RAM is unknown.
std::optional<bool> size_within(const MemorySize& inner, const MemorySize& outer, std::uint64_t ram) {
  if (inner.unit == outer.unit) return inner.value <= outer.value;
  auto i = inner.bytes(ram), o = outer.bytes(ram);
  if (!i || !o) return std::nullopt;
  return *i <= *o;
}

bool env_covers(std::string_view l, std::string_view r) {
  bool lg = l.ends_with("*"), rg = r.ends_with("*");
  if (!lg) return !rg && l == r;
  l.remove_suffix(1);
  if (rg) r.remove_suffix(1);
  return r.starts_with(l);
}

}  // namespace

struct Resolver {
  const Context& ctx;
  Resolved out;
  Policy pol;

  // Limits, per key: the entries in force and the layer that set them.
  // What a limit bounds, and so how an entry is tested against it.
  enum class Bounded { paths, hosts, env_names };
  struct Bound {
    explicit Bound(Bounded w) : what(w) {}
    void limit_to(std::vector<Entry> e) { entries = std::move(e), set = true; }
    Bounded what;
    std::vector<Entry> entries;  // paths expanded; network normalised
    bool set = false;
  };
  struct Bounds {
    Bound read{Bounded::paths}, write{Bounded::paths}, network{Bounded::hosts}, env{Bounded::env_names};
  };
  Bounds system_bounds;                       // bound user, command line and project
  std::optional<SizeSetting> system_scratch;  // bounds the user's
  // The system file's resource limits bound every later layer; what is in
  // force (pol.memory_ ...) bounds the project.
  std::optional<SizeSetting> system_memory;
  std::optional<CountSetting> system_pids, system_cpus;
  Bounds project_bounds;  // bound the project

  explicit Resolver(const Context& c) : ctx(c) {}

  void error(const Source& s, std::string msg) { out.errors.push_back({s, std::move(msg)}); }

  // A network entry as a rule (the layer checked its pattern; a pattern
  // that does not parse here is an error, never a rule dropped).
  void net_rule(std::vector<Policy::NetRule>& dst, const Entry& e,
                PrivateRanges private_ranges = PrivateRanges::refused) {
    auto p = parse_net_pattern(e.text);
    if (!p) return error(e.src, fmt::format("bad network pattern \"{}\": {}", e.text, p.error().what()));
    dst.push_back({*p, e.src, private_ranges});
  }
  Authority current = Authority::profile;  // the layer being resolved
  void refuse(const Source& s, std::string what, std::string reason, std::optional<Source> limit = std::nullopt) {
    out.refused.push_back({s, std::move(what), std::move(reason), std::move(limit), current});
  }

  // One pass over the policy text: "~" or "~/" at the start, and each
  // ${name}, are replaced by their values, and scanning goes on AFTER the
  // inserted value. A value is never scanned again: a workspace directory
  // literally named "${pi_agent_dir}" stays a name.
  std::optional<std::string> substitute(std::string_view text, std::string& why) const {
    std::vector<std::pair<std::string, std::string>> vars{{"home", ctx.home}, {"workspace", ctx.workspace}};
    vars.insert(vars.end(), ctx.vars.begin(), ctx.vars.end());
    std::string result;
    if (text == "~" || text.starts_with("~/")) {
      result = ctx.home;
      text.remove_prefix(1);
    }
    while (!text.empty()) {
      size_t at = text.find("${");
      result.append(text.substr(0, at));
      if (at == std::string_view::npos) break;
      size_t close = text.find('}', at);
      std::string_view name = close == std::string_view::npos ? "" : text.substr(at + 2, close - at - 2);
      auto known = std::find_if(vars.begin(), vars.end(), [&](const auto& v) { return v.first == name; });
      if (known == vars.end()) {
        std::string list;
        for (const auto& v : vars) list += "${" + v.first + "}, ";
        why = "unknown variable (known: " + list + "~)";
        return std::nullopt;
      }
      result += known->second;
      text.remove_prefix(close + 1);
    }
    return result;
  }

  // "~", "~/x", "${home}", "${workspace}"; relative paths are relative to
  // the workspace (project) or the current directory (command line).
  std::optional<std::string> expand(const Entry& e, Authority a, std::string& why) {
    auto substituted = substitute(e.text, why);
    if (!substituted) return std::nullopt;
    std::string t = std::move(*substituted);
    std::string base = "/";
    if (t.front() != '/') {
      if (a == Authority::project)
        base = ctx.workspace;
      else if (a == Authority::command_line)
        base = ctx.cwd;
      else {
        why = "operator paths must be absolute (or start with ~ or ${workspace})";
        return std::nullopt;
      }
    }
    auto norm = util::normalize_path(t, base);
    if (!norm) {
      why = norm.error().message();
      return std::nullopt;
    }
    return *norm;
  }

  // A limit root: resolved through symlinks when it exists.
  std::string limit_root(const std::string& p) {
    auto r = ctx.realpath(p);
    return r ? *r : p;
  }

  void load_bounds(const Layer& l, Bounds& b, const Bounds* within) {
    if (!l.limits) return;
    auto take = [&](const std::optional<std::vector<Entry>>& src, Bound& dst, const Bound* outer, const char* key) {
      if (!src) return;
      dst.entries.clear();
      dst.set = true;
      for (const auto& e : *src) {
        Entry x = e;
        if (dst.what == Bounded::paths) {
          std::string why;
          auto p = expand(e, Authority::system, why);
          if (!p) {
            error(e.src, fmt::format("limits.{} \"{}\": {}", key, e.text, why));
            continue;
          }
          x.text = limit_root(*p);
        } else if (dst.what == Bounded::hosts) {
          // Loaded layers are checked already; a layer made in code is
          // held to the same parser, never dropped as "covers nothing".
          auto p = parse_net_pattern(e.text);
          if (!p) {
            error(e.src, fmt::format("limits.{} bad network pattern \"{}\": {}", key, e.text, p.error().what()));
            continue;
          }
          x.text = p->str();
        }
        if (outer && outer->set && !covered(x, *outer)) {
          refuse(e.src, fmt::format("limits.{} {}", key, e.text), "wider than the system operator's limit",
                 outer->entries.empty() ? std::nullopt : std::optional<Source>(outer->entries.front().src));
          continue;
        }
        dst.entries.push_back(x);
      }
    };
    take(l.limits->read, b.read, within ? &within->read : nullptr, "read");
    take(l.limits->write, b.write, within ? &within->write : nullptr, "write");
    take(l.limits->network, b.network, within ? &within->network : nullptr, "network");
    take(l.limits->env, b.env, within ? &within->env : nullptr, "env");
  }

  // `[limits] scratch` of an operator layer: the profile's and the system
  // file's are taken; the user file's only within the system file's.
  void scratch_limit(const Layer& l) {
    if (!l.limits || !l.limits->scratch) return;
    const SizeSetting& s = *l.limits->scratch;
    if (l.authority == Authority::user && system_scratch) {
      auto ok = size_within(s.size, system_scratch->size, ctx.ram_bytes);
      if (!ok || !*ok) {
        refuse(s.src, fmt::format("limits.scratch {}", s.size.str()),
               ok ? "larger than the system operator's limit"
                  : "cannot be compared with the system operator's limit (the host's RAM is unknown)",
               system_scratch->src);
        return;
      }
    }
    if (l.authority == Authority::system) system_scratch = s;
    pol.scratch_ = s;
  }

  // memory, pids and cpus of any layer: the system file's bound the rest;
  // a project may only lower what is in force. Sets `dst` to `asked`
  // when taken; a refusal names the limit it exceeds.
  template <class T, class Within, class Str>
  void resource_limit(const std::optional<T>& asked, std::optional<T>& system_bound, std::optional<T> in_force,
                      std::optional<T>& dst, Authority a, const char* key, Within within, Str str) {
    if (!asked) return;
    auto check = [&](const T& bound, const char* whose) {
      auto ok = within(*asked, bound);
      if (ok && *ok) return true;
      refuse(asked->src, fmt::format("limits.{} {}", key, str(*asked)),
             ok ? fmt::format("more than {} ({})", whose, str(bound))
                : "cannot be compared with the limit in force (the host's RAM is unknown)",
             bound.src);
      return false;
    };
    if (a != Authority::system && a != Authority::profile && system_bound &&
        !check(*system_bound, "the system operator's limit"))
      return;
    if (a == Authority::project && in_force && !check(*in_force, "the operators' limit: a project may only lower it"))
      return;
    if (a == Authority::system) system_bound = asked;
    dst = *asked;
  }

  void resource_limits(const Layer& l) {
    if (!l.limits) return;
    const Limits& lim = *l.limits;
    auto size_ok = [&](const SizeSetting& x, const SizeSetting& b) {
      return size_within(x.size, b.size, ctx.ram_bytes);
    };
    auto size_str = [](const SizeSetting& x) { return x.size.str(); };
    auto count_ok = [](const CountSetting& x, const CountSetting& b) {
      return std::optional<bool>(x.value <= b.value);
    };
    auto pids_str = [](const CountSetting& x) { return std::to_string(x.value); };
    auto cpus_fmt = [](const CountSetting& x) { return cpus_str(x.value); };
    std::optional<SizeSetting> memory = pol.memory_;
    resource_limit(lim.memory, system_memory, pol.memory_, memory, l.authority, "memory", size_ok, size_str);
    pol.memory_ = memory;
    std::optional<CountSetting> pids = pol.pids_;
    resource_limit(lim.pids, system_pids, pids, pids, l.authority, "pids", count_ok, pids_str);
    pol.pids_ = *pids;
    std::optional<CountSetting> cpus = pol.cpus_;
    resource_limit(lim.cpus, system_cpus, pol.cpus_, cpus, l.authority, "cpus", count_ok, cpus_fmt);
    pol.cpus_ = cpus;
    if (l.authority == Authority::project) {
      if (lim.scratch) {
        std::optional<SizeSetting> none, scratch = pol.scratch_;
        resource_limit(lim.scratch, none, scratch, scratch, l.authority, "scratch", size_ok, size_str);
        pol.scratch_ = *scratch;
      }
      return;
    }
    if (lim.cgroup) {
      pol.cgroups_.clear();
      for (const auto& e : *lim.cgroup) {
        if (!e.text.starts_with("/"))
          error(e.src, fmt::format("limits.cgroup \"{}\": must be an absolute path", e.text));
        else
          pol.cgroups_.push_back({e.text, e.src});
      }
    }
  }

  // Whether `x` is within the limit `b`. A limit's network patterns are
  // checked in load_bounds(), an entry's where it is read (layer.cc,
  // net_rule()); one that does not parse is covered by nothing.
  static bool covered(const Entry& x, const Bound& b) {
    for (const auto& l : b.entries) {
      switch (b.what) {
        case Bounded::paths:
          if (path_within(x.text, l.text)) return true;
          break;
        case Bounded::hosts: {
          auto lp = parse_net_pattern(l.text), rp = parse_net_pattern(x.text);
          if (lp && rp && net_covers(*lp, *rp)) return true;
          break;
        }
        case Bounded::env_names:
          if (env_covers(l.text, x.text)) return true;
          break;
      }
    }
    return false;
  }

  const Entry* covering(const std::string& path, const Bound& b) {
    for (const auto& l : b.entries)
      if (path_within(path, l.text)) return &l;
    return nullptr;
  }

  // Why a grant of `real` (resolved) cannot be applied because the jail
  // makes that directory itself, or "". The host's /proc would show every
  // host process (and their /proc/PID/root) inside; a whole /dev or /etc
  // would collide with the jail's own entries there.
  static std::string jail_builds_its_own(const std::string& real) {
    if (path_within(real, "/proc"))
      return "the jail has its own /proc, showing its own processes; the host's would show every host process: "
             "leave it out";
    if (real == "/dev")
      return "the jail builds its own /dev (null, zero, full, random, urandom, tty, its own pts and shm); grant "
             "single device files instead (e.g. /dev/kvm)";
    if (real == "/etc")
      return "the jail shows a chosen set of /etc files and makes some itself; grant the files or directories "
             "the command needs instead (e.g. /etc/ssl)";
    return "";
  }

  // A path grant from layer `l`. Returns the resolved path when applied.
  void path_grant(const Entry& e, const Layer& l, PathAccess access, const Bounds* bounds) {
    const char* verb = access == PathAccess::read_write ? "write" : "read";
    std::string why;
    auto p = expand(e, l.authority, why);
    if (!p) {
      if (l.authority == Authority::project)
        refuse(e.src, fmt::format("{} {}", verb, e.text), why);
      else
        error(e.src, fmt::format("{} \"{}\": {}", verb, e.text, why));
      return;
    }
    auto real = ctx.realpath(*p);
    if (!real) {
      // Typed on this command line: the operator asked for it now, and a
      // run without it is not what was asked for.
      if (l.authority == Authority::command_line)
        error(e.src, fmt::format("{} does not exist; create it first (mkdir -p {}) or leave the option out", *p, *p));
      else
        refuse(e.src, fmt::format("{} {}", verb, e.text), "does not exist");
      return;
    }
    if (*real == "/") {
      // The whole host: every user's files, /proc, the host's sockets.
      const std::string whole = *p == "/" ? std::string("this grant covers / (the whole host)")
                                          : fmt::format("{} resolves to / (the whole host)", *p);
      if (l.authority == Authority::project)
        refuse(e.src, fmt::format("{} {}", verb, e.text), whole);
      else
        error(e.src, fmt::format("{} \"{}\": {}; name the directories the command needs instead", verb, e.text, whole));
      return;
    }
    if (auto why_not = jail_builds_its_own(*real); !why_not.empty()) {
      if (l.authority == Authority::project)
        refuse(e.src, fmt::format("{} {}", verb, e.text), why_not);
      else
        error(e.src, fmt::format("{} \"{}\": {}", verb, e.text, why_not));
      return;
    }
    std::string shown = *real == *p ? *p : fmt::format("{} (resolves to {})", *p, *real);
    if (bounds) {
      // Writing needs the write limit; reading either limit.
      const Bound& wb = bounds->write;
      bool ok_write = !wb.set || covering(*real, wb);
      bool ok_read = ok_write || !bounds->read.set || covering(*real, bounds->read);
      bool ok = access == PathAccess::read_write ? ok_write : ok_read;
      if (!ok) {
        const Bound& b = access == PathAccess::read_write ? wb : bounds->read;
        refuse(e.src, fmt::format("{} {}", verb, e.text), fmt::format("{} is outside the {} limit", shown, verb),
               b.entries.empty() ? std::nullopt : std::optional<Source>(b.entries.front().src));
        return;
      }
    }
    if (l.authority == Authority::project) {
      for (const auto& d : pol.denies_)
        if (path_within(*real, d.path)) {
          refuse(e.src, fmt::format("{} {}", verb, e.text), fmt::format("{} is denied", shown), d.src);
          return;
        }
      if (access == PathAccess::read_write)
        for (const auto& r : pol.read_only_)
          if (path_within(*real, r.path)) {
            refuse(e.src, fmt::format("write {}", e.text), fmt::format("{} is kept read-only", shown), r.src);
            return;
          }
    }
    pol.grants_.push_back({*real, access, e.src, l.authority});
  }

  // Masks apply to what the path resolves to (the object reachable
  // inside), or the path itself when absent. Read-only marks keep the path
  // as written: the planner must see a symlink there to refuse it.
  void path_rule(const Entry& e, const Layer& l, std::vector<Policy::PathRule>& dst, const char* what,
                 bool resolve_links) {
    std::string why;
    auto p = expand(e, l.authority, why);
    if (!p) {
      if (l.authority == Authority::project)
        refuse(e.src, fmt::format("{} {}", what, e.text), why);
      else
        error(e.src, fmt::format("{} \"{}\": {}", what, e.text, why));
      return;
    }
    auto real = resolve_links ? ctx.realpath(*p) : std::nullopt;
    dst.push_back({real ? *real : *p, e.src, e.text.ends_with("/")});
  }

  void operator_layer(const Layer& l) {
    scratch_limit(l);
    resource_limits(l);
    const bool bounded = l.authority == Authority::user || l.authority == Authority::command_line;
    const Bounds* b = bounded ? &system_bounds : nullptr;
    for (const auto& e : l.system) {
      std::string why;
      auto p = expand(e, l.authority, why);
      if (!p)
        error(e.src, fmt::format("system \"{}\": {}", e.text, why));
      else
        pol.system_.push_back({*p, e.src});
    }
    for (const auto& e : l.deny) path_rule(e, l, pol.denies_, "deny", true);
    for (const auto& e : l.read_only) path_rule(e, l, pol.read_only_, "read_only", false);
    for (const auto& e : l.read) path_grant(e, l, PathAccess::read_only, b);
    for (const auto& e : l.write) path_grant(e, l, PathAccess::read_write, b);
    for (const auto& e : l.private_dirs) private_dir(e, l);
    for (const auto& e : l.write_back) write_back_file(e, l);
    for (const auto& e : l.sockets) socket_grant(e, l);
    for (const auto& e : l.publish) publish(e);
    for (const auto& e : l.ssh) {
      if (b && b->network.set && !covered(e, b->network))
        refuse(e.src, fmt::format("ssh {}", e.text), "outside the system operator's network limit");
      else
        ssh_host(e);
    }
    pol.cred_hosts_.insert(pol.cred_hosts_.end(), l.cred_bind.begin(), l.cred_bind.end());
    for (const auto& bind : l.cred_bind) plain_binding_allow(bind, b);
    pol.cred_pass_through_.insert(pol.cred_pass_through_.end(), l.cred_pass_through.begin(), l.cred_pass_through.end());
    pol.cred_allow_minting_.insert(pol.cred_allow_minting_.end(), l.cred_allow_minting.begin(),
                                   l.cred_allow_minting.end());
    if (l.cred_logins) {
      pol.cred_logins_ = l.cred_logins->value;
      pol.cred_logins_src_ = l.cred_logins->src;
    }
    if (l.upstream_proxy) upstream_proxy(*l.upstream_proxy);
    for (const auto& e : l.net_allow) {
      if (b && b->network.set && !covered(e, b->network))
        refuse(e.src, fmt::format("network {}", e.text), "outside the system operator's network limit");
      else
        net_rule(pol.net_allow_, e, allows_private(l, e) ? PrivateRanges::allowed : PrivateRanges::refused);
    }
    for (const auto& e : l.net_deny) net_rule(pol.net_deny_, e);
    for (const auto& e : l.env_pass) {
      if (b && b->env.set && !covered(e, b->env))
        refuse(e.src, fmt::format("env {}", e.text), "outside the system operator's env limit");
      else
        pol.env_pass_.push_back({e.text, e.src});
    }
    for (const auto& s : l.env_set) pol.env_set_.push_back(s);
    if (l.landlock) {
      pol.landlock_ = l.landlock->value;
      pol.landlock_src_ = l.landlock->src;
    }
    if (l.home_persist) pol.home_persist_ = *l.home_persist;
    if (l.unsafe_allow_ptrace) pol.ptrace_ = *l.unsafe_allow_ptrace;
    if (l.unsafe_nested_user_namespaces) pol.nested_userns_ = *l.unsafe_nested_user_namespaces;
    if (l.compile_cache) pol.compile_cache_ = *l.compile_cache;
    if (l.on_excess) out.on_excess = l.on_excess->value;
  }

  // A plain-HTTP binding names a host loopback port: the jail may reach
  // it, as an allow rule naming it would let it, with the bind as the
  // rule's source (explain shows where the opening came from).
  void plain_binding_allow(const Layer::CredentialHost& bind, const Bounds* b) {
    if (!bind.host.text.starts_with("http://")) return;
    Entry allow{bind.host.text.substr(7), bind.host.src};
    if (b && b->network.set && !covered(allow, b->network))
      return error(bind.host.src, fmt::format("credentials.bind.{} \"{}\" cannot be honoured: the jail may not reach "
                                              "{}, which is outside the system operator's network limit",
                                              bind.credential, bind.host.text, allow.text));
    net_rule(pol.net_allow_, allow);
  }

  // Every plain-HTTP binding can be honoured: no deny keeps the jail from
  // its port, and no binding wants TLS on the same port (a port speaks
  // one or the other; the filter would serve it one way and fail the other).
  void check_plain_bindings() {
    for (const auto& bind : pol.cred_hosts_) {
      if (!bind.host.text.starts_with("http://")) continue;
      auto p = parse_net_pattern(bind.host.text.substr(7));
      if (!p) continue;  // the loader checked it
      const std::string what =
          fmt::format("credentials.bind.{} \"{}\" cannot be honoured", bind.credential, bind.host.text);
      for (const auto& d : pol.net_deny_)
        if (net_covers(d.pattern, *p))
          error(bind.host.src, fmt::format("{}: the deny rule \"{}\" ({}) keeps the jail from reaching it", what,
                                           d.pattern.str(), d.src.str()));
      for (const auto& other : pol.cred_hosts_) {
        if (other.host.text.starts_with("http://")) continue;
        auto o = parse_net_pattern(other.host.text);
        if (o && o->port == p->port && net::is_loopback_host(o->host))
          error(bind.host.src, fmt::format("{}: {} binds port {} for TLS ({}); write http:// there too, or use "
                                           "another port",
                                           what, other.credential, p->port, other.host.src.str()));
      }
    }
  }

  static bool allows_private(const Layer& l, const Entry& e) {
    for (const auto& p : l.net_allow_private)
      if (p.text == e.text && p.src.line == e.src.line && p.src.column == e.src.column) return true;
    return false;
  }

  // An operator's deny covering a project's request: the project cannot
  // out-specify it (the most specific rule decides at run time).
  const Policy::NetRule* denied_by(const Entry& e) const {
    auto rp = parse_net_pattern(e.text);
    for (const auto& d : pol.net_deny_)
      if (rp && net_covers(d.pattern, *rp)) return &d;
    return nullptr;
  }

  void project_layer(const Layer& l) {
    const Bounds& b = project_bounds;
    for (const auto& e : l.deny) path_rule(e, l, pol.denies_, "deny", true);  // narrowing: always fine
    for (const auto& e : l.read_only) path_rule(e, l, pol.read_only_, "read_only", false);
    for (const auto& e : l.system) path_grant(e, l, PathAccess::read_only, &b);
    for (const auto& e : l.read) path_grant(e, l, PathAccess::read_only, &b);
    for (const auto& e : l.write) path_grant(e, l, PathAccess::read_write, &b);
    for (const auto& e : l.net_allow) {
      const Policy::NetRule* deny = denied_by(e);
      if (allows_private(l, e))
        refuse(e.src, fmt::format("network {} (allow_private)", e.text),
               "allow_private is set by operators, not by projects");
      else if (!covered(e, b.network))
        refuse(e.src, fmt::format("network {}", e.text), "outside the network limit",
               b.network.entries.empty() ? std::nullopt : std::optional<Source>(b.network.entries.front().src));
      else if (deny)
        refuse(e.src, fmt::format("network {}", e.text), "an operator's deny covers it", deny->src);
      else
        net_rule(pol.net_allow_, e);
    }
    for (const auto& e : l.net_deny) {
      // A project narrows: its deny wins over the operators' allows it
      // covers, even the more specific ones (which decide otherwise).
      auto dp = parse_net_pattern(e.text);
      std::erase_if(pol.net_allow_, [&](const Policy::NetRule& a) { return dp && net_covers(*dp, a.pattern); });
      net_rule(pol.net_deny_, e);
    }
    for (const auto& e : l.env_pass) {
      if (!covered(e, b.env))
        refuse(e.src, fmt::format("env {}", e.text), "outside the env limit");
      else
        pol.env_pass_.push_back({e.text, e.src});
    }
    for (const auto& s : l.env_set) {
      if (!covered(Entry{s.name, s.src}, b.env))
        refuse(s.src, fmt::format("env.set {}", s.name), "outside the env limit");
      else
        pol.env_set_.push_back(s);
    }
    if (l.limits) {
      // A project may lower the resource limits (resource_limits); it
      // sets no bounds and names no cgroup.
      const Limits& lim = *l.limits;
      if (lim.read || lim.write || lim.network || lim.env || lim.cgroup)
        refuse(l.limits->src, "[limits]",
               "bounds and cgroups are set by operators, not by projects (a project may only lower memory, pids, "
               "cpus and scratch)");
      resource_limits(l);
    }
    for (const auto& e : l.private_dirs)
      refuse(e.src, "private " + e.text, "private directories are set by operators, not by projects");
    for (const auto& e : l.write_back)
      refuse(e.src, "write_back " + e.text, "write-back is set by operators, not by projects");
    for (const auto& e : l.sockets)
      refuse(e.src, "sockets " + e.text,
             "socket grants are set by operators, not by projects (an agent socket signs and logs in as you)");
    for (const auto& e : l.publish)
      refuse(e.src, "publish " + e.text, "published ports are set by operators, not by projects (--publish)");
    for (const auto& e : l.ssh)
      refuse(e.src, "ssh " + e.text,
             "SSH hosts are set by operators, not by projects (logins to them are signed with your keys; --allow-ssh)");
    for (const auto& bind : l.cred_bind)
      refuse(bind.host.src, fmt::format("credentials.bind {} {}", bind.credential, bind.host.text),
             "credentials are bound to hosts by operators, not by projects");
    for (const auto& e : l.cred_pass_through)
      refuse(e.src, "credentials.pass_through " + e.text, "credentials are passed by operators, not by projects");
    for (const auto& e : l.cred_allow_minting)
      refuse(e.src, "credentials.allow_minting " + e.text,
             "endpoints that mint new credentials are allowed by operators, not by projects");
    if (l.upstream_proxy)
      refuse(l.upstream_proxy->src, "network.upstream_proxy",
             "the upstream proxy is set by operators, not by projects (its address and credentials are the "
             "operator's)");
    if (l.cred_logins)
      refuse(l.cred_logins->src, fmt::format("credentials.logins = \"{}\"", choice_name(l.cred_logins->value)),
             "whether a login inside the jail replaces your credentials is set by operators, not by projects");
    if (l.unsafe_allow_ptrace)
      refuse(l.unsafe_allow_ptrace->src, "unsafe_allow_ptrace", "unsafe_* switches are for operators only");
    if (l.unsafe_nested_user_namespaces)
      refuse(l.unsafe_nested_user_namespaces->src, "unsafe_nested_user_namespaces",
             "unsafe_* switches are for operators only");
    if (l.landlock) {
      if (l.landlock->value == LandlockUse::required) {
        pol.landlock_ = LandlockUse::required;
        pol.landlock_src_ = l.landlock->src;
      } else if (pol.landlock_ == LandlockUse::required) {
        refuse(l.landlock->src, "landlock = \"if-available\"", "the operator requires Landlock", pol.landlock_src_);
      }
    }
    if (l.on_excess) refuse(l.on_excess->src, "[policy] on_excess", "set by operators, not by projects");
    if (l.compile_cache) refuse(l.compile_cache->src, "[runtime] compile_cache", "set by operators, not by projects");
    if (l.home_persist) refuse(l.home_persist->src, "[home] persist", "set by operators, not by projects");
  }

  // A socket grant: "$NAME[/rest]" takes the caller's variable, then
  // the usual expansion. An unset variable drops the grant (reported: no
  // agent runs), anything else wrong stops the run.
  void socket_grant(const Entry& e, const Layer& l) {
    Entry x = e;
    std::string env;
    if (e.text.starts_with("$") && !e.text.starts_with("${")) {
      size_t end = e.text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", 1);
      env = e.text.substr(1, end == std::string::npos ? std::string::npos : end - 1);
      if (env.empty())
        return error(e.src, fmt::format("sockets \"{}\": $ must be followed by a variable name", e.text));
      auto value = ctx.getenv ? ctx.getenv(env) : std::nullopt;
      if (!value || value->empty())
        return refuse(e.src, "sockets " + e.text, fmt::format("${} is not set in pi-jail's environment", env));
      x.text = *value + (end == std::string::npos ? "" : e.text.substr(end));
      if (end != std::string::npos) env.clear();  // a path below it: the variable keeps its own value
    }
    std::string why;
    auto p = x.text.front() == '/' || x.text.front() == '~' || x.text.starts_with("${") ? expand(x, l.authority, why)
                                                                                        : std::nullopt;
    if (!p) {
      if (why.empty()) why = "a socket path must be absolute";
      return error(e.src, fmt::format("sockets \"{}\" ({}): {}", e.text, x.text, why));
    }
    pol.sockets_.push_back({*p, env, e.src});
  }

  void ssh_host(const Entry& e) {
    auto p = parse_net_pattern(e.text);
    if (!p || p->wildcard || p->port == 0) return error(e.src, fmt::format("ssh \"{}\": not HOST:PORT", e.text));
    for (const auto& other : pol.ssh_hosts_)
      if (other.pattern == *p) return;  // the same host twice: the first source stays
    pol.ssh_hosts_.push_back({*p, e.src});
  }

  // The last operator's setting wins. "env": the host's variables, read
  // now (upper case first, as most tools read them); a bad HTTPS_PROXY is
  // an error at the key that asked for it, its password masked.
  void upstream_proxy(const UpstreamProxySetting& s) {
    Policy::UpstreamProxy up;
    up.src = s.src;
    up.url = s.url;
    up.from_env = !s.url;
    pol.upstream_proxy_.reset();
    if (up.from_env) {
      auto first_set = [this](std::initializer_list<const char*> names,
                              std::string& which) -> std::optional<std::string> {
        for (const char* name : names)
          if (auto v = ctx.getenv ? ctx.getenv(name) : std::nullopt; v && !v->empty()) {
            which = name;
            return v;
          }
        return std::nullopt;
      };
      if (auto text = first_set({"HTTPS_PROXY", "https_proxy"}, up.url_var)) {
        auto url = net::parse_proxy_url(*text);
        if (!url)
          return error(s.src, fmt::format("upstream_proxy = \"env\": {} \"{}\": {}", up.url_var,
                                          net::redact_userinfo(*text), url.error().what()));
        up.url = std::move(*url);
      }
      if (auto text = first_set({"NO_PROXY", "no_proxy"}, up.no_proxy_var)) up.no_proxy = net::NoProxy::parse(*text);
    }
    pol.upstream_proxy_ = std::move(up);
  }

  void publish(const Entry& e) {
    std::string why;
    auto p = parse_publish(e.text, why);
    if (!p) return error(e.src, fmt::format("publish \"{}\": {}", e.text, why));
    for (const auto& other : pol.publish_)
      if (other.spec.host_port == p->host_port && other.spec.host_addr == p->host_addr)
        return error(e.src, fmt::format("publish \"{}\": host port {} is already published by {}", e.text, p->host_port,
                                        other.src.str()));
    pol.publish_.push_back({*p, e.src});
  }

  // A private directory: it must exist (resolved: its protections are
  // planned where it really is).
  void private_dir(const Entry& e, const Layer& l) {
    std::string why;
    auto p = expand(e, l.authority, why);
    if (!p) return error(e.src, fmt::format("private \"{}\": {}", e.text, why));
    auto real = ctx.realpath(*p);
    if (!real) return refuse(e.src, "private " + e.text, "does not exist");
    pol.private_dirs_.push_back({*real, e.src, true});
  }

  // A file merged back from a private directory: only names whose rule
  // pi-jail knows (Pi's credentials and settings: pi/agent_state.h).
  void write_back_file(const Entry& e, const Layer& l) {
    std::string why;
    auto p = expand(e, l.authority, why);
    if (!p) return error(e.src, fmt::format("write_back \"{}\": {}", e.text, why));
    const std::string name = p->substr(p->rfind('/') + 1);
    if (name != "auth.json" && name != "settings.json")
      return error(e.src, fmt::format("write_back \"{}\": no merge rule for {} (known: auth.json, settings.json)",
                                      e.text, name));
    std::string dir(util::parent_path(*p));
    std::string real_dir = ctx.realpath(dir).value_or(dir);
    bool in_private = std::any_of(pol.private_dirs_.begin(), pol.private_dirs_.end(),
                                  [&](const Policy::PathRule& d) { return d.path == real_dir; });
    if (!in_private) return error(e.src, fmt::format("write_back \"{}\": not directly in a private directory", e.text));
    pol.write_back_.push_back({real_dir + "/" + name, e.src, false});
  }

  // The main repository's git dir of a checked worktree: a grant pi-jail
  // derives, so it answers to the same rules as a request: never $HOME or
  // an ancestor of it, never under a mask, within the operators' write
  // limits; its hooks, config and the pointer files stay read-only.
  void worktree_grant(const Worktree& w) {
    current = Authority::git_worktree;
    Source src{fmt::format("git worktree {} -> {}", w.dot_git, w.git_dir), 0, 0};
    const std::string what = "write " + w.common_dir;
    const std::string home = limit_root(ctx.home);
    if (w.common_dir == "/" || path_within(home, w.common_dir))
      return refuse(src, what, "it contains your home directory");
    for (const auto& d : pol.denies_)
      if (path_within(w.common_dir, d.path)) return refuse(src, what, "it is denied", d.src);
    if (system_bounds.write.set && !covering(w.common_dir, system_bounds.write))
      return refuse(src, what, "it is outside the operators' write limit",
                    system_bounds.write.entries.empty()
                        ? std::nullopt
                        : std::optional<Source>(system_bounds.write.entries.front().src));
    pol.grants_.push_back({w.common_dir, PathAccess::read_write, src, Authority::git_worktree});
    // Other worktrees' git dirs are kept read-only (their commondir would
    // send the host's git in that worktree to a repository the jail
    // made); this worktree's own is writable again below them.
    pol.grants_.push_back({w.git_dir, PathAccess::read_write, src, Authority::git_worktree});
    auto keep = [&](std::string path, bool directory) { pol.read_only_.push_back({std::move(path), src, directory}); };
    keep(w.common_dir + "/hooks", true);             // run by git on the host
    keep(w.common_dir + "/config", false);           // aliases, core.fsmonitor, filters: commands
    keep(w.common_dir + "/config.worktree", false);  // the same, with extensions.worktreeConfig
    keep(w.common_dir + "/commondir", false);        // would send the host's git elsewhere
    keep(w.common_dir + "/worktrees", true);         // the other worktrees' pointers and config
    keep(w.common_dir + "/modules", true);           // submodules' own config and hooks
    keep(w.git_dir + "/commondir", false);
    keep(w.git_dir + "/gitdir", false);  // the back-link git checks
    keep(w.git_dir + "/config.worktree", false);
    keep(w.dot_git, false);  // the pointer itself
  }

  // A directory the caller places (Context::placed, PlacedDir): what the
  // profile writes there (in place, or as a private copy's files merged
  // back) answers to the system operator's write limit, like a grant on
  // the command line. Outside it the run stops: the program cannot run
  // without it.
  void placed_dir_grants(const PlacedDir& placed) {
    if (!system_bounds.write.set) return;
    auto var = std::find_if(ctx.vars.begin(), ctx.vars.end(), [&](const auto& v) { return v.first == placed.var; });
    if (var == ctx.vars.end() || var->second.empty()) return;
    const std::string dir = limit_root(var->second);
    const Source* by = nullptr;
    for (const auto& g : pol.grants_)
      if (!by && g.by == Authority::profile && g.access == PathAccess::read_write && path_within(g.path, dir))
        by = &g.src;
    for (const auto* list : {&pol.private_dirs_, &pol.write_back_})
      for (const auto& r : *list)
        if (!by && path_within(r.path, dir)) by = &r.src;
    if (!by || covering(dir, system_bounds.write)) return;
    const Bound& wb = system_bounds.write;
    error(*by, fmt::format(
                   "{} {} ({}) is outside the system operator's write limit{}; {}", placed.what, dir, placed.chosen_by,
                   wb.entries.empty() ? "" : fmt::format(" (limit: {})", wb.entries.front().src.str()), placed.fix));
  }

  // What the program needs (Context::program): derived by pi-jail, so it
  // answers to the rules a request does. The system operator's read and
  // write limits bound it (a path the system view shows anyway needs no
  // grant to be seen, so the limit does not apply to it); the user file's
  // limits bound the project only, as for every other grant.
  void program_grant(const ProgramNeed& n) {
    current = Authority::program;
    const bool writes = n.access == PathAccess::read_write;
    const std::string what = (writes ? "write " : "read ") + n.path;
    auto fail = [&](const std::string& reason, std::optional<Source> limit = std::nullopt) {
      if (n.necessity == Necessity::optional) return refuse(n.src, what, reason, std::move(limit));
      error(n.src, fmt::format("the program needs {} {}, and it cannot be granted: {}{}", n.path,
                               writes ? "read-write" : "read-only", reason,
                               limit ? fmt::format(" (limit: {})", limit->str()) : std::string()));
    };
    auto real = ctx.realpath(n.path);
    if (!real) return fail("it does not exist");
    if (*real == "/") return fail("it is / (the whole host)");
    if (auto why = jail_builds_its_own(*real); !why.empty()) return fail(why);
    for (const auto& d : pol.denies_)
      if (path_within(*real, d.path)) return fail(fmt::format("{} is denied", *real), d.src);
    const Bound& rb = system_bounds.read;
    const Bound& wb = system_bounds.write;
    if (writes) {
      // Written in place: the path itself, never what a link leads to.
      if (*real != n.path) return fail(fmt::format("it resolves to {}", *real));
      if (wb.set && !covering(*real, wb))
        return fail(fmt::format("{} is outside the system operator's write limit", *real),
                    wb.entries.empty() ? std::nullopt : std::optional<Source>(wb.entries.front().src));
      pol.grants_.push_back({*real, PathAccess::read_write, n.src, Authority::program});
      return;
    }
    // A read may use either limit, as a request's does.
    if (rb.set && !covering(*real, rb) && !(wb.set && covering(*real, wb))) {
      const bool shown = std::any_of(pol.system_.begin(), pol.system_.end(), [&](const Policy::PathRule& s) {
        return path_within(*real, s.path) || path_within(*real, limit_root(s.path));
      });
      if (!shown)
        return fail(fmt::format("{} is outside the system operator's read limit; add it to [limits] read there, "
                                "or run a program installed within the limit",
                                *real),
                    rb.entries.empty() ? std::nullopt : std::optional<Source>(rb.entries.front().src));
    }
    pol.grants_.push_back({*real, PathAccess::read_only, n.src, Authority::program});
  }

  Resolved run(const std::vector<Layer>& layers) {
    // Project limits default to the workspace and nothing else.
    Source builtin{"built-in default limits", 0, 0};
    project_bounds.read.limit_to({Entry{limit_root(ctx.workspace), builtin}});
    project_bounds.write.limit_to({Entry{limit_root(ctx.workspace), builtin}});
    project_bounds.network.limit_to({});
    project_bounds.env.limit_to({});
    auto adopt = [&](const Bounds& from) {
      if (from.read.set) project_bounds.read = from.read;
      if (from.write.set) project_bounds.write = from.write;
      if (from.network.set) project_bounds.network = from.network;
      if (from.env.set) project_bounds.env = from.env;
    };
    for (const auto& l : layers) {
      current = l.authority;
      switch (l.authority) {
        case Authority::profile: {
          Bounds b;
          load_bounds(l, b, nullptr);
          adopt(b);
          operator_layer(l);
          break;
        }
        case Authority::system:
          load_bounds(l, system_bounds, nullptr);
          adopt(system_bounds);
          operator_layer(l);
          break;
        case Authority::user: {
          Bounds b;
          load_bounds(l, b, &system_bounds);
          adopt(b);
          operator_layer(l);
          break;
        }
        case Authority::command_line: operator_layer(l); break;
        case Authority::project: project_layer(l); break;
        case Authority::git_worktree:    // not a layer: see worktree_grant()
        case Authority::program: break;  // not a layer: see program_grant()
      }
    }
    if (ctx.worktree) worktree_grant(*ctx.worktree);
    for (const auto& placed : ctx.placed) placed_dir_grants(placed);
    for (const auto& n : ctx.program) program_grant(n);
    check_plain_bindings();
    if (out.on_excess == OnExcess::error)
      for (const auto& r : out.refused)
        if (r.by == Authority::project)
          error(r.request, fmt::format("refused (the operator's on_excess = \"error\"): {}: {}", r.what, r.reason));
    if (out.errors.empty()) out.policy = std::move(pol);
    return std::move(out);
  }
};

Resolved resolve(const std::vector<Layer>& layers, const Context& ctx) {
  Resolver r(ctx);
  return r.run(layers);
}

}  // namespace pj::policy
