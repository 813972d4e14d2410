// The jail's terminal. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace pj::linuxjail::in_child {

// A PTY in the jail's own devpts: the master goes to the supervisor (which
// keeps the real terminal), the slave to the command. Returns the slave.
int open_terminal(const ChildPlan& p) {
  int master = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) fail(Stage::terminal, errno);
  int unlock = 0;
  if (::ioctl(master, TIOCSPTLCK, &unlock) != 0) fail(Stage::terminal, errno);
  int slave = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) fail(Stage::terminal, errno);
  if (::ioctl(slave, TCSETS, &p.pty_mode) != 0) fail(Stage::terminal, errno);
  if (::ioctl(master, TIOCSWINSZ, &p.pty_size) != 0) fail(Stage::terminal, errno);
  send_fds(p.control_fd, kControlMaster, &master, 1, Stage::terminal);
  ::close(master);
  return slave;
}

}  // namespace pj::linuxjail::in_child
