// How the jail's init joins the run's cgroups: a cgroup v1 `tasks` file
// gets "0" from init itself, first thing; for a v2 cgroup.procs the
// supervisor writes init's pid and tells init how that went, and init
// waits for it before it forks anything. Pipes stand in for the cgroup
// files and a forked process for init (no privileges needed; that the
// kernel honours the move is tests/containment/limits_test.cc).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "linuxjail/child.h"
#include "linuxjail/child_stages.h"
#include "linuxjail/launch.h"
#include "linuxjail/spec.h"
#include "linuxjail/stage.h"

using namespace pj::linuxjail;

namespace {

struct SocketPair {
  int ours = -1, theirs = -1;
  SocketPair() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    ours = sv[0];
    theirs = sv[1];
  }
  ~SocketPair() {
    ::close(ours);
    ::close(theirs);
  }
};

std::string drain(int fd) {
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Init's side in a forked process: join_cgroups then await_cgroups,
// then exit 0 (what comes next in jail_main). The exit status.
int init_side(int control_fd, std::vector<int> procs, std::vector<int> tasks = {}) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ChildPlan plan{};
    plan.control_fd = control_fd;
    plan.sync_fd = -1;
    plan.cgroup_procs_fds = procs.data();
    plan.cgroup_procs_count = procs.size();
    plan.cgroup_tasks_fds = tasks.data();
    plan.cgroup_tasks_count = tasks.size();
    in_child::join_cgroups(plan);
    // Closed: nothing of the jail keeps a way to move anything.
    for (int fd : procs)
      if (::fcntl(fd, F_GETFD) != -1) ::_exit(3);
    for (int fd : tasks)
      if (::fcntl(fd, F_GETFD) != -1) ::_exit(4);
    in_child::await_cgroups(plan);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("the supervisor writes init's pid to every cgroup.procs, then tells init it was moved") {
  int a[2], b[2];
  REQUIRE(::pipe(a) == 0);
  REQUIRE(::pipe(b) == 0);
  SocketPair control;
  const int procs[] = {a[1], b[1]};
  REQUIRE(move_into_cgroups(4242, control.ours, procs).ok());
  CHECK(drain(a[0]) == "4242");
  CHECK(drain(b[0]) == "4242");
  char msg[kControlCgroupsSize + 1] = {};
  REQUIRE(::recv(control.theirs, msg, sizeof msg, MSG_DONTWAIT) == static_cast<ssize_t>(kControlCgroupsSize));
  CHECK(msg[0] == kControlCgroups);
  int err = -1;
  std::memcpy(&err, msg + 1, sizeof err);
  CHECK(err == 0);
  // Init, told so, goes on.
  REQUIRE(::send(control.ours, msg, kControlCgroupsSize, 0) == static_cast<ssize_t>(kControlCgroupsSize));
  CHECK(init_side(control.theirs, {::dup(a[1])}) == 0);
  for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
}

TEST_CASE("a move the kernel refuses reaches init as its errno: init stops there (125) and forks nothing") {
  int ro = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // write(2) refuses: EBADF
  REQUIRE(ro >= 0);
  SocketPair control;
  const int procs[] = {ro};
  REQUIRE(move_into_cgroups(4242, control.ours, procs).ok());
  char msg[kControlCgroupsSize] = {};
  REQUIRE(::recv(control.theirs, msg, sizeof msg, MSG_PEEK) == static_cast<ssize_t>(sizeof msg));
  int err = 0;
  std::memcpy(&err, msg + 1, sizeof err);
  CHECK(err == EBADF);
  CHECK(init_side(control.theirs, {::dup(ro)}) == 125);
  ::close(ro);
}

TEST_CASE("init with cgroups to join stops (125) when the supervisor is gone before saying it moved it") {
  SocketPair control;
  ::shutdown(control.ours, SHUT_WR);
  int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(init_side(control.theirs, {fd}) == 125);
  ::close(fd);
}

TEST_CASE("without cgroups nothing is written or sent, and init does not wait") {
  SocketPair control;
  REQUIRE(move_into_cgroups(4242, control.ours, {}).ok());
  char c;
  CHECK(::recv(control.theirs, &c, 1, MSG_DONTWAIT) == -1);
  CHECK(errno == EAGAIN);
  CHECK(init_side(control.theirs, {}) == 0);
}

TEST_CASE("cgroup v1: init writes \"0\" to every tasks file itself and closes it, and waits for no message") {
  int a[2], b[2];
  REQUIRE(::pipe(a) == 0);
  REQUIRE(::pipe(b) == 0);
  SocketPair control;  // nothing is ever sent on it: init must not wait
  CHECK(init_side(control.theirs, {}, {a[1], b[1]}) == 0);
  CHECK(drain(a[0]) == "0");
  CHECK(drain(b[0]) == "0");
  for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
}

TEST_CASE("cgroup v1: a tasks file the kernel refuses stops init (125) before anything else") {
  int ro = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // write(2) refuses: EBADF
  REQUIRE(ro >= 0);
  SocketPair control;
  CHECK(init_side(control.theirs, {}, {ro}) == 125);
  ::close(ro);
}

TEST_CASE("v1 and v2 at once: init joins the v1 cgroups itself and waits for the supervisor's word on v2") {
  int t[2], p[2];
  REQUIRE(::pipe(t) == 0);
  REQUIRE(::pipe(p) == 0);
  SocketPair control;
  const int procs[] = {p[1]};
  REQUIRE(move_into_cgroups(4242, control.ours, procs).ok());
  CHECK(drain(p[0]) == "4242");
  const int procs_copy = ::dup(p[1]);  // init's copy, closed by it (and here)
  CHECK(init_side(control.theirs, {procs_copy}, {t[1]}) == 0);
  CHECK(drain(t[0]) == "0");
  for (int fd : {t[0], t[1], p[0], p[1], procs_copy}) ::close(fd);
}

// An init that fails before it reads the supervisor's word on the v2
// move (here at once: a v1 tasks file it cannot write) leaves that
// message unread; reading the control socket then says ECONNRESET. That
// is the control socket's end, not a failure of the supervisor's own:
// the run's failure is init's record (was "read the control socket:
// Connection reset by peer", which hid the step that failed, e.g. the
// ESTALE of a bind source that changed).
TEST_CASE("init failing before it reads the v2 move's word: its record says why, the control socket just ends") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  int ro = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // init's write(2) of "0" fails: EBADF
  REQUIRE(ro >= 0);
  JailSpec spec;
  spec.exec_path = "/bin/true";
  spec.argv = {"/bin/true"};
  cgroup::JoinFiles files;
  files.tasks = {ro};
  files.procs = {p[1]};
  auto jail = Jail::launch(spec, files);
  if (!jail && jail.error().err() == EPERM) {
    MESSAGE("no user namespaces here: " << jail.error().message());
    return;
  }
  if (!jail) FAIL(jail.error().message());
  pollfd gone{jail->pidfd(), POLLIN, 0};
  REQUIRE(::poll(&gone, 1, -1) == 1);  // init has exited
  auto rec = jail->read_sync();
  REQUIRE(rec.ok());
  REQUIRE(rec->has_value());
  CHECK((*rec)->stage == Stage::join_cgroup);
  CHECK((*rec)->err == EBADF);
  auto msg = jail->read_control();
  if (!msg)
    FAIL_CHECK(msg.error().message());
  else
    CHECK_FALSE(msg->has_value());
  CHECK(jail->control_fd() == -1);
  auto code = jail->reap();
  REQUIRE(code.ok());
  CHECK(*code == 125);
  for (int fd : {p[0], p[1], ro}) ::close(fd);
}
