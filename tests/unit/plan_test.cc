// The planner, fed invented host facts: no privileges, no filesystem.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "golden.h"
#include "linuxjail/plan.h"
#include "util/paths.h"

using namespace pj::linuxjail;

namespace {

PathFact dir(const std::string& path, ino_t ino) {
  PathFact f;
  f.kind = PathFact::Kind::directory;
  f.resolved = path;
  f.dev = 1;
  f.ino = ino;
  return f;
}
PathFact file(const std::string& path, ino_t ino) {
  PathFact f = dir(path, ino);
  f.kind = PathFact::Kind::file;
  return f;
}
PathFact link(const std::string& target, PathFact resolved) {
  resolved.is_symlink = true;
  resolved.link_target = target;
  return resolved;
}
PathFact device(const std::string& path, ino_t ino) {
  PathFact f = dir(path, ino);
  f.kind = PathFact::Kind::other;
  return f;
}

// A Debian-like host with merged /usr.
Facts debian_host() {
  Facts f;
  ino_t ino = 100;
  f["/usr"] = dir("/usr", ++ino);
  f["/bin"] = link("usr/bin", dir("/usr/bin", ++ino));
  f["/lib"] = link("usr/lib", dir("/usr/lib", ++ino));
  f["/lib64"] = link("usr/lib64", dir("/usr/lib64", ++ino));
  f["/etc/passwd"] = file("/etc/passwd", ++ino);
  f["/etc/resolv.conf"] =
      link("../run/systemd/resolve/stub-resolv.conf", file("/run/systemd/resolve/stub-resolv.conf", ++ino));
  f["/etc/ssl"] = dir("/etc/ssl", ++ino);
  f["/etc/ssl/private"] = dir("/etc/ssl/private", ++ino);
  for (const char* d : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"})
    f[d] = device(d, ++ino);
  f["/home/u/src/proj"] = dir("/home/u/src/proj", ++ino);
  f["/home/u/.local/state/pi-jail/jail-notes-7-1"] = dir("/home/u/.local/state/pi-jail/jail-notes-7-1", ++ino);
  return f;
}

PlanInput debian_input() {
  PlanInput in;
  in.workspace = "/home/u/src/proj";
  in.cwd = "/home/u/src/proj/lib";
  in.home = "/home/u";
  in.uid = 1000;
  in.gid = 1000;
  in.exec_path = "/usr/bin/pi";
  in.argv = {"pi", "-p", "hello"};
  for (const char* sys : {"/usr", "/bin", "/lib", "/lib64", "/lib32", "/etc/passwd", "/etc/resolv.conf", "/etc/ssl"})
    in.system.push_back({sys, "profile"});
  in.denies.push_back({"/etc/ssl/private", "profile: keys"});
  in.env_pass = {"PATH", "TERM", "LC_*"};
  in.env_set = {{"EDITOR", "vi"}};
  // The run's refusals (supervisor/jail_notes.h): a directory of pi-jail's.
  in.shown_files.push_back(
      {"/run/pi-jail", "/home/u/.local/state/pi-jail/jail-notes-7-1", "refusals so far", pj::runtime::Node::directory});
  in.env_set.emplace_back("PI_JAIL_REFUSALS", "/run/pi-jail/refusals");
  in.host_env = {"PATH=/usr/bin:/bin",
                 "TERM=xterm-256color",
                 "LC_ALL=C.UTF-8",
                 "AWS_SECRET_ACCESS_KEY=x",
                 "GITHUB_TOKEN=y",
                 "HOME=/elsewhere",
                 "TMPDIR=/run/user/1000",
                 "=broken",
                 "NOEQUALS"};
  return in;
}

std::string render(const JailSpec& spec) {
  std::ostringstream out;
  out << "scratch-fs tmpfs (" << spec.scratch_fs << ")\n";
  for (const auto& op : spec.mounts) out << describe(op) << "\n";
  out << "cwd " << spec.cwd << "\n";
  for (const auto& e : spec.env) out << "env " << e << "\n";
  return out.str();
}

const MountOp* find(const JailSpec& spec, const std::string& dest, MountKind kind) {
  for (const auto& op : spec.mounts)
    if (op.dest == dest && op.kind == kind) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("the default view of a merged-/usr host (golden)") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  check_golden("debian_default_view.txt", render(*spec));
}

TEST_CASE("parents are mounted before children, seals come last") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  const auto& ops = spec->mounts;
  bool in_seals = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == MountKind::seal) {
      in_seals = true;
      continue;
    }
    CHECK_FALSE(in_seals);
    for (size_t j = i + 1; j < ops.size(); ++j) {
      if (ops[j].kind == MountKind::seal) continue;
      CAPTURE(ops[i].dest);
      CAPTURE(ops[j].dest);
      CHECK_FALSE((ops[i].dest != ops[j].dest && pj::util::path_within(ops[i].dest, ops[j].dest)));
    }
  }
}

