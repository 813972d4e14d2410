// Sockets of a running jail's network namespace, for the supervisor's
// published ports (pi-jail --publish): the host connects to a server
// inside the jail through a socket made in that namespace, so nothing is
// added to the jail's view and the jail binds nothing for it.
#pragma once

namespace pj::linuxjail {

// An unconnected, non-blocking TCP socket of `family` (AF_INET, AF_INET6)
// in the network namespace of the jail whose init is `pidfd`; -errno on
// failure. A short-lived child of the caller enters the jail's user and
// network namespaces (setns(2) on the pidfd: the user namespace's owner
// has CAP_SYS_ADMIN in it and so may enter its network namespace), makes
// the socket, sends it back over SCM_RIGHTS and exits: no process of the
// host stays in the jail's namespaces, and the jail's processes (in their
// own PID namespace) cannot see or signal it while it lives. The child
// only makes async-signal-safe calls, so the caller may have threads.
// Blocks for the child's short life (a fork, two setns, a socket).
int jail_socket(int pidfd, int family);

}  // namespace pj::linuxjail
