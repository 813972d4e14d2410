// The stages jail_main() (child.cc) runs between clone and exec, one file
// per stage; internal to lib/linuxjail. Rules for child.cc and every
// child_*.cc: no allocation, no stdio, no fmt, no locks, no exceptions;
// only system calls and the plain data in ChildPlan. A failure sends
// {stage, errno, op} to the supervisor and exits 125. See stage.h.
#pragma once

#include <cstddef>

#include "linuxjail/child.h"
#include "linuxjail/stage.h"

namespace pj::linuxjail::in_child {

// child.cc: the failure record on the sync socket, fds on the control socket.
void report(Stage stage, int err, int op);
[[noreturn]] void fail(Stage stage, int err, int op = -1);
void send_fds(int sock, char tag, const int* fds, size_t count, Stage stage);

// child_limits.cc: the run's cgroups (init joins v1 ones itself; the
// supervisor moves it into v2 ones: launch.cc), RLIMIT_NPROC.
void join_cgroups(const ChildPlan& p);
void await_cgroups(const ChildPlan& p);
void limit_processes(const ChildPlan& p);

// child_ids.cc: the user namespace's uid and gid maps.
void map_identity(const ChildPlan& p);

// child_landlock.cc: the command's Landlock ruleset, filled by init as
// the view is built (-1: Landlock not used), enforced by the command.
int landlock_ruleset(const ChildPlan& p);
void landlock_allow(const ChildPlan& p, int ruleset, int fd, size_t rule);
void landlock_allow_rest(const ChildPlan& p, int ruleset, int root);  // the rules not added at a mount
void landlock_enforce(int ruleset);

// child_mounts.cc: the new root and every mount in it; each Landlock rule
// that names a mount is added to `ruleset` from the fd that verified it.
int open_in_root(int root, const char* path, int flags);
void build_filesystem(const ChildPlan& p, int ruleset);

// child_net.cc: loopback, the network filter's listeners.
void bring_up_loopback();
// Open the listeners and send them to pi-jail, which serves them while
// the filesystem is built; then, before the command starts, wait until it
// says its network filter serves them (kControlFilterReady).
void open_listeners(const ChildPlan& p);
void await_filter(const ChildPlan& p);

// child_terminal.cc: the jail's PTY; returns the slave.
int open_terminal(const ChildPlan& p);

// child_exec.cc: the command's privilege drop, Landlock, filter, execve.
[[noreturn]] void exec_command(const ChildPlan& p, int slave, int ruleset);

// child_init.cc: PID 1; `ruleset` goes to the command.
[[noreturn]] void run_init(const ChildPlan& p, int ruleset);

}  // namespace pj::linuxjail::in_child