TEST_CASE("secrets are masked and the environment is an allowlist") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  CHECK(find(*spec, "/etc/ssl/private", MountKind::mask));
  const std::string env = render(*spec);
  CHECK(env.find("AWS_SECRET") == std::string::npos);
  CHECK(env.find("GITHUB_TOKEN") == std::string::npos);
  CHECK(env.find("env HOME=/home/u\n") != std::string::npos);
  CHECK(env.find("env TMPDIR=/tmp\n") != std::string::npos);
  CHECK(env.find("env LC_ALL=C.UTF-8\n") != std::string::npos);
  CHECK(env.find("env EDITOR=vi\n") != std::string::npos);
}

TEST_CASE("a system symlink into another system directory stays a symlink; others are bound resolved") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  CHECK(find(*spec, "/bin", MountKind::symlink));
  CHECK_FALSE(find(*spec, "/bin", MountKind::bind));
  CHECK(find(*spec, "/etc/resolv.conf", MountKind::bind));  // target under /run: not a system dir
  CHECK_FALSE(find(*spec, "/lib32", MountKind::bind));      // absent on this host
}

TEST_CASE("a read-only mark inside the writable workspace is bound read-only over itself") {
  PlanInput in = debian_input();
  Facts facts = debian_host();
  facts["/home/u/src/proj/.git/hooks"] = dir("/home/u/src/proj/.git/hooks", 600);
  facts["/srv/elsewhere"] = dir("/srv/elsewhere", 601);
  in.read_only.push_back({"/home/u/src/proj/.git/hooks", "profile: hooks run on the host"});
  in.read_only.push_back({"/srv/elsewhere", "not in the view"});
  auto spec = plan(in, facts);
  REQUIRE(spec.ok());
  const MountOp* op = find(*spec, "/home/u/src/proj/.git/hooks", MountKind::bind);
  REQUIRE(op);
  CHECK(op->access == Access::read_only);
  CHECK(op->ino == 600);
  CHECK_FALSE(find(*spec, "/srv/elsewhere", MountKind::bind));
}

TEST_CASE("directories between a writable grant and a read-only mark are pinned in place") {
  PlanInput in = debian_input();
  Facts facts = debian_host();
  facts["/home/u/src/proj/.git"] = dir("/home/u/src/proj/.git", 610);
  facts["/home/u/src/proj/.git/hooks"] = dir("/home/u/src/proj/.git/hooks", 611);
  facts["/home/u/src/proj/a"] = dir("/home/u/src/proj/a", 612);
  facts["/home/u/src/proj/a/b"] = dir("/home/u/src/proj/a/b", 613);
  in.read_only.push_back({"/home/u/src/proj/.git/hooks", "hooks", pj::runtime::Node::directory});
  in.read_only.push_back({"/home/u/src/proj/a/b/c", "absent, covered", pj::runtime::Node::file});
  auto spec = plan(in, facts);
  REQUIRE(spec.ok());
  const MountOp* git = find(*spec, "/home/u/src/proj/.git", MountKind::bind);
  REQUIRE(git);
  CHECK(git->access == Access::read_write);  // pinned, not narrowed
  CHECK(git->ino == 610);
  CHECK(find(*spec, "/home/u/src/proj/a", MountKind::bind));
  CHECK(find(*spec, "/home/u/src/proj/a/b", MountKind::bind));
  CHECK_FALSE(find(*spec, "/home/u/src/proj", MountKind::bind)->access == Access::read_only);
  // Nothing is pinned above the grant, nor for marks outside any writable grant.
  CHECK_FALSE(find(*spec, "/home/u/src", MountKind::bind));
  CHECK_FALSE(find(*spec, "/usr/lib", MountKind::bind));
}

