// Between clone and exec: jail_main() is the recipe, each stage lives in
// the child_*.cc file named beside it. The rules of child_stages.h hold.
#include "linuxjail/child.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "linuxjail/child_stages.h"
#include "util/fd_passing.h"

namespace pj::linuxjail {

namespace in_child {

namespace {

// The sync fd and exit code a failure uses; set once per process.
int g_sync_fd = -1;

}  // namespace

void report(Stage stage, int err, int op) {
  SyncRecord rec{kSyncMagic, stage, err, op};
  ssize_t n = ::write(g_sync_fd, &rec, sizeof rec);
  (void)n;
}

[[noreturn]] void fail(Stage stage, int err, int op) {
  report(stage, err, op);
  ::_exit(125);
}

// Send `count` fds (at most kFdBatch) in one message tagged `tag`.
void send_fds(int sock, char tag, const int* fds, size_t count, Stage stage) {
  if (int err = util::send_fds(sock, &tag, 1, fds, count); err != 0) fail(stage, -err);
}

}  // namespace in_child

[[noreturn]] void jail_main(const ChildPlan& p) {
  using namespace in_child;
  g_sync_fd = p.sync_fd;
  ::close(p.parent_sync_fd);
  ::close(p.parent_control_fd);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(Stage::die_with_parent, errno);
  // The supervisor may have died before PDEATHSIG was armed: its end of
  // the sync socket is then closed.
  pollfd pf{p.sync_fd, 0, 0};
  if (::poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR))) ::_exit(125);

  join_cgroups(p);
  map_identity(p);
  limit_processes(p);
  // The listeners first: pi-jail serves them while the filesystem is built.
  bring_up_loopback();
  open_listeners(p);
  const int ruleset = landlock_ruleset(p);
  build_filesystem(p, ruleset);
  if (::sethostname(p.hostname, std::strlen(p.hostname)) != 0) fail(Stage::hostname, errno);
  await_cgroups(p);
  await_filter(p);
  run_init(p, ruleset);
}

}  // namespace pj::linuxjail
