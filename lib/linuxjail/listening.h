// Which TCP sockets of the jail listen, and where the host's loopback
// serves them: the supervisor asks the kernel through a NETLINK_SOCK_DIAG
// socket made in the jail's network namespace (jail_socket.h), with an
// inet_diag dump of the sockets in the LISTEN state (sock_diag(7)). The
// request is built and the kernel's reply parsed here, pure: built and
// tested without a jail. The kernel's replies are trusted, but every
// length in them is checked against the datagram that holds it, and
// anything but what was asked for is refused rather than guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "util/result.h"

namespace pj::linuxjail::listening {

// The most ports one request asks about (its filter holds 20 bytes a port).
inline constexpr size_t kMaxPorts = 32;
// The largest datagram of a reply that is read: the kernel fills a dump's
// datagrams up to the reader's buffer, at most a page or 32 KiB
// (netlink_dump()), and each socket takes about a hundred bytes.
inline constexpr size_t kMaxDatagram = 64 * 1024;

// A TCP socket in the LISTEN state: its local address and port.
struct Socket {
  net::IpAddress addr;  // v6: an AF_INET6 socket (an IPv4-mapped address stays v6 here)
  std::uint16_t port = 0;
};

// The datagram that asks for a dump of the TCP sockets of `family`
// (AF_INET or AF_INET6) in the LISTEN state whose local port is one of
// `ports` (1 to kMaxPorts of them): the filter is the kernel's own
// (INET_DIAG_REQ_BYTECODE), so however many sockets the jail has, the
// reply lists only these. `seq` is echoed in every message of the reply.
util::Result<std::string> dump_request(int family, const std::vector<std::uint16_t>& ports, std::uint32_t seq);

// What one datagram of the reply said.
struct Reply {
  std::vector<Socket> sockets;
  bool done = false;  // the dump ended (NLMSG_DONE)
};

// One datagram of the reply to dump_request(family, ..., seq), as
// received (more than kMaxDatagram bytes is refused: a reader that
// received that much was given a truncated one). Refused, each with a
// sentence: a message whose length is shorter than its header or longer
// than what is left of the datagram, a sequence number other than
// `seq`, an error (NLMSG_ERROR, with its errno), a type that is neither
// a socket (SOCK_DIAG_BY_FAMILY) nor the end, a socket shorter than
// inet_diag_msg, of another family, or not in the LISTEN state. Bytes
// after a socket's fields (its attributes) are skipped.
util::Result<Reply> parse_reply(std::string_view datagram, int family, std::uint32_t seq);

// Which of the jail's loopback families listen on a port.
struct Families {
  bool v4 = false;  // reached through the jail's 127.0.0.1
  bool v6 = false;  // reached through the jail's ::1
  bool any() const { return v4 || v6; }
  bool operator==(const Families& o) const { return v4 == o.v4 && v6 == o.v6; }
};

// What a listening socket of the jail adds to its port's families: v4
// for a socket on 127.0.0.1, 0.0.0.0 or ::ffff:127.0.0.1; v6 for one on
// ::1; both for one on ::. Nothing for any other address (the jail's
// other loopback addresses are not the host's).
Families families_of(const Socket& s);

// A host listener (127.0.0.1, or ::1 when `v6`) on `port`, whose
// connections go to `jail_addr` in the jail.
struct Served {
  bool v6 = false;
  net::IpAddress jail_addr;
  std::uint16_t port = 0;
  bool operator==(const Served& o) const { return v6 == o.v6 && jail_addr == o.jail_addr && port == o.port; }
};

// The host listeners for `port` where the jail listens on `jail`: none
// when it listens on neither family; else both, 127.0.0.1 and ::1,
// whichever family the jail listens on. A login on the host that binds
// one family then finds its port taken, instead of binding it while a
// browser that tries the other family first (`localhost` on ::1) takes
// its redirect into the jail. Each goes to the jail's address of its own
// family where the jail listens there, else to the other.
std::vector<Served> served_on_host(std::uint16_t port, Families jail);

}  // namespace pj::linuxjail::listening
