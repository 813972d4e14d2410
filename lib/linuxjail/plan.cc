#include "linuxjail/plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "linuxjail/landlock.h"
#include "linuxjail/view.h"
#include "util/paths.h"
#include "view/view.h"

namespace pj::linuxjail {

namespace {

using ::pj::view::fact;
using ::pj::view::usable;
using util::Error;
using util::path_within;

// The scratch directory of an ephemeral $HOME (the places' are in view.cc).
constexpr std::string_view kEphemeralHome = "home";

Node node_of(const PathFact& f) { return f.kind == PathFact::Kind::directory ? Node::directory : Node::file; }

MountOp bind_op(std::string dest, const PathFact& f, Access access, std::string why) {
  MountOp op;
  op.kind = MountKind::bind;
  op.dest = std::move(dest);
  op.bind_source = f.resolved;
  op.access = access;
  op.node = node_of(f);
  op.dev = f.dev;
  op.ino = f.ino;
  op.why = std::move(why);
  return op;
}

MountOp simple_op(MountKind kind, std::string_view dest, std::string_view why) {
  MountOp op;
  op.kind = kind;
  op.dest = std::string(dest);
  op.why = std::string(why);
  return op;
}

MountOp symlink_op(std::string_view dest, std::string_view target, std::string_view why) {
  MountOp op = simple_op(MountKind::symlink, dest, why);
  op.link_target = std::string(target);
  return op;
}

MountOp scratch_op(std::string_view dest, std::string_view dir, std::string_view mode, std::string_view why) {
  MountOp op = simple_op(MountKind::scratch, dest, why);
  op.scratch_dir = std::string(dir);
  op.scratch_mode = std::string(mode);
  op.access = Access::read_write;
  return op;
}

size_t depth(std::string_view path) { return util::path_components(path).size(); }

// The structural view, the Linux jail's own (view.cc): the scratch places
// (all in one tmpfs, see scratch_fs_options()), /run, /proc and /dev.
// Each operation enters the backend-neutral view as a place whose
// `backend` is its index here.
std::vector<MountOp> structure_ops(const Facts& facts) {
  std::vector<MountOp> ops;
  for (const auto& e : view::scratch_places()) {
    ops.push_back(scratch_op(e.path, e.dir, "", e.why));
  }
  for (const auto& e : view::private_tmpfs()) {
    MountOp op = simple_op(MountKind::tmpfs, e.path, e.why);
    op.fs_options = std::string(e.options);
    op.access = Access::read_write;
    ops.push_back(std::move(op));
  }
  ops.push_back(simple_op(MountKind::proc, "/proc", "a new procfs for the jail's PID namespace"));
  MountOp pts = simple_op(MountKind::devpts, "/dev/pts", "the jail's own pseudo-terminals");
  pts.fs_options = "newinstance,ptmxmode=0666,mode=0620";
  pts.access = Access::read_write;
  ops.push_back(std::move(pts));
  for (const auto& e : view::devices()) {
    const PathFact& f = fact(facts, e.path);
    if (f.kind != PathFact::Kind::other) continue;  // character devices only
    MountOp op = bind_op(std::string(e.path), f, Access::read_write, std::string(e.why));
    op.node = Node::file;
    op.devices = Devices::allowed;
    ops.push_back(std::move(op));
  }
  for (const auto& e : view::dev_links()) ops.push_back(symlink_op(e.path, e.target, e.why));
  return ops;
}

// The structural operations as places of the neutral view.
std::vector<::pj::view::Place> structure_places(const std::vector<MountOp>& ops) {
  std::vector<::pj::view::Place> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    ::pj::view::Place p;
    p.role = ::pj::view::Role::structure;
    p.path = ops[i].dest;
    p.access = ops[i].access;
    p.node = ops[i].node;
    p.backend = i;
    p.why = ops[i].why;
    p.shows = ops[i].kind == MountKind::bind      ? ::pj::view::Shows::host
              : ops[i].kind == MountKind::symlink ? ::pj::view::Shows::link
                                                  : ::pj::view::Shows::fresh;
    out.push_back(std::move(p));
  }
  return out;
}

// One place of the view as the mount operation that makes it.
MountOp translate(const ::pj::view::Place& p, const std::vector<MountOp>& structure) {
  using ::pj::view::Role;
  using ::pj::view::Shows;
  if (p.role == Role::structure) return structure[p.backend];
  switch (p.shows) {
    case Shows::host:
    case Shows::own: {
      MountOp op = bind_op(p.path, p.source, p.access, p.why);
      op.node = p.node;
      op.held = p.held;
      op.jail_home = p.shows == Shows::own;
      return op;
    }
    case Shows::fresh:  // the ephemeral home, the only fresh place not of the structure
      return scratch_op(p.path, kEphemeralHome, "0700", p.why);
    case Shows::link: return symlink_op(p.path, p.content, p.why);
    case Shows::mask: {
      MountOp op = simple_op(MountKind::mask, p.path, p.why);
      op.node = p.node;
      op.mask_content = p.content;
      op.placeholder = p.role == Role::placeholder;
      return op;
    }
  }
  return {};
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

}  // namespace

std::string describe(const MountOp& op) {
  const char* access = op.access == Access::read_write ? "rw" : "ro";
  switch (op.kind) {
    case MountKind::bind:
      if (op.bind_source == op.dest) return fmt::format("bind {} {}", access, op.dest);
      return fmt::format("bind {} {} <- {}", access, op.dest, op.bind_source);
    case MountKind::tmpfs: return fmt::format("tmpfs {} ({})", op.dest, op.fs_options);
    case MountKind::scratch:
      return fmt::format("scratch {} <- {}/ (mode={})", op.dest, op.scratch_dir,
                         op.scratch_mode.empty() ? "1777" : op.scratch_mode);
    case MountKind::proc: return fmt::format("proc {}", op.dest);
    case MountKind::devpts: return fmt::format("devpts {} ({})", op.dest, op.fs_options);
    case MountKind::mask: return fmt::format("mask {}", op.dest);
    case MountKind::symlink: return fmt::format("symlink {} -> {}", op.dest, op.link_target);
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
  std::vector<std::string> out = ::pj::view::paths_to_probe(in);
  for (const auto& e : view::devices()) out.emplace_back(e.path);
  return out;
}

util::Result<JailSpec> plan(const PlanInput& in, const Facts& facts) {
  const std::vector<MountOp> structure = structure_ops(facts);
  const ::pj::view::View v = ::pj::view::compute(in, structure_places(structure), facts);
  std::vector<std::string> problems = v.problems;
  std::vector<MountOp> ops;
  for (const auto& p : v.deduped()) ops.push_back(translate(p, structure));
  const std::string& ca_bundle_inside = v.ca_bundle_inside;

  if (in.landlock_use == LandlockUse::required && in.landlock_abi < 1)
    problems.push_back("Landlock is required by the policy but this kernel does not offer it (see pi-jail doctor)");

  std::stable_sort(ops.begin(), ops.end(),
                   [](const MountOp& a, const MountOp& b) { return depth(a.dest) < depth(b.dest); });

  // Seals: tmpfs mounts that hold mountpoints are made read-only once
  // everything below them is in place; /proc's writable knobs too.
  auto seal_tmpfs = [&](std::string_view dest, std::string_view why) {
    bool still_tmpfs = std::any_of(ops.begin(), ops.end(),
                                   [&](const MountOp& o) { return o.dest == dest && o.kind == MountKind::tmpfs; });
    if (still_tmpfs) ops.push_back(simple_op(MountKind::seal, dest, why));
  };
  seal_tmpfs("/dev", "no new device entries");
  for (const auto& e : view::proc_read_only()) {
    MountOp seal = simple_op(MountKind::seal, e.path, e.why);
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
      problems.push_back(
          fmt::format("too many host-loopback forwards: {} ports, at most {} (each is a listener on "
                      "127.0.0.1 and ::1 inside the jail); allow fewer loopback ports",
                      forward_ports.size(), kMaxForwardPorts));
    for (const auto& [addr, port] : in.forwards) {
      if ((port == kHttpProxyPort || port == kSocksProxyPort) && addr == runtime::Loopback::v4) {
        problems.push_back(
            fmt::format("cannot forward host-loopback port {}: the jail's proxy listens on {}:{} (a "
                        "loopback rule's port is forwarded on 127.0.0.1 and ::1 inside)",
                        port, runtime::loopback_address(addr), port));
        continue;
      }
      spec.listeners.push_back({ListenSpec::Kind::forward, addr, port});
    }
    for (const auto& ssh : in.ssh) {
      for (const auto& l : spec.listeners)
        if (l.port == ssh.jail_port && l.address == runtime::Loopback::v4)
          problems.push_back(
              fmt::format("ssh {}:{}: the jail's port {} for it is taken by a forward of a "
                          "host-loopback service; allow that loopback port on another number",
                          ssh.host, ssh.port, ssh.jail_port));
      spec.listeners.push_back({ListenSpec::Kind::ssh, runtime::Loopback::v4, ssh.jail_port, ssh.host, ssh.port});
    }
    // A published port reaches the jail's own server; the filter's
    // listeners there would hand the host's users the filter (and the
    // credentials it adds).
    for (const auto& p : in.published)
      for (const auto& l : spec.listeners)
        if (l.port == p.spec.jail_port)
          problems.push_back(
              fmt::format("publish {} ({}): jail port {} is the network filter's {} inside the jail, "
                          "not a server of the jail's; publish another port",
                          p.spec.str(), p.why, p.spec.jail_port,
                          l.kind == ListenSpec::Kind::forward ? "forward of a host-loopback service" : "proxy"));
  }
  // Every problem of the view and the listeners at once: a user fixes
  // them in one go, not one run each.
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    return Error::invalid(all);
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
        return Error::invalid(
            fmt::format("--test-landlock-read-only {}: {} is writable for Landlock and covers it", ro, r.path));
    }
    bool is_mount = std::any_of(spec.landlock.rules.begin(), spec.landlock.rules.end(),
                                [&](const LandlockRule& r) { return r.path == ro; });
    if (!is_mount && spec.landlock.handled_fs != 0)
      return Error::invalid(fmt::format("--test-landlock-read-only {}: not a mount of the jail's view", ro));
  }
  return spec;
}

}  // namespace pj::linuxjail
