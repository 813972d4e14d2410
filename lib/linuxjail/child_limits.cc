// The run's resource bounds taken on inside the jail: its cgroups and
// RLIMIT_NPROC. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::linuxjail::in_child {

// Into the run's cgroups before anything is forked. Moving a process
// takes the kernel's cgroup_threadgroup_rwsem for writing, which waits
// for an RCU grace period unless another move just happened (3.5-19 ms
// measured on a cgroup v1 host, none of it CPU time). Moving only the
// calling thread, by writing "0" to a v1 `tasks` file, takes no such
// lock since Linux 5.5 ("cgroup: Optimize single thread migration";
// older kernels take it here too): init is single-threaded here, so that
// moves all of it, and costs microseconds. The kernel checks the
// opener's credentials (the supervisor's, who opened the files).
//
// cgroup v2 moves single threads only inside a threaded subtree, so
// there the supervisor writes our pid to each cgroup.procs while we
// build the filesystem (launch.cc move_into_cgroups), and await_cgroups
// waits for its word. What the setup allocates until then is charged
// where the supervisor runs; nothing of the command's runs before the
// move.

// First thing: join the v1 cgroups, then close every cgroup file (the
// v2 cgroup.procs files are the supervisor's to write).
void join_cgroups(const ChildPlan& p) {
  for (size_t i = 0; i < p.cgroup_tasks_count; ++i) {
    ssize_t n;
    do n = ::write(p.cgroup_tasks_fds[i], "0", 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) fail(Stage::join_cgroup, n < 0 ? errno : EIO, -1);
    ::close(p.cgroup_tasks_fds[i]);
  }
  for (size_t i = 0; i < p.cgroup_procs_count; ++i) ::close(p.cgroup_procs_fds[i]);
}

// Before the listeners are sent and anything is forked: the supervisor's
// kControlCgroups message and the v2 move's errno (0: moved).
void await_cgroups(const ChildPlan& p) {
  if (p.cgroup_procs_count == 0) return;
  char msg[kControlCgroupsSize] = {};
  ssize_t n;
  do n = ::read(p.control_fd, msg, sizeof msg);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof msg) || msg[0] != kControlCgroups)
    fail(Stage::join_cgroup, n < 0 ? errno : EPROTO, -1);
  int err = 0;
  std::memcpy(&err, msg + 1, sizeof err);
  if (err != 0) fail(Stage::join_cgroup, err, -1);
}

// RLIMIT_NPROC set here, inside the new user namespace, limits the tasks
// of (this namespace, this uid): every process and thread of this jail,
// none of the host's (kernel/ucount.c is_rlimit_overlimit(): the task's
// own limit is checked against its namespace's count; the levels above
// are checked against the limit the supervisor had when the namespace
// was made). Soft and hard alike: raising it needs CAP_SYS_RESOURCE in the
// initial namespace, which nothing in the jail has.
void limit_processes(const ChildPlan& p) {
  if (p.nproc == 0) return;
  rlimit lim{static_cast<rlim_t>(p.nproc), static_cast<rlim_t>(p.nproc)};
  if (::setrlimit(RLIMIT_NPROC, &lim) != 0) fail(Stage::process_limit, errno);
}

}  // namespace pj::linuxjail::in_child
