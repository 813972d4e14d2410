// The pure parts of the run's cgroups: which controllers a mount or a
// subtree_control names, and the counters of keyed files.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "linuxjail/cgroup.h"
#include "temp_dir.h"

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

// RunCgroups::create on plain directories standing in for cgroup v2 ones:
// it gets as far as writing the first limit, which names the directory
// it chose (a plain directory has no memory.max).
namespace {
struct FakeCgroups : pj::test::TempDir {
  std::string dir(const std::string& name) const {
    REQUIRE(std::filesystem::create_directory(path + "/" + name));
    return path + "/" + name;
  }
};
}  // namespace

TEST_CASE("limits split over two cgroup v2 directories are refused before anything is made: one would not hold") {
  // A process is in one v2 directory only: moving the jail into the
  // second takes it out of the first, and that one's limit with it.
  FakeCgroups fake;
  const std::string a = fake.dir("a"), b = fake.dir("b");
  std::vector<Dir> dirs = {{a, 2, {.memory = true}}, {b, 2, {.pids = true}}};
  Wanted wanted;
  wanted.memory_bytes = 1 << 30;
  wanted.pids = 100;
  auto made = RunCgroups::create(dirs, wanted, "pi-jail-1-1");
  REQUIRE_FALSE(made.ok());
  const std::string text = made.error().message();
  CHECK(text.find("the memory controller is in " + a + " and the pids controller in " + b) != std::string::npos);
  CHECK(text.find("only one cgroup v2 directory") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(a + "/pi-jail-1-1"));
  CHECK_FALSE(std::filesystem::exists(b + "/pi-jail-1-1"));
  // Only one of the two limits: no conflict, the first limit is written.
  Wanted memory_only;
  memory_only.memory_bytes = 1 << 30;
  auto one = RunCgroups::create(dirs, memory_only, "pi-jail-1-2");
  REQUIRE_FALSE(one.ok());
  CHECK(one.error().message().find("open " + a + "/pi-jail-1-2/memory.max") != std::string::npos);
}

TEST_CASE("a cgroup v2 directory with every wanted controller serves them all, before the first with each") {
  FakeCgroups fake;
  const std::string a = fake.dir("a"), b = fake.dir("b");
  std::vector<Dir> dirs = {{a, 2, {.memory = true}}, {b, 2, {.memory = true, .pids = true}}};
  Wanted wanted;
  wanted.memory_bytes = 1 << 30;
  wanted.pids = 100;
  auto made = RunCgroups::create(dirs, wanted, "pi-jail-1-3");
  REQUIRE_FALSE(made.ok());  // a plain directory has no memory.max
  CHECK(made.error().message().find("open " + b + "/pi-jail-1-3/memory.max") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(a + "/pi-jail-1-3"));
}