TEST_CASE("a symlinked /etc entry is bound from its target at its own name") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  const MountOp* op = find(*spec, "/etc/resolv.conf", MountKind::bind);
  REQUIRE(op);
  CHECK(op->bind_source == "/run/systemd/resolve/stub-resolv.conf");
  CHECK(op->node == Node::file);
  CHECK(op->access == Access::read_only);
}

TEST_CASE("grants that do not exist are all reported at once") {
  PlanInput in = debian_input();
  in.grants.push_back({"/nope/one", Access::read_only, "--allow-read"});
  in.grants.push_back({"/nope/two", Access::read_write, "--allow-write"});
  auto spec = plan(in, debian_host());
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().message().find("--allow-read /nope/one") != std::string::npos);
  CHECK(spec.error().message().find("--allow-write /nope/two") != std::string::npos);
}

TEST_CASE("a grant that resolves elsewhere than when it was checked is refused, not mounted") {
  // Grants reach the planner resolved (policy, program, worktree); a link
  // there now means the path was swapped after the checks.
  PlanInput in = debian_input();
  in.grants.push_back({"/home/u/link-to-data", Access::read_only, "--allow-read"});
  Facts facts = debian_host();
  facts["/home/u/link-to-data"] = link("/srv/data", dir("/srv/data", 999));
  auto spec = plan(in, facts);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().message().find("--allow-read /home/u/link-to-data: it now resolves to /srv/data") !=
        std::string::npos);
  PlanInput ws = debian_input();
  Facts swapped = debian_host();
  swapped["/home/u/src/proj"] = dir("/home/u", 998);  // realpath ran while it pointed at $HOME
  auto home = plan(ws, swapped);
  REQUIRE_FALSE(home.ok());
  CHECK(home.error().message().find("workspace /home/u/src/proj: it now resolves to /home/u") != std::string::npos);
}

TEST_CASE("a deny beats a grant of the same path, and hides only what is visible") {
  PlanInput in = debian_input();
  Facts facts = debian_host();
  facts["/home/u/src/proj/.env"] = file("/home/u/src/proj/.env", 500);
  facts["/home/u/.netrc"] = file("/home/u/.netrc", 501);
  in.grants.push_back({"/home/u/src/proj/.env", Access::read_write, "--allow-write"});
  in.denies.push_back({"/home/u/src/proj/.env", "--deny"});
  in.denies.push_back({"/home/u/.netrc", "--deny"});  // not in the view: nothing to mask
  in.denies.push_back({"/home/u/missing", "--deny"});
  auto spec = plan(in, facts);
  REQUIRE(spec.ok());
  const MountOp* mask = find(*spec, "/home/u/src/proj/.env", MountKind::mask);
  REQUIRE(mask);
  CHECK(mask->node == Node::file);
  CHECK_FALSE(find(*spec, "/home/u/src/proj/.env", MountKind::bind));
  CHECK_FALSE(find(*spec, "/home/u/.netrc", MountKind::mask));
  CHECK_FALSE(find(*spec, "/home/u/missing", MountKind::mask));
}

TEST_CASE("an ephemeral $HOME is the run's own 0700 directory of the scratch tmpfs; the cwd falls back when hidden") {
  PlanInput in = debian_input();
  in.cwd = "/srv";
  auto spec = plan(in, debian_host());
  REQUIRE(spec.ok());
  const MountOp* home = find(*spec, "/home/u", MountKind::scratch);
  REQUIRE(home);
  CHECK(home->scratch_dir == "home");
  CHECK(home->scratch_mode == "0700");
  CHECK(home->access == Access::read_write);
  CHECK_FALSE(find(*spec, "/home/u", MountKind::tmpfs));
  CHECK_FALSE(find(*spec, "/home/u", MountKind::seal));
  CHECK(find(*spec, "/dev", MountKind::seal));
  CHECK(spec->cwd == "/home/u/src/proj");
}

