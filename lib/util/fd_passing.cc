#include "fd_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::util {

ssize_t send_fds_some(int sock, const void* data, size_t size, const int* fds, size_t count, int flags) {
  if (count > kMaxPassedFds) return -E2BIG;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(h), fds, sizeof(int) * count);
  }
  ssize_t n;
  do n = ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  return n;
}

int send_fds(int sock, const void* data, size_t size, const int* fds, size_t count, int flags) {
  ssize_t n = send_fds_some(sock, data, size, fds, count, flags);
  if (n < 0) return static_cast<int>(n);
  return static_cast<size_t>(n) == size ? 0 : -EPROTO;
}

ssize_t receive_fds(int sock, void* data, size_t size, int* fds, size_t* count, int flags) {
  *count = 0;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  iovec iov{data, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
#ifdef MSG_CMSG_CLOEXEC
  flags |= MSG_CMSG_CLOEXEC;
#endif
  ssize_t n;
  do n = ::recvmsg(sock, &msg, flags);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t in_header = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < in_header; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
#ifndef MSG_CMSG_CLOEXEC
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
      if (*count < kMaxPassedFds)
        fds[(*count)++] = fd;
      else
        ::close(fd);
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    for (size_t i = 0; i < *count; ++i) ::close(fds[i]);
    *count = 0;
    return -EMSGSIZE;
  }
  return n;
}

}  // namespace pj::util
