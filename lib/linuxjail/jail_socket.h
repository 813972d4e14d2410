// Sockets of a running jail's network namespace, for the supervisor: a
// TCP socket for each connection of a published port (pi-jail
// --publish), so that the host connects to a server inside the jail
// with nothing added to the jail's view and nothing bound by the jail
// for it; and the NETLINK_SOCK_DIAG socket that asks which of the
// jail's sockets listen (listening.h).
#pragma once

namespace pj::linuxjail {

// A socket socket(2) makes with `domain`, `type` and `protocol` in the
// network namespace of the jail whose init is `pidfd`; -errno on
// failure. A short-lived child of the caller enters the jail's user and
// network namespaces (setns(2) on the pidfd: the user namespace's owner
// has CAP_SYS_ADMIN in it and so may enter its network namespace), makes
// the socket, sends it back over SCM_RIGHTS and exits: no process of the
// host stays in the jail's namespaces, and the jail's processes (in their
// own PID namespace) cannot see or signal it while it lives. A socket
// keeps the namespace it was made in for its whole life (socket(7)),
// whatever the process holding it. The child only makes
// async-signal-safe calls, so the caller may have threads. Blocks for
// the child's short life (a fork, two setns, a socket).
int jail_socket(int pidfd, int domain, int type, int protocol);

// An unconnected, non-blocking, close-on-exec TCP socket of `family`
// (AF_INET, AF_INET6) in the jail's network namespace: a published
// port's connection into the jail.
int jail_tcp_socket(int pidfd, int family);

}  // namespace pj::linuxjail
