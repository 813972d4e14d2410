// The run's resource bounds taken on inside the jail: its cgroups and
// RLIMIT_NPROC. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::linuxjail::in_child {

// Into the run's cgroups before anything is forked. The supervisor moves
// this process (it writes our pid to each cgroup.procs it opened, right
// after clone) while we build the filesystem: a move takes the kernel's
// cgroup_threadgroup_rwsem for writing, which waits for an RCU grace
// period (3.5-19 ms measured on a cgroup v1 host), so doing it beside the
// mounts instead of before them takes it off the start-up's critical
// path. The kernel checks the opener's credentials and cgroup namespace,
// the supervisor's, as it did when we wrote "0" ourselves. What the setup
// allocates until then is charged where the supervisor runs; nothing of
// the command's runs before the move.

// First thing: the cgroup.procs files are the supervisor's to write.
void close_cgroup_files(const ChildPlan& p) {
  for (size_t i = 0; i < p.cgroup_fd_count; ++i) ::close(p.cgroup_fds[i]);
}

// Before the listeners are sent and anything is forked: the supervisor's
// kControlCgroups message and the move's errno (0: moved).
void await_cgroups(const ChildPlan& p) {
  if (p.cgroup_fd_count == 0) return;
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