TEST_CASE("a persistent $HOME binds the jail home; the real home's objects are neither shown, masked nor pinned") {
  PlanInput in = debian_input();
  Facts facts = debian_host();
  const std::string jh = "/home/u/.local/share/pi-jail/homes/proj-0123456789abcdef";
  in.home_source = jh;
  facts[jh] = dir(jh, 900);
  // Host objects under the real home that rules name.
  facts["/home/u/.netrc"] = file("/home/u/.netrc", 901);
  facts["/home/u/.config"] = dir("/home/u/.config", 902);
  facts["/home/u/.config/tool"] = dir("/home/u/.config/tool", 903);
  facts["/home/u/.gitconfig"] = file("/home/u/.gitconfig", 904);
  facts["/home/u/notes"] = dir("/home/u/notes", 905);
  in.denies.push_back({"/home/u/.netrc", "profile: secrets"});
  in.read_only.push_back({"/home/u/.gitconfig", "a read-only mark in the home"});
  in.grants.push_back({"/home/u/.config/tool", Access::read_only, "--allow-read"});
  in.cwd = "/home/u/notes";
  auto spec = plan(in, facts);
  REQUIRE(spec.ok());
  const MountOp* home = find(*spec, "/home/u", MountKind::bind);
  REQUIRE(home);
  CHECK(home->bind_source == jh);
  CHECK(home->access == Access::read_write);
  CHECK(home->jail_home);
  CHECK_FALSE(find(*spec, "/home/u", MountKind::seal));
  // Nothing of the real home is masked or bound over the jail's own files ...
  CHECK_FALSE(find(*spec, "/home/u/.netrc", MountKind::mask));
  CHECK_FALSE(find(*spec, "/home/u/.gitconfig", MountKind::bind));
  CHECK_FALSE(find(*spec, "/home/u/.gitconfig", MountKind::mask));
  // ... and never is a real directory pinned (bound read-write) there.
  CHECK_FALSE(find(*spec, "/home/u/.config", MountKind::bind));
  // The grant itself is there, read-only.
  const MountOp* tool = find(*spec, "/home/u/.config/tool", MountKind::bind);
  REQUIRE(tool);
  CHECK(tool->access == Access::read_only);
  // A cwd in the real home is not what the jail sees there.
  CHECK(spec->cwd == "/home/u/src/proj");

  // A jail home that is not a directory (or became a link) stops the run.
  facts[jh] = link("/etc", dir("/etc", 906));
  auto swapped = plan(in, facts);
  REQUIRE_FALSE(swapped.ok());
  CHECK(swapped.error().message().find("the jail home " + jh + " is not a directory") != std::string::npos);
}

TEST_CASE("devices keep device access; nothing else does") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  for (const auto& op : spec->mounts) {
    CAPTURE(op.dest);
    bool is_dev_node = op.dest.starts_with("/dev/") && op.kind == MountKind::bind;
    CHECK((op.devices == Devices::allowed) == is_dev_node);
  }
}

TEST_CASE("Landlock: required without kernel support stops the run; available means rules from the mounts") {
  PlanInput in = debian_input();
  in.landlock_use = LandlockUse::required;
  in.landlock_abi = 0;
  auto refused = plan(in, debian_host());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("Landlock is required") != std::string::npos);

  in.landlock_use = LandlockUse::if_available;
  auto without = plan(in, debian_host());
  REQUIRE(without.ok());
  CHECK(without->landlock.handled_fs == 0);
  CHECK(without->landlock.rules.empty());

  in.landlock_abi = 5;
  auto with = plan(in, debian_host());
  REQUIRE(with.ok());
  CHECK(with->landlock.handled_fs == 0xffff);  // ABI 5: through device ioctl
  CHECK(with->landlock.scoped == 0);           // scopes arrive with ABI 6
  bool workspace_rw = false, usr_ro = false;
  for (const auto& r : with->landlock.rules) {
    if (r.path == "/home/u/src/proj") workspace_rw = (r.access & 2) != 0;  // WRITE_FILE
    if (r.path == "/usr") usr_ro = (r.access & 2) == 0 && (r.access & 4) != 0;
  }
  CHECK(workspace_rw);
  CHECK(usr_ro);
}

