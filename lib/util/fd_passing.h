// File descriptors passed over an AF_UNIX socket (SCM_RIGHTS): the one
// sender and the one receiver. Both are async-signal-safe (no allocation,
// no locks), so a child between fork and exec may use them. POSIX: where
// recvmsg(2) has no MSG_CMSG_CLOEXEC (macOS), a received descriptor is
// made close-on-exec just after it arrives.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace pj::util {

// The most descriptors one message carries here (the kernel's own limit,
// SCM_MAX_FD, is 253).
inline constexpr size_t kMaxPassedFds = 64;

// Sends `size` bytes of `data` (at least one: a message with descriptors
// must carry data) and `count` descriptors as one message on a connected
// socket, without SIGPIPE; `flags` as sendmsg(2)'s (MSG_DONTWAIT). Returns
// 0, or -errno: EINTR is retried; -E2BIG for more than kMaxPassedFds
// descriptors, -EPROTO for a short send.
int send_fds(int sock, const void* data, size_t size, const int* fds, size_t count, int flags = 0);

// As send_fds(), on a stream socket that may take fewer bytes than given
// (the descriptors go with the first of them): the bytes sent, or -errno.
ssize_t send_fds_some(int sock, const void* data, size_t size, const int* fds, size_t count, int flags = 0);

// Receives one message of at most `size` bytes into `data` and its
// descriptors (close-on-exec) into `fds` (room for kMaxPassedFds), their
// number into `*count`; `flags` as recvmsg(2)'s (MSG_DONTWAIT). Returns the
// bytes read (0 at the end of the stream), or -errno: EINTR is retried; a
// message with more descriptors than fit (MSG_CTRUNC) closes those that
// came and returns -EMSGSIZE.
ssize_t receive_fds(int sock, void* data, size_t size, int* fds, size_t* count, int flags = 0);

}  // namespace pj::util
