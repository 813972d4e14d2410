// The run's cgroups: where the host delegates a cgroup directory to the
// user (an operator names it: `[limits] cgroup`), pi-jail makes one child
// directory per run in it, writes the run's memory, CPU and process
// limits there, and the jail's init is moved into it before it forks
// anything (child_limits.cc, launch.cc move_into_cgroups). cgroup v2 and
// the v1 hierarchies (memory, cpu, pids mounted apart) are both handled;
// a limit no directory can enforce is refused before anything runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::linuxjail::cgroup {

struct Controllers {
  bool memory = false, cpu = false, pids = false;
};

// A cgroup directory and what a child made in it can limit.
struct Dir {
  std::string path;
  int version = 0;  // 1 or 2
  Controllers controllers;
};

// Pure: the controllers named in a cgroup v1 mount's options
// ("rw,nosuid,cpu,cpuacct") or a v2 cgroup.subtree_control ("cpu memory").
Controllers controllers_in(std::string_view words, char sep);
// Pure: the value of `key` in a flat-keyed file ("oom_kill 3\n...").
std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key);

// What the directory at `path` is: a cgroup v2 or v1 directory and the
// controllers a child of it gets. An error names the path and the fix.
util::Result<Dir> probe(const std::string& path);
// The caller's own cgroup directories (from /proc/self/cgroup and the
// mounts), for doctor and for root's process limit.
std::vector<Dir> own_dirs();

struct Wanted {
  std::optional<std::uint64_t> memory_bytes;
  std::optional<std::uint64_t> millicpus;
  std::optional<std::uint64_t> pids;
};

// What the run used, as the cgroups counted it.
struct Usage {
  std::optional<std::uint64_t> memory_peak, cpu_usec, pids_peak, oom_kills;
};

// The open files through which the jail's init joins the run's cgroups.
struct JoinFiles {
  // cgroup v1: each directory's `tasks`. Init writes "0" to them itself,
  // first thing: moving only the calling thread is the one move the
  // kernel (5.5 and later) makes without taking cgroup_threadgroup_rwsem
  // for writing (kernel/cgroup/cgroup.c cgroup_procs_write_start: pid 0,
  // one thread), so it never waits for an RCU grace period.
  std::vector<int> tasks;
  // cgroup v2: each directory's cgroup.procs (v2 moves single threads
  // only within a threaded subtree). The supervisor writes init's pid to
  // them while init builds the jail (launch.cc move_into_cgroups).
  std::vector<int> procs;
};

class RunCgroups {
public:
  // Make a child named `name` in the first of `dirs` that has each wanted
  // controller, and write the limits. `wanted` limits that no directory
  // has the controller for are an error.
  static util::Result<RunCgroups> create(const std::vector<Dir>& dirs, const Wanted& wanted, const std::string& name);
  RunCgroups(RunCgroups&&) = default;
  RunCgroups& operator=(RunCgroups&&) = default;
  ~RunCgroups();

  // The files for init to join (owned here).
  JoinFiles join_files() const;
  // "memory, pids: cgroup v1 /sys/fs/cgroup/memory/x/pi-jail-1-2" per directory.
  std::vector<std::string> describe() const;
  // Which made directory enforces `what` ("memory", "cpu", "pids"): "cgroup v1 PATH", or "".
  std::string enforcer(std::string_view what) const;
  Usage usage() const;

private:
  RunCgroups() = default;
  struct Made {
    std::string path;
    int version = 0;
    Controllers used;
    util::UniqueFd join;  // v1: tasks; v2: cgroup.procs
  };
  std::vector<Made> made_;
};

}  // namespace pj::linuxjail::cgroup
