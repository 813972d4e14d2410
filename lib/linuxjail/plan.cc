#include "linuxjail/plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "linuxjail/landlock.h"
#include "linuxjail/view.h"
#include "util/paths.h"

namespace pj::linuxjail {

namespace {

using util::Error;
using util::path_within;

const SourceFact kAbsent{};

// The scratch directory of an ephemeral $HOME (the places' are in view.cc).
constexpr std::string_view kEphemeralHome = "home";

const SourceFact& fact(const Facts& facts, std::string_view path) {
  auto it = facts.find(std::string(path));
  return it == facts.end() ? kAbsent : it->second;
}

Node node_of(const SourceFact& f) {
  return f.kind == SourceFact::Kind::directory ? Node::directory : Node::file;
}

MountOp bind_op(std::string dest, const SourceFact& f, Access access, std::string why) {
  MountOp op;
  op.kind = MountKind::bind;
  op.dest = std::move(dest);
  op.source = f.resolved;
  op.access = access;
  op.node = node_of(f);
  op.dev = f.dev;
  op.ino = f.ino;
  op.why = std::move(why);
  return op;
}

MountOp simple_op(MountKind kind, std::string_view dest, std::string_view source,
                  std::string_view why) {
  MountOp op;
  op.kind = kind;
  op.dest = std::string(dest);
  op.source = std::string(source);
  op.why = std::string(why);
  return op;
}

bool usable(const SourceFact& f) {
  return f.kind == SourceFact::Kind::directory || f.kind == SourceFact::Kind::file;
}

size_t depth(std::string_view path) { return util::path_components(path).size(); }

// System paths: a symlink whose target lies in another system directory
// (merged /usr: /bin -> usr/bin) is recreated as the same symlink; other
// entries are bound read-only from what they resolve to; absent ones are
// skipped.
void add_system(const PlanInput& in, const Facts& facts, std::vector<MountOp>& ops) {
  auto in_system_dir = [&](const std::string& target) {
    for (const auto& s : in.system) {
      const SourceFact& f = fact(facts, s.path);
      if (!f.is_symlink && f.kind == SourceFact::Kind::directory && util::path_within(target, s.path)) return true;
    }
    return false;
  };
  for (const auto& e : in.system) {
    const SourceFact& f = fact(facts, e.path);
    if (!usable(f)) continue;
    if (f.is_symlink && in_system_dir(f.resolved))
      ops.push_back(simple_op(MountKind::symlink, e.path, f.link_target, e.why));
    else
      ops.push_back(bind_op(e.path, f, Access::read_only, e.why));
  }
}

// The structural view: the scratch places (all in one tmpfs, see
// scratch_fs_options()), /run, /proc and /dev.
void add_structure(const Facts& facts, std::vector<MountOp>& ops) {
  for (const auto& e : view::scratch_places()) {
    MountOp op = simple_op(MountKind::scratch, e.path, e.dir, e.why);
    op.access = Access::read_write;
    ops.push_back(std::move(op));
  }
  for (const auto& e : view::private_tmpfs()) {
    MountOp op = simple_op(MountKind::tmpfs, e.path, "", e.why);
    op.options = std::string(e.options);
    op.access = Access::read_write;
    ops.push_back(std::move(op));
  }
  ops.push_back(simple_op(MountKind::proc, "/proc", "", "a new procfs for the jail's PID namespace"));
  MountOp pts = simple_op(MountKind::devpts, "/dev/pts", "", "the jail's own pseudo-terminals");
  pts.options = "newinstance,ptmxmode=0666,mode=0620";
  pts.access = Access::read_write;
  ops.push_back(std::move(pts));
  for (const auto& e : view::devices()) {
    const SourceFact& f = fact(facts, e.path);
    if (f.kind != SourceFact::Kind::other) continue;  // character devices only
    MountOp op = bind_op(std::string(e.path), f, Access::read_write, std::string(e.why));
    op.node = Node::file;
    op.devices = Devices::allowed;
    ops.push_back(std::move(op));
  }
  for (const auto& e : view::dev_links())
    ops.push_back(simple_op(MountKind::symlink, e.path, e.target, e.why));
}

// The one scratch tmpfs: `size` is shared by every place bound from it.
// Its root is never shown (each place is a directory of it).
std::string scratch_fs_options(const policy::MemorySize& size) { return fmt::format("size={},mode=0755", size.str()); }

// The operation that decides what `path` is inside the jail: the mount
// (bind, tmpfs, mask, ...) closest above it, or nullptr.
const MountOp* closest_mount(const std::vector<MountOp>& ops, std::string_view path) {
  const MountOp* best = nullptr;
  for (const auto& op : ops) {
    if (op.kind == MountKind::symlink || op.kind == MountKind::seal) continue;
    if (path_within(path, op.dest) && (!best || op.dest.size() >= best->dest.size())) best = &op;
  }
  return best;
}

// Does `path` show the host's object inside the jail: is the closest
// operation covering it a bind (not a tmpfs, not a mask)?
bool visible(const std::vector<MountOp>& ops, std::string_view path) {
  const MountOp* m = closest_mount(ops, path);
  return m && m->kind == MountKind::bind;
}

// Is `path` in the jail home (no mount closer to it): a place whose host
// path names the real home's object, which the jail does not see there?
bool in_jail_home(const std::vector<MountOp>& ops, std::string_view path) {
  const MountOp* m = closest_mount(ops, path);
  return m && m->jail_home;
}

// Is `path` below a writable bind (where a jail could create it)?
bool writable(const std::vector<MountOp>& ops, std::string_view path) {
  const MountOp* m = closest_mount(ops, path);
  return m && m->kind == MountKind::bind && m->access == Access::read_write;
}

// A read-only mark or a mask inside a writable grant is a mountpoint, so
// it cannot itself be renamed or removed, but its parent directories
// could: `mv .git .git2; mkdir -p .git/hooks` would leave the host a new,
// writable hooks directory. Each directory between the writable grant and
// the mark is bound over itself (read-write, as it was), which makes it a
// mountpoint too: rename(2) and rmdir(2) of a mountpoint in the caller's
// mount namespace fail with EBUSY (vfs_rename, is_local_mountpoint).
void pin_ancestors(const Facts& facts, std::vector<MountOp>& ops) {
  std::vector<MountOp> pins;
  auto taken = [&](const std::string& dest) {
    auto same = [&](const MountOp& o) { return o.dest == dest; };
    return std::any_of(ops.begin(), ops.end(), same) || std::any_of(pins.begin(), pins.end(), same);
  };
  for (const auto& op : ops) {
    bool protects = op.kind == MountKind::mask || (op.kind == MountKind::bind && op.access == Access::read_only);
    if (!protects || op.dest == "/") continue;
    std::string parent(util::parent_path(op.dest));
    const MountOp* above = closest_mount(ops, parent);
    if (!above || above->kind != MountKind::bind || above->access != Access::read_write) continue;
    if (above->jail_home) continue;  // the host's directories there are not the jail's
    for (std::string dir = parent; dir != above->dest && dir != "/"; dir = std::string(util::parent_path(dir))) {
      const SourceFact& f = fact(facts, dir);
      if (f.kind != SourceFact::Kind::directory || f.is_symlink || f.resolved != dir || taken(dir)) continue;
      pins.push_back(bind_op(dir, f, Access::read_write,
                             fmt::format("pinned: holds {} (cannot be renamed or removed)", op.dest)));
    }
  }
  for (auto& p : pins) ops.push_back(std::move(p));
}

// The placeholder covering an absent protected path `dest`. Git never
// records an empty directory, so a placeholder is an empty directory
// wherever `git add -A` could pick it up, except for the files git itself
// reads in a git dir: those are files whose content means what absence
// means (an empty config; "." for commondir: the git dir is its own
// common dir, which an empty commondir would not say: git dies on it).
MountOp placeholder_op(const std::string& dest, Node node, const std::string& why) {
  MountOp cover = simple_op(MountKind::mask, dest, "", why);
  cover.placeholder = true;
  cover.node = Node::directory;
  const std::string_view name = std::string_view(dest).substr(dest.rfind('/') + 1);
  if (node == Node::file && (name == "config" || name == "config.worktree" || name == "commondir" || name == "gitdir")) {
    cover.node = Node::file;
    if (name == "commondir") cover.options = ".\n";
  }
  return cover;
}

// Protect one read-only mark `r`, or say why the run cannot start. Below a
// writable grant the jail can change anything but mountpoints, so:
// - a symlink at the mark or in a directory between the grant and the
//   mark stops the run (a symlink cannot be mounted over, and the jail
//   could repoint it);
// - an existing mark is bound read-only over itself;
// - an absent one is covered at its first missing component, so it cannot
//   be created, except under a missing `.git`: a repository the jail
//   creates is audited when the run ends (git_audit.h), not prevented.
std::string protect(const Facts& facts, const PathRule& r, std::vector<MountOp>& ops) {
  const SourceFact& f = fact(facts, r.path);
  if (in_jail_home(ops, r.path) || (usable(f) && in_jail_home(ops, f.resolved))) return "";  // not the host's
  if (!writable(ops, r.path) && !(usable(f) && writable(ops, f.resolved))) {
    if (usable(f) && visible(ops, f.resolved)) ops.push_back(bind_op(f.resolved, f, Access::read_only, r.why));
    return "";
  }
  const MountOp* grant = closest_mount(ops, r.path);
  for (std::string p = r.path; grant && p != grant->dest && p != "/"; p = std::string(util::parent_path(p))) {
    if (fact(facts, p).is_symlink) {
      if (p == r.path) return runtime::symlink_at_protected_path(r);
      return fmt::format("{} is a symlink, and {} below it must stay read-only ({}): replace the link with what it "
                         "points to, or remove it",
                         p, r.path, r.why);
    }
  }
  if (usable(f)) {
    MountOp keep = bind_op(f.resolved, f, Access::read_only, r.why);
    keep.held = true;
    ops.push_back(std::move(keep));
    return "";
  }
  // The first missing component: its parent exists.
  std::string missing = r.path;
  while (true) {
    std::string parent(util::parent_path(missing));
    const SourceFact& pf = fact(facts, parent);
    if (pf.kind == SourceFact::Kind::directory) break;
    if (pf.kind != SourceFact::Kind::absent || parent == "/") return "";  // under a file: nothing can be made there
    missing = parent;
  }
  if (missing != r.path && missing.ends_with("/.git")) return "";
  ops.push_back(placeholder_op(missing, missing == r.path ? r.node : Node::directory, r.why));
  return "";
}

// Keep one operation per destination: a mask always wins; otherwise the
// later entry (grants come after the defaults) replaces the earlier one.
std::vector<MountOp> dedupe(std::vector<MountOp> ops) {
  std::vector<MountOp> out;
  for (auto& op : ops) {
    auto same = std::find_if(out.begin(), out.end(), [&](const MountOp& o) { return o.dest == op.dest; });
    if (same == out.end()) {
      out.push_back(std::move(op));
    } else if (same->kind != MountKind::mask) {
      *same = std::move(op);
    }
  }
  return out;
}

}  // namespace

std::string describe(const MountOp& op) {
  const char* access = op.access == Access::read_write ? "rw" : "ro";
  switch (op.kind) {
    case MountKind::bind:
      if (op.source == op.dest) return fmt::format("bind {} {}", access, op.dest);
      return fmt::format("bind {} {} <- {}", access, op.dest, op.source);
    case MountKind::tmpfs: return fmt::format("tmpfs {} ({})", op.dest, op.options);
    case MountKind::scratch:
      return fmt::format("scratch {} <- {}/ (mode={})", op.dest, op.source, op.options.empty() ? "1777" : op.options);
    case MountKind::proc: return fmt::format("proc {}", op.dest);
    case MountKind::devpts: return fmt::format("devpts {} ({})", op.dest, op.options);
    case MountKind::mask: return fmt::format("mask {}", op.dest);
    case MountKind::symlink: return fmt::format("symlink {} -> {}", op.dest, op.source);
    case MountKind::seal: return fmt::format("seal read-only {}", op.dest);
  }
  return "?";
}

std::vector<std::pair<std::string, Node>> placeholders(const JailSpec& spec) {
  std::vector<std::pair<std::string, Node>> out;
  for (const auto& op : spec.mounts)
    if (op.placeholder) out.emplace_back(op.dest, op.node);
  return out;
}

std::vector<std::string> paths_to_probe(const PlanInput& in) {
  std::vector<std::string> out;
  for (const auto& e : in.system) out.push_back(e.path);
  for (const auto& e : view::devices()) out.emplace_back(e.path);
  out.push_back(in.workspace);
  for (const auto& g : in.grants) out.push_back(g.path);
  for (const auto& s : in.sockets) out.push_back(s.path);
  if (!in.home_source.empty()) out.push_back(in.home_source);
  for (const auto& s : in.shown_files) out.push_back(s.source);
  for (const auto& v : in.private_views) {
    out.push_back(v.staging);
    out.insert(out.end(), v.shown.begin(), v.shown.end());
  }
  // Marks and masks, and their parents (pin_ancestors() asks about them).
  auto with_ancestors = [&](const std::string& path) {
    for (std::string p = path; p != "/"; p = std::string(util::parent_path(p))) out.push_back(p);
  };
  for (const auto& d : in.denies) with_ancestors(d.path);
  if (!in.ca_bundle.empty()) {
    out.push_back(in.ca_bundle);
    for (auto p : runtime::kCaBundlePaths) out.emplace_back(p);
  }
  for (const auto& r : in.read_only) with_ancestors(r.path);
  return out;
}

util::Result<JailSpec> plan(const PlanInput& in, const Facts& facts) {
  std::vector<std::string> problems;
  std::vector<MountOp> ops;
  add_system(in, facts, ops);
  add_structure(facts, ops);

  const bool private_home = in.home != "/" && !in.home.empty();
  if (private_home && !in.home_source.empty()) {
    const SourceFact& f = fact(facts, in.home_source);
    if (f.kind != SourceFact::Kind::directory || f.is_symlink || f.resolved != in.home_source)
      problems.push_back(fmt::format("$HOME: the jail home {} is not a directory (or changed after it was checked)",
                                     in.home_source));
    else {
      MountOp home = bind_op(in.home, f, Access::read_write,
                             "$HOME: this workspace's own jail home, kept between runs ([home] persist)");
      home.jail_home = true;
      ops.push_back(std::move(home));
    }
  } else if (private_home) {
    MountOp home = simple_op(MountKind::scratch, in.home, kEphemeralHome, "$HOME: this run's own, discarded at the end "
                             "([home] persist = false; the shared scratch budget)");
    home.options = "0700";
    home.access = Access::read_write;
    ops.push_back(std::move(home));
  }

  // Private directories first: a grant inside one (sessions/) replaces
  // the read-only entry for the same path (dedupe keeps the later).
  for (const auto& v : in.private_views) {
    const SourceFact& own = fact(facts, v.staging);
    if (own.kind != SourceFact::Kind::directory || own.is_symlink) {
      problems.push_back(fmt::format("{}: its staging directory {} is not a directory", v.path, v.staging));
      continue;
    }
    MountOp root = bind_op(v.path, own, Access::read_write, fmt::format("the run's own copy ({})", v.why));
    ops.push_back(std::move(root));
    for (const auto& p : v.shown) {
      const SourceFact& f = fact(facts, p);
      if (!usable(f) || f.is_symlink) continue;
      ops.push_back(bind_op(p, f, Access::read_only, fmt::format("shown read-only in the run's copy ({})", v.why)));
    }
    for (const auto& [path, target] : v.links)
      ops.push_back(simple_op(MountKind::symlink, path, target, fmt::format("the same link ({})", v.why)));
  }

  std::vector<PathGrant> grants;
  grants.push_back({in.workspace, Access::read_write, "workspace"});
  grants.insert(grants.end(), in.grants.begin(), in.grants.end());
  for (const auto& g : grants) {
    const SourceFact& f = fact(facts, g.path);
    if (!usable(f)) {
      problems.push_back(fmt::format("{} {}: {}", g.why, g.path,
                                     f.kind == SourceFact::Kind::absent ? "no such file or directory"
                                                                       : "not a file or directory"));
      continue;
    }
    // Grants were resolved and checked (home, system directories, limits)
    // before they were probed: one that resolves elsewhere now was changed
    // in between (a jail beside this one can swap a directory for a link).
    if (f.is_symlink || f.resolved != g.path) {
      problems.push_back(fmt::format("{} {}: it now resolves to {}; it changed after it was checked", g.why, g.path,
                                     f.resolved));
      continue;
    }
    ops.push_back(bind_op(f.resolved, f, g.access, g.why));
  }

  // Socket grants: the socket itself at its own path (connect(2) needs
  // no write access to the mount), never through a symlink, never under
  // a mask.
  for (const auto& s : in.sockets) {
    const SourceFact& f = fact(facts, s.path);
    if (f.is_symlink || (f.kind != SourceFact::Kind::absent && f.resolved != s.path)) {
      problems.push_back(fmt::format("{} {}: a symlink ({}); grant the socket itself", s.why, s.path,
                                     f.resolved.empty() ? "to nothing" : "to " + f.resolved));
      continue;
    }
    if (f.kind != SourceFact::Kind::socket) {
      problems.push_back(fmt::format("{} {}: {}", s.why, s.path,
                                     f.kind == SourceFact::Kind::absent
                                         ? "no such socket (is the agent running? is the variable stale?)"
                                         : "not a unix socket"));
      continue;
    }
    auto masked = std::find_if(in.denies.begin(), in.denies.end(),
                               [&](const PathDeny& d) { return path_within(s.path, d.path); });
    if (masked != in.denies.end()) {
      problems.push_back(fmt::format("{} {}: it is under {}, which is denied ({})", s.why, s.path, masked->path,
                                     masked->why));
      continue;
    }
    MountOp op = bind_op(s.path, f, Access::read_only, s.why);
    op.node = Node::file;
    ops.push_back(std::move(op));
  }

  // Files pi-jail wrote for the jail (its git config), at their places.
  for (const auto& s : in.shown_files) {
    const SourceFact& f = fact(facts, s.source);
    if (f.kind != SourceFact::Kind::file || f.is_symlink || f.resolved != s.source) {
      problems.push_back(fmt::format("{} <- {}: not a regular file of pi-jail's ({})", s.path, s.source, s.why));
      continue;
    }
    ops.push_back(bind_op(s.path, f, Access::read_only, s.why));
  }

  // Read-only marks: the same object bound read-only over itself inside
  // a writable grant; an absent one covered by an empty read-only
  // placeholder so it cannot be created either.
  for (const auto& r : in.read_only) {
    if (auto problem = protect(facts, r, ops); !problem.empty()) problems.push_back(std::move(problem));
  }

  for (const auto& d : in.denies) {
    const SourceFact& f = fact(facts, d.path);
    if (!usable(f)) continue;  // nothing there to hide
    std::string dest = f.resolved;
    if (!visible(ops, dest) || in_jail_home(ops, dest)) continue;  // not in the view anyway
    MountOp mask = simple_op(MountKind::mask, dest, "", d.why);
    mask.node = node_of(f);
    ops.push_back(std::move(mask));
  }

  // The run's CA bundle, read-only over each distribution bundle path
  // the view shows (a link there is covered where it points).
  std::string ca_bundle_inside;
  if (!in.ca_bundle.empty()) {
    const SourceFact& src = fact(facts, in.ca_bundle);
    if (src.kind != SourceFact::Kind::file || src.is_symlink) {
      problems.push_back(fmt::format("the run's CA bundle {} is not a file", in.ca_bundle));
    } else {
      for (auto p : runtime::kCaBundlePaths) {
        const SourceFact& f = fact(facts, std::string(p));
        if (f.kind != SourceFact::Kind::file || !visible(ops, f.resolved)) continue;
        ops.push_back(bind_op(f.resolved, src, Access::read_only, "the system's CAs and the run's CA (credentials)"));
        ops.back().dest = f.resolved;
        if (ca_bundle_inside.empty()) ca_bundle_inside = std::string(p);
      }
      if (ca_bundle_inside.empty())
        problems.push_back("no CA bundle to cover in the jail's view (/etc/ssl/certs/ca-certificates.crt, "
                           "/etc/pki/tls/certs/ca-bundle.crt or /etc/ssl/cert.pem): the jail could not trust the "
                           "credential filter; install ca-certificates");
    }
  }

  pin_ancestors(facts, ops);

  if (in.landlock_use == LandlockUse::required && in.landlock_abi < 1)
    problems.push_back("Landlock is required by the policy but this kernel does not offer it (see pi-jail doctor)");

  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    return Error::invalid(all);
  }

