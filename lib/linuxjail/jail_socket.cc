#include "linuxjail/jail_socket.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::linuxjail {

namespace {

// In the child: report errno `err` (no fd), then leave.
[[noreturn]] void answer_error(int sock, int err) {
  ssize_t n = ::send(sock, &err, sizeof err, MSG_NOSIGNAL);
  (void)n;
  ::_exit(1);
}

[[noreturn]] void make_in_jail(int sock, int pidfd, int family) {
  if (::setns(pidfd, CLONE_NEWUSER | CLONE_NEWNET) != 0) answer_error(sock, errno);
  int s = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) answer_error(sock, errno);
  int ok = 0;
  iovec iov{&ok, sizeof ok};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  cmsghdr* h = CMSG_FIRSTHDR(&msg);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(h), &s, sizeof s);
  if (::sendmsg(sock, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ok)) ::_exit(1);
  ::_exit(0);
}

}  // namespace

int jail_socket(int pidfd, int family) {
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
    make_in_jail(sp[1], pidfd, family);
  }
  ::close(sp[1]);
  int err = 0;
  iovec iov{&err, sizeof err};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do n = ::recvmsg(sp[0], &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  int got_errno = n < 0 ? errno : 0;
  ::close(sp[0]);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  int fd = -1;
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); n > 0 && h; h = CMSG_NXTHDR(&msg, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(&fd, CMSG_DATA(h), sizeof fd);
  if (fd >= 0) {
    if (err == 0) return fd;
    ::close(fd);
  }
  if (got_errno) return -got_errno;
  if (n != static_cast<ssize_t>(sizeof err)) return -EPROTO;
  return err ? -err : -EPROTO;
}

}  // namespace pj::linuxjail
