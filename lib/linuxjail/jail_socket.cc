#include "linuxjail/jail_socket.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fd_passing.h"

namespace pj::linuxjail {

namespace {

// In the child: report errno `err` (no fd), then leave.
[[noreturn]] void answer_error(int sock, int err) {
  ssize_t n = ::send(sock, &err, sizeof err, MSG_NOSIGNAL);
  (void)n;
  ::_exit(1);
}

[[noreturn]] void make_in_jail(int sock, int pidfd, int domain, int type, int protocol) {
  if (::setns(pidfd, CLONE_NEWUSER | CLONE_NEWNET) != 0) answer_error(sock, errno);
  int s = ::socket(domain, type, protocol);
  if (s < 0) answer_error(sock, errno);
  int ok = 0;
  ::_exit(util::send_fds(sock, &ok, sizeof ok, &s, 1) == 0 ? 0 : 1);
}

}  // namespace

int jail_socket(int pidfd, int domain, int type, int protocol) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return -errno;
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(sp[0]);
    ::close(sp[1]);
    return -err;
  }
  if (pid == 0) {
    ::close(sp[0]);
    make_in_jail(sp[1], pidfd, domain, type, protocol);
  }
  ::close(sp[1]);
  int err = 0;
  int fds[util::kMaxPassedFds];
  size_t count = 0;
  ssize_t n = util::receive_fds(sp[0], &err, sizeof err, fds, &count);
  ::close(sp[0]);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  // Exactly one socket and a zero word: anything else is closed.
  if (count == 1 && n == static_cast<ssize_t>(sizeof err) && err == 0) return fds[0];
  for (size_t i = 0; i < count; ++i) ::close(fds[i]);
  if (n < 0) return static_cast<int>(n);
  if (n != static_cast<ssize_t>(sizeof err)) return -EPROTO;
  return err ? -err : -EPROTO;
}

int jail_tcp_socket(int pidfd, int family) {
  return jail_socket(pidfd, family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

}  // namespace pj::linuxjail