TEST_CASE("/tmp, /var/tmp and /dev/shm are directories of one scratch tmpfs of the policy's size") {
  PlanInput in = debian_input();
  in.scratch = {8u << 20, pj::policy::MemorySize::Unit::bytes};
  auto spec = plan(in, debian_host());
  REQUIRE(spec.ok());
  CHECK(spec->scratch_fs == "size=8M,mode=0755");
  std::vector<std::pair<std::string, std::string>> places;
  for (const auto& op : spec->mounts) {
    CHECK_FALSE((op.kind == MountKind::tmpfs && (op.dest == "/tmp" || op.dest == "/var/tmp" || op.dest == "/dev/shm")));
    if (op.kind != MountKind::scratch || op.dest == in.home) continue;
    CHECK(op.access == Access::read_write);
    CHECK(op.devices == Devices::denied);
    places.emplace_back(op.dest, op.scratch_dir);
  }
  CHECK(places == std::vector<std::pair<std::string, std::string>>{
                      {"/tmp", "tmp"}, {"/var/tmp", "var-tmp"}, {"/dev/shm", "shm"}});
  // Landlock lets the jail use each place fully.
  in.landlock_abi = 3;
  auto with_landlock = plan(in, debian_host());
  REQUIRE(with_landlock.ok());
  int rules = 0;
  for (const auto& r : with_landlock->landlock.rules)
    if (r.path == "/tmp" || r.path == "/var/tmp" || r.path == "/dev/shm") rules += r.access == ~0ULL;
  CHECK(rules == 3);
  // The default: half the RAM, for all three together.
  CHECK(plan(debian_input(), debian_host())->scratch_fs == "size=50%,mode=0755");
}

