// The flat plan the jail's child reads (ChildPlanStorage): which Landlock
// rules init adds from a mount's verified fd, and which it opens by path
// once the view is complete. No privileges, no clone.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "linuxjail/child.h"

using namespace pj::linuxjail;

namespace {

MountOp op(MountKind kind, const std::string& dest) {
  MountOp o;
  o.kind = kind;
  o.dest = dest;
  return o;
}

struct Flat {
  int sv[2] = {-1, -1};
  ChildPlanStorage storage;
  explicit Flat(const JailSpec& spec) : storage(spec, {}, {}, fds(sv)) {}
  ~Flat() {
    ::close(sv[0]);
    ::close(sv[1]);
  }
  static ChildPlanStorage::Fds fds(int (&sv)[2]) {
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    return {sv[0], sv[1], sv[0], sv[1]};
  }
  const ChildPlan& plan() const { return storage.plan(); }
};

}  // namespace

TEST_CASE("Landlock rules: added at the mount that the finished view shows at their path, else by path") {
  JailSpec spec;
  spec.mounts = {
      op(MountKind::bind, "/usr"),     // 0: rule at this mount
      op(MountKind::bind, "/etc/a"),   // 1: covered by the mask below at the same path
      op(MountKind::mask, "/etc/a"),   // 2: what /etc/a shows at the end: the rule's mount
      op(MountKind::bind, "/w/x"),     // 3: covered later from above (not depth-sorted)
      op(MountKind::bind, "/w"),       // 4
      op(MountKind::tmpfs, "/dev"),    // 5: a seal later keeps the inode
      op(MountKind::symlink, "/lib"),  // 6: no mount: by path
      op(MountKind::seal, "/dev"),     // 7
  };
  spec.landlock.handled_fs = 0xffff;
  for (const char* p : {"/", "/usr", "/etc/a", "/w/x", "/w", "/dev", "/lib", "/nowhere"})
    spec.landlock.rules.push_back({p, 0x7, Node::directory});
  Flat flat(spec);
  const ChildPlan& p = flat.plan();
  REQUIRE(p.landlock_rule_count == 8);
  REQUIRE(p.mount_count == 8);

  auto rule = [&](size_t i) { return p.landlock_rules[i]; };
  CHECK_FALSE(rule(0).at_mount);  // "/": the root, opened at the end
  CHECK(rule(0).op == -1);
  CHECK(rule(1).at_mount);
  CHECK(p.mounts[0].landlock_rule == 1);
  CHECK(rule(2).at_mount);
  CHECK(rule(2).op == 2);
  CHECK(p.mounts[2].landlock_rule == 2);
  CHECK(p.mounts[1].landlock_rule == -1);
  CHECK_FALSE(rule(3).at_mount);  // /w is mounted over /w/x afterwards
  CHECK(rule(3).op == 3);
  CHECK(p.mounts[3].landlock_rule == -1);
  CHECK(rule(4).at_mount);
  CHECK(p.mounts[4].landlock_rule == 4);
  CHECK(rule(5).at_mount);
  CHECK(p.mounts[5].landlock_rule == 5);
  CHECK(p.mounts[7].landlock_rule == -1);
  CHECK_FALSE(rule(6).at_mount);  // a symlink is not a mount
  CHECK(rule(6).op == 6);
  CHECK_FALSE(rule(7).at_mount);  // no operation at that path
  CHECK(rule(7).op == -1);
  for (size_t i = 0; i < p.landlock_rule_count; ++i) CHECK(rule(i).access == 0x7);
}

TEST_CASE("Landlock rules: two rules for one mount, the second by path") {
  JailSpec spec;
  spec.mounts = {op(MountKind::bind, "/usr")};
  spec.landlock.handled_fs = 0x3;
  spec.landlock.rules = {{"/usr", 0x7, Node::directory}, {"/usr", 0x4, Node::directory}};
  Flat flat(spec);
  const ChildPlan& p = flat.plan();
  CHECK(p.landlock_rules[0].at_mount);
  CHECK(p.landlock_rules[0].access == 0x3);  // narrowed to what the kernel handles
  CHECK_FALSE(p.landlock_rules[1].at_mount);
  CHECK(p.landlock_rules[1].op == 0);
  CHECK(p.mounts[0].landlock_rule == 0);
}

TEST_CASE("the run's cgroup files: v1 tasks for init to write, v2 cgroup.procs for the supervisor, never swapped") {
  JailSpec spec;
  int sv[2];
  ChildPlanStorage storage(spec, {}, {}, Flat::fds(sv), cgroup::JoinFiles{{11, 12}, {21}});
  const ChildPlan& p = storage.plan();
  REQUIRE(p.cgroup_tasks_count == 2);
  CHECK(p.cgroup_tasks_fds[0] == 11);
  CHECK(p.cgroup_tasks_fds[1] == 12);
  REQUIRE(p.cgroup_procs_count == 1);
  CHECK(p.cgroup_procs_fds[0] == 21);
  ::close(sv[0]);
  ::close(sv[1]);
}
