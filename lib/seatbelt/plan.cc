#include "seatbelt/plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "seatbelt/sbpl.h"
#include "util/paths.h"

namespace pj::seatbelt {

using runtime::Access;
using util::Error;

namespace {

const PathFact kAbsent{};

const PathFact& fact(const Facts& facts, const std::string& path) {
  auto it = facts.find(path);
  return it == facts.end() ? kAbsent : it->second;
}

bool present(const PathFact& f) { return f.kind == PathFact::Kind::directory || f.kind == PathFact::Kind::file; }

// A place the command may read (and maybe write): `filter` is subpath for
// a directory, literal for a file.
struct Root {
  std::string path;
  bool directory;
  Access access;
  std::string why;
};

struct Mark {  // kept read-only, or masked
  std::string path;
  std::string why;
};

// Builds the generated part: names parameters, writes only fixed text.
class Writer {
public:
  std::string param(std::string_view prefix, std::string value, std::string why, bool indexed = true) {
    std::string name = indexed ? fmt::format("{}_{}", prefix, counters_[std::string(prefix)]++) : std::string(prefix);
    params_.push_back({name, std::move(value), std::move(why)});
    return name;
  }
  static std::string ref(std::string_view filter, const std::string& name) {
    return fmt::format("({} (param \"{}\"))", filter, name);
  }
  void line(std::string text) { text_ += text + "\n"; }
  std::string text_;
  std::vector<Param> params_;

private:
  std::map<std::string, int> counters_;
};

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

}  // namespace

std::vector<std::string> paths_to_probe(const PlanInput& in) {
  const auto& r = in.request;
  std::vector<std::string> out{r.workspace, r.cwd, in.tmpdir};
  for (const auto& e : r.system) out.push_back(e.path);
  for (const auto& g : r.grants) out.push_back(g.path);
  for (const auto& d : r.denies) out.push_back(d.path);
  for (const auto& e : r.read_only) out.push_back(e.path);
  for (const auto& p : r.private_dirs) out.push_back(p.path);
  if (!r.exec_path.empty()) out.push_back(r.exec_path);
  return out;
}

util::Result<SeatbeltSpec> plan(const PlanInput& in, const Facts& facts) {
  const auto& r = in.request;
  std::vector<std::string> problems;

  // Where the command may read, and write.
  std::vector<Root> roots;
  auto add_root = [&](const std::string& path, Access access, const std::string& why, bool required) {
    const PathFact& f = fact(facts, path);
    if (!present(f)) {
      if (required)
        problems.push_back(fmt::format("{} {}: {}", why, path,
                                       f.kind == PathFact::Kind::absent ? "no such file or directory"
                                                                        : "not a file or directory"));
      return;
    }
    for (auto& x : roots) {  // one entry per real path; read-write wins
      if (x.path == f.resolved) {
        if (access == Access::read_write) x.access = access;
        return;
      }
    }
    roots.push_back({f.resolved, f.kind == PathFact::Kind::directory, access, why});
  };
  add_root(r.workspace, Access::read_write, "workspace", true);
  add_root(in.tmpdir, Access::read_write, "the run's private TMPDIR", true);
  for (const auto& e : r.system) add_root(e.path, Access::read_only, e.why, false);
  // A private directory (the run's own copy on Linux) has no copy here
  // yet: it is shown read-only, with its write grants (Pi's sessions/).
  for (const auto& p : r.private_dirs)
    add_root(p.path, Access::read_only, p.why + " (read-only: the run's own copy is Linux only)", true);
  for (const auto& g : r.grants) add_root(g.path, g.access, g.why, true);
  if (!r.exec_path.empty()) add_root(r.exec_path, Access::read_only, "the program", true);

  std::vector<Mark> keep, masks;
  for (const auto& e : r.read_only) {
    const PathFact& f = fact(facts, e.path);
    if (f.is_symlink) {
      problems.push_back(runtime::symlink_at_protected_path(e));
      continue;
    }
    if (f.resolved.empty()) continue;
    keep.push_back({f.resolved, e.why});  // absent ones too: they cannot be created
  }
  for (const auto& d : r.denies) {
    const PathFact& f = fact(facts, d.path);
    if (present(f)) masks.push_back({f.resolved, d.why});  // nothing there to hide otherwise
  }
  for (int port : {in.http_port, in.socks_port})
    if (port < 1 || port > 65535) problems.push_back(fmt::format("network filter port {} is out of range", port));
  for (const auto& [addr, port] : r.forwards)
    if (port < 1 || port > 65535) problems.push_back(
          fmt::format("forward {}:{}: port out of range", runtime::loopback_address(addr), port));
  if (!problems.empty()) return Error::invalid(join(problems, "; "));

  Writer w;
  w.line("");
  w.line("; ---- Made from the policy by pi-jail: fixed templates; every path and port");
  w.line("; ---- below is a parameter, passed to sandbox-exec with -D NAME=VALUE.");

  // Parents of every root may be looked at (stat, realpath), not listed.
  std::set<std::string> ancestors;
  for (const auto& root : roots)
    for (std::string p(util::parent_path(root.path)); p != "/" && !p.empty(); p = std::string(util::parent_path(p)))
      ancestors.insert(p);
  if (!ancestors.empty()) {
    std::vector<std::string> lits;
    for (const auto& a : ancestors) lits.push_back(w.ref("literal", w.param("PARENT", a, "a parent of a readable path")));
    w.line("(allow file-read-metadata\n  " + join(lits, "\n  ") + ")");
  }

  // Each root: readable except masks below it; writable roots writable
  // except kept-read-only paths and masks below them. The exclusions are
  // in the rule itself (require-not), so they hold whatever the order.
  std::map<std::string, std::string> mark_param;  // path -> parameter, shared by every rule
  auto mark = [&](const std::string& prefix, const Mark& m) {
    auto key = prefix + "\n" + m.path;
    auto it = mark_param.find(key);
    if (it != mark_param.end()) return it->second;
    return mark_param[key] = w.param(prefix, m.path, m.why);
  };
  std::vector<std::pair<std::string, const Mark*>> keep_names, mask_names;
  for (const auto& m : keep) keep_names.emplace_back(mark("KEEP_RO", m), &m);
  for (const auto& m : masks) mask_names.emplace_back(mark("MASK", m), &m);

  auto rule = [&](std::string_view ops, const std::string& root_ref, const std::vector<std::string>& excluded) {
    if (excluded.empty()) return w.line(fmt::format("(allow {} {})", ops, root_ref));
    std::vector<std::string> parts{root_ref};
    for (const auto& e : excluded) parts.push_back("(require-not " + w.ref("subpath", e) + ")");
    w.line(fmt::format("(allow {}\n  (require-all\n    {}))", ops, join(parts, "\n    ")));
  };
  std::vector<std::string> pins;
  for (const auto& root : roots) {
    std::string name = w.param("ROOT", root.path, root.why);
    std::string ref = w.ref(root.directory ? "subpath" : "literal", name);
    auto below = [&](const std::vector<std::pair<std::string, const Mark*>>& list) {
      std::vector<std::string> out;
      if (!root.directory) return out;
      for (const auto& [n, m] : list)
        if (util::path_within(m->path, root.path)) out.push_back(n);
      return out;
    };
    rule("file-read*", ref, below(mask_names));
    if (root.access != Access::read_write) continue;
    std::vector<std::string> excluded = below(keep_names);
    for (const auto& n : below(mask_names)) excluded.push_back(n);
    rule("file-write*", ref, excluded);
    // A kept path's parents inside the root may not be renamed or removed
    // (mv .git .git2; mkdir -p .git/hooks would rebuild it writable).
    for (const auto& [n, m] : keep_names) {
      if (!util::path_within(m->path, root.path) || m->path == root.path) continue;
      for (std::string p(util::parent_path(m->path)); p != root.path && util::path_within(p, root.path);
           p = std::string(util::parent_path(p)))
        pins.push_back(p);
    }
  }
  std::sort(pins.begin(), pins.end());
  pins.erase(std::unique(pins.begin(), pins.end()), pins.end());

  // And once more as denials after every allow: the last matching rule wins.
  auto deny = [&](std::string_view ops, std::string_view filter, const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::vector<std::string> refs;
    for (const auto& n : names) refs.push_back(w.ref(filter, n));
    w.line(fmt::format("(deny {}\n  {})", ops, join(refs, "\n  ")));
  };
  std::vector<std::string> names;
  for (const auto& [n, m] : keep_names) names.push_back(n);
  deny("file-write*", "subpath", names);
  names.clear();
  for (const auto& p : pins) names.push_back(w.param("PIN", p, "holds a read-only path: not renamed or removed"));
  deny("file-write*", "literal", names);
  names.clear();
  for (const auto& [n, m] : mask_names) names.push_back(n);
  deny("file-read* file-write*", "subpath", names);

  if (!in.tty.empty())
    w.line("(allow file-read* file-write* file-ioctl " +
           w.ref("literal", w.param("TTY", in.tty, "the terminal pi-jail gives the command", false)) + ")");

  // Network: TCP to the filter's two ports on localhost, and to the
  // host-loopback services the policy names (Seatbelt can say only
  // "localhost", which is 127.0.0.1 and ::1 alike).
  std::vector<std::string> remotes;
  auto remote = [&](std::string name) { remotes.push_back("(remote tcp (param \"" + name + "\"))"); };
  remote(w.param("PROXY_HTTP", fmt::format("localhost:{}", in.http_port), "the network filter: HTTP proxy", false));
  remote(w.param("PROXY_SOCKS", fmt::format("localhost:{}", in.socks_port), "the network filter: SOCKS5 proxy", false));
  std::set<int> forward_ports;
  for (const auto& f : r.forwards) forward_ports.insert(f.port);
  for (int port : forward_ports)
    remote(w.param("FORWARD", fmt::format("localhost:{}", port), "a host-loopback service the policy names"));
  w.line("(allow network-outbound\n  " + join(remotes, "\n  ") + ")");

  SeatbeltSpec spec;
  spec.profile = std::string(base_profile()) + w.text_;
  spec.params = std::move(w.params_);
  std::vector<std::string> param_names;
  for (const auto& p : spec.params) param_names.push_back(p.name);
  if (auto st = check_profile(spec.profile, param_names); !st)
    return Error::invalid("the Seatbelt profile pi-jail made is malformed (a bug): " + st.error().message());

  spec.exec_path = r.exec_path;
  spec.argv = r.argv;
  spec.env = runtime::jail_env(r, in.tmpdir, runtime::ProxyEndpoints{"127.0.0.1", in.http_port, in.socks_port}, r.ca_bundle);
  const PathFact& cwd = fact(facts, r.cwd);
  bool cwd_readable = std::any_of(roots.begin(), roots.end(), [&](const Root& root) {
    return root.directory && util::path_within(cwd.resolved, root.path);
  });
  spec.cwd = present(cwd) && cwd_readable ? r.cwd : r.workspace;
  return spec;
}

std::vector<std::string> sandbox_exec_args(const SeatbeltSpec& spec, const std::string& sandbox_exec) {
  std::vector<std::string> args{sandbox_exec, "-p", spec.profile};
  for (const auto& p : spec.params) {
    args.push_back("-D");
    args.push_back(p.name + "=" + p.value);
  }
  args.push_back("--");
  args.push_back(spec.exec_path);
  args.insert(args.end(), spec.argv.begin() + (spec.argv.empty() ? 0 : 1), spec.argv.end());
  return args;
}

}  // namespace pj::seatbelt
