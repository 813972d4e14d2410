// The pure parts of the run's cgroups: which controllers a mount or a
// subtree_control names, and the counters of keyed files.
#include <doctest/doctest.h>

#include "linuxjail/cgroup.h"

using namespace pj::linuxjail::cgroup;

TEST_CASE("controllers from v1 mount options and a v2 cgroup.subtree_control") {
  Controllers v1 = controllers_in("rw,nosuid,nodev,noexec,relatime,cpu,cpuacct", ',');
  CHECK(v1.cpu);
  CHECK_FALSE(v1.memory);
  CHECK_FALSE(v1.pids);
  Controllers mem = controllers_in("rw,memory", ',');
  CHECK(mem.memory);
  CHECK_FALSE(mem.cpu);
  Controllers v2 = controllers_in("cpuset cpu io memory pids\n", ' ');
  CHECK(v2.cpu);
  CHECK(v2.memory);
  CHECK(v2.pids);
  Controllers none = controllers_in("hugetlb\n", ' ');
  CHECK_FALSE(none.cpu);
  CHECK_FALSE(none.memory);
  CHECK_FALSE(none.pids);
  // "cpuset" and "cpuacct" are not "cpu".
  CHECK_FALSE(controllers_in("cpuset,cpuacct", ',').cpu);
}

TEST_CASE("keyed counters: memory.events, memory.oom_control, cpu.stat") {
  const char* events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 3\noom_group_kill 0\n";
  CHECK(keyed_value(events, "oom_kill") == 3u);
  CHECK(keyed_value(events, "oom") == 1u);
  CHECK_FALSE(keyed_value(events, "oom_kil").has_value());
  CHECK(keyed_value("oom_kill_disable 0\nunder_oom 0\noom_kill 2", "oom_kill") == 2u);
  CHECK(keyed_value("usage_usec 123456\nuser_usec 1\n", "usage_usec") == 123456u);
  CHECK_FALSE(keyed_value("oom_kill x\n", "oom_kill").has_value());
  CHECK_FALSE(keyed_value("", "oom_kill").has_value());
  CHECK_FALSE(keyed_value("oom_kill 123456789012345678901234567890\n", "oom_kill").has_value());
}
