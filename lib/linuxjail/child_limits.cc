// The run's resource bounds taken on inside the jail: its cgroups and
// RLIMIT_NPROC. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace pj::linuxjail::in_child {

// Into the run's cgroups before anything is allocated or forked: writing
// "0" moves the writer. The files were opened by the supervisor, whose
// credentials the kernel checks (cgroup_procs_write_permission uses the
// opener's), and whose cgroup namespace bounds the move.
void join_cgroups(const ChildPlan& p) {
  for (size_t i = 0; i < p.cgroup_fd_count; ++i) {
    if (::write(p.cgroup_fds[i], "0", 1) != 1) fail(Stage::join_cgroup, errno, -1);
    ::close(p.cgroup_fds[i]);
  }
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