  ops = dedupe(std::move(ops));
  std::stable_sort(ops.begin(), ops.end(),
                   [](const MountOp& a, const MountOp& b) { return depth(a.dest) < depth(b.dest); });

  // Seals: tmpfs mounts that hold mountpoints are made read-only once
  // everything below them is in place; /proc's writable knobs too.
  auto seal_tmpfs = [&](std::string_view dest, std::string_view why) {
    bool still_tmpfs = std::any_of(ops.begin(), ops.end(), [&](const MountOp& o) {
      return o.dest == dest && o.kind == MountKind::tmpfs;
    });
    if (still_tmpfs) ops.push_back(simple_op(MountKind::seal, dest, "", why));
  };
  seal_tmpfs("/dev", "no new device entries");
  for (const auto& e : view::proc_read_only()) {
    MountOp seal = simple_op(MountKind::seal, e.path, "", e.why);
    seal.optional = true;
    ops.push_back(std::move(seal));
  }

  JailSpec spec;
  if (in.network_filter) {
    spec.listeners.push_back({ListenSpec::Kind::http_proxy, runtime::Loopback::v4, kHttpProxyPort});
    spec.listeners.push_back({ListenSpec::Kind::socks_proxy, runtime::Loopback::v4, kSocksProxyPort});
    std::set<int> forward_ports;
    for (const auto& f : in.forwards) forward_ports.insert(f.port);
    if (forward_ports.size() > kMaxForwardPorts)
      problems.push_back(fmt::format("too many host-loopback forwards: {} ports, at most {} (each is a listener on "
                                     "127.0.0.1 and ::1 inside the jail); allow fewer loopback ports",
                                     forward_ports.size(), kMaxForwardPorts));
    for (const auto& [addr, port] : in.forwards) {
      if ((port == kHttpProxyPort || port == kSocksProxyPort) && addr == runtime::Loopback::v4) {
        problems.push_back(fmt::format("cannot forward host-loopback port {}: the jail's proxy listens on {}:{} (a "
                                       "loopback rule's port is forwarded on 127.0.0.1 and ::1 inside)",
                                       port, runtime::loopback_address(addr), port));
        continue;
      }
      spec.listeners.push_back({ListenSpec::Kind::forward, addr, port});
    }
    // A published port reaches the jail's own server; the filter's
    // listeners there would hand the host's users the filter (and the
    // credentials it adds).
    for (const auto& p : in.published)
      for (const auto& l : spec.listeners)
        if (l.port == p.spec.jail_port)
          problems.push_back(fmt::format("publish {} ({}): jail port {} is the network filter's {} inside the jail, "
                                         "not a server of the jail's; publish another port",
                                         p.spec.str(), p.why, p.spec.jail_port,
                                         l.kind == ListenSpec::Kind::forward ? "forward of a host-loopback service"
                                                                             : "proxy"));
    if (!problems.empty()) return Error::invalid(problems.front());
  }
  spec.mounts = std::move(ops);
  spec.scratch_fs = scratch_fs_options(in.scratch);
  spec.nproc = in.limits.pids;
  spec.exec_path = in.exec_path;
  spec.argv = in.argv;
  std::optional<runtime::ProxyEndpoints> proxy;
  if (in.network_filter) proxy = runtime::ProxyEndpoints{"127.0.0.1", kHttpProxyPort, kSocksProxyPort};
  spec.env = runtime::jail_env(in, "/tmp", proxy, ca_bundle_inside);
  spec.cwd = visible(spec.mounts, in.cwd) && !in_jail_home(spec.mounts, in.cwd) ? in.cwd : in.workspace;
  spec.uid = in.uid;
  spec.gid = in.gid;
  spec.seccomp = in.seccomp;
  spec.landlock.use = in.landlock_use;
  spec.landlock.abi = in.landlock_abi;
  spec.landlock.handled_fs = landlock_handled_fs(in.landlock_abi);
  spec.landlock.scoped = landlock_scopes(in.landlock_abi);
  if (spec.landlock.handled_fs != 0) spec.landlock.rules = landlock_rules(spec.mounts, in.landlock_read_only);
  // Landlock rights add up along a path: a rule can only be narrowed if no
  // writable rule covers it from above. Say so rather than do nothing.
  for (const auto& ro : in.landlock_read_only) {
    for (const auto& r : spec.landlock.rules) {
      if (r.path != ro && util::path_within(ro, r.path) && (r.access & ll::kWriteFile))
        return Error::invalid(fmt::format("--test-landlock-read-only {}: {} is writable for Landlock and covers it",
                                          ro, r.path));
    }
    bool is_mount = std::any_of(spec.landlock.rules.begin(), spec.landlock.rules.end(),
                                [&](const LandlockRule& r) { return r.path == ro; });
    if (!is_mount && spec.landlock.handled_fs != 0)
      return Error::invalid(fmt::format("--test-landlock-read-only {}: not a mount of the jail's view", ro));
  }
  return spec;
}

}  // namespace pj::linuxjail