namespace {

const MountOp* op_at(const JailSpec& spec, const std::string& dest) {
  for (const auto& op : spec.mounts)
    if (op.dest == dest && op.kind != MountKind::seal) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("protected paths in the workspace: placeholders git ignores, .git/commondir holding '.', held marks") {
  Facts f = debian_host();
  const std::string ws = "/home/u/src/proj";
  f[ws + "/.git"] = dir(ws + "/.git", 900);
  f[ws + "/.git/hooks"] = dir(ws + "/.git/hooks", 901);
  PlanInput in = debian_input();
  in.read_only = {{ws + "/.git/hooks", "hooks", Node::directory},
                  {ws + "/.git/commondir", "commondir", Node::file},
                  {ws + "/.envrc", "envrc", Node::file},
                  {ws + "/a/b/c.conf", "deep", Node::file},
                  {ws + "/nogit/.git/hooks", "no repository", Node::directory}};
  f[ws + "/nogit"] = dir(ws + "/nogit", 902);
  auto spec = plan(in, f);
  REQUIRE(spec);
  const MountOp* hooks = op_at(*spec, ws + "/.git/hooks");
  REQUIRE(hooks);
  CHECK(hooks->kind == MountKind::bind);
  CHECK(hooks->access == Access::read_only);
  CHECK(hooks->held);
  const MountOp* commondir = op_at(*spec, ws + "/.git/commondir");
  REQUIRE(commondir);
  CHECK(commondir->placeholder);
  CHECK(commondir->node == Node::file);
  CHECK(commondir->mask_content == ".\n");
  const MountOp* envrc = op_at(*spec, ws + "/.envrc");
  REQUIRE(envrc);
  CHECK(envrc->placeholder);
  CHECK(envrc->node == Node::directory);  // an empty directory: git add -A never records it
  // A missing parent is covered at its first missing component...
  const MountOp* a = op_at(*spec, ws + "/a");
  REQUIRE(a);
  CHECK(a->placeholder);
  CHECK(a->node == Node::directory);
  CHECK_FALSE(op_at(*spec, ws + "/a/b/c.conf"));
  // ...except a missing .git: a repository the jail creates is audited instead.
  CHECK_FALSE(op_at(*spec, ws + "/nogit/.git"));
  CHECK_FALSE(op_at(*spec, ws + "/nogit/.git/hooks"));
}

TEST_CASE("a symlink at or above a protected path inside a writable grant stops the plan, naming it") {
  const std::string ws = "/home/u/src/proj";
  struct Case {
    const char* link;
    const char* mark;
    const char* said;
  } cases[] = {
      {"/.git", "/.git/hooks", "/home/u/src/proj/.git is a symlink, and /home/u/src/proj/.git/hooks below it"},
      {"/.envrc", "/.envrc", "/home/u/src/proj/.envrc is a symlink; it must stay read-only"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.link);
    Facts f = debian_host();
    f[ws + c.link] = link("/elsewhere", dir("/elsewhere", 990));
    PlanInput in = debian_input();
    in.read_only = {{ws + c.mark, "protected", Node::directory}};
    auto spec = plan(in, f);
    REQUIRE_FALSE(spec);
    CHECK(spec.error().message().find(c.said) != std::string::npos);
  }
}

TEST_CASE("listeners: the two proxies, then every forward; a bounded number of ports with a clear error") {
  PlanInput in = debian_input();
  for (int port = 1; port <= static_cast<int>(kMaxForwardPorts); ++port) {
    in.forwards.push_back({pj::runtime::Loopback::v4, 40000 + port});
    in.forwards.push_back({pj::runtime::Loopback::v6, 40000 + port});
  }
  auto spec = plan(in, debian_host());
  REQUIRE(spec);
  REQUIRE(spec->listeners.size() == 2 + 2 * kMaxForwardPorts);
  CHECK(spec->listeners[2].kind == ListenSpec::Kind::forward);
  CHECK(spec->listeners[0].address == pj::runtime::Loopback::v4);
  CHECK(spec->listeners.back().address == pj::runtime::Loopback::v6);
  in.forwards.push_back({pj::runtime::Loopback::v4, 1});
  auto over = plan(in, debian_host());
  REQUIRE_FALSE(over);
  CHECK(over.error().message().find("too many host-loopback forwards: 257 ports, at most 256") != std::string::npos);
  PlanInput proxy_port = debian_input();
  proxy_port.forwards = {{pj::runtime::Loopback::v4, kHttpProxyPort}, {pj::runtime::Loopback::v6, kHttpProxyPort}};
  auto clash = plan(proxy_port, debian_host());
  REQUIRE_FALSE(clash);
  CHECK(clash.error().message().find("the jail's proxy listens on 127.0.0.1:3128") != std::string::npos);
  CHECK(std::string(pj::runtime::loopback_address(pj::runtime::Loopback::v4)) == "127.0.0.1");
  CHECK(std::string(pj::runtime::loopback_address(pj::runtime::Loopback::v6)) == "::1");
}

TEST_CASE("a socket grant is the socket itself at its own path; missing, not a socket, a symlink or denied stops") {
  PathFact sock = file("/tmp/ssh-x/agent.1", 900);
  sock.kind = PathFact::Kind::socket;
  auto facts = debian_host();
  facts["/tmp/ssh-x/agent.1"] = sock;
  auto in = debian_input();
  in.sockets.push_back({"/tmp/ssh-x/agent.1", "socket grant op.toml:2:12"});
  auto spec = plan(in, facts);
  REQUIRE(spec);
  const MountOp* op = find(*spec, "/tmp/ssh-x/agent.1", MountKind::bind);
  REQUIRE(op);
  CHECK(op->bind_source == "/tmp/ssh-x/agent.1");
  CHECK(op->node == Node::file);
  CHECK(op->access == Access::read_only);
  CHECK(op->ino == 900);
  // Mounted after the scratch /tmp it lies in.
  auto at = [&](const std::string& dest) {
    for (size_t i = 0; i < spec->mounts.size(); ++i)
      if (spec->mounts[i].dest == dest) return i;
    return spec->mounts.size();
  };
  CHECK(at("/tmp") < at("/tmp/ssh-x/agent.1"));

  auto refused = [&](const PathFact& f, const std::string& path, const std::string& deny = "") {
    auto facts2 = debian_host();
    facts2[path] = f;
    auto in2 = debian_input();
    in2.sockets.push_back({path, "socket grant op.toml:2:12"});
    if (!deny.empty()) in2.denies.push_back({deny, "profile: secrets"});
    auto s = plan(in2, facts2);
    REQUIRE_FALSE(s);
    return s.error().message();
  };
  CHECK(refused(PathFact{}, "/tmp/gone") ==
        "socket grant op.toml:2:12 /tmp/gone: no such socket (is the agent "
        "running? is the variable stale?)");
  CHECK(refused(file("/tmp/f", 901), "/tmp/f") == "socket grant op.toml:2:12 /tmp/f: not a unix socket");
  CHECK(refused(dir("/tmp/d", 902), "/tmp/d") == "socket grant op.toml:2:12 /tmp/d: not a unix socket");
  CHECK(refused(link("/tmp/ssh-x/agent.1", sock), "/tmp/link") ==
        "socket grant op.toml:2:12 /tmp/link: a symlink (to /tmp/ssh-x/agent.1); grant the socket itself");
  CHECK(refused(sock, "/tmp/ssh-x/agent.1", "/tmp/ssh-x") ==
        "socket grant op.toml:2:12 /tmp/ssh-x/agent.1: it is under /tmp/ssh-x, which is denied (profile: secrets)");
}

namespace {

// --publish 3000:JAIL_PORT
pj::runtime::Request::Published published_on(int jail_port) {
  pj::runtime::Request::Published p;
  p.spec.host_port = 3000;
  p.spec.jail_port = jail_port;
  p.why = "--publish";
  return p;
}

}  // namespace

TEST_CASE("a published port cannot be the network filter's own listener inside the jail") {
  auto in = debian_input();
  in.forwards.push_back({pj::runtime::Loopback::v4, 11434});
  for (int port : {3128, 1080, 11434}) {
    CAPTURE(port);
    auto in2 = in;
    in2.published.push_back(published_on(port));
    auto s = plan(in2, debian_host());
    REQUIRE_FALSE(s);
    CHECK(s.error().message().find("publish 127.0.0.1:3000:" + std::to_string(port) + " (--publish): jail port") == 0);
  }
  pj::runtime::Request::Published fine;
  fine.spec.host_port = fine.spec.jail_port = 3000;
  in.published.push_back(fine);
  CHECK(plan(in, debian_host()));
}

TEST_CASE("the plan reports every problem at once: the view's, Landlock's and each listener's") {
  auto in = debian_input();
  in.landlock_use = LandlockUse::required;
  in.landlock_abi = 0;
  in.forwards = {{pj::runtime::Loopback::v4, kHttpProxyPort}};
  in.published.push_back(published_on(kSocksProxyPort));
  auto s = plan(in, debian_host());
  REQUIRE_FALSE(s);
  const std::string all = s.error().message();
  CAPTURE(all);
  CHECK(all.find("Landlock is required") != std::string::npos);
  CHECK(all.find("cannot forward host-loopback port 3128") != std::string::npos);
  CHECK(all.find("publish 127.0.0.1:3000:1080 (--publish): jail port 1080") != std::string::npos);
}

TEST_CASE("the run's refusals directory is bound read-only at /run/pi-jail, and only a real directory is") {
  auto spec = plan(debian_input(), debian_host());
  REQUIRE(spec.ok());
  const MountOp* op = find(*spec, "/run/pi-jail", MountKind::bind);
  REQUIRE(op);
  CHECK(op->access == Access::read_only);
  CHECK(op->node == Node::directory);
  CHECK(op->bind_source == "/home/u/.local/state/pi-jail/jail-notes-7-1");
  for (PathFact swapped :
       {file("/home/u/.local/state/pi-jail/jail-notes-7-1", 900), link("/home/u/.ssh", dir("/home/u/.ssh", 901))}) {
    Facts facts = debian_host();
    facts["/home/u/.local/state/pi-jail/jail-notes-7-1"] = swapped;
    auto refused = plan(debian_input(), facts);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message().find("/run/pi-jail <- /home/u/.local/state/pi-jail/jail-notes-7-1: not a "
                                         "directory of pi-jail's") != std::string::npos);
  }
}
