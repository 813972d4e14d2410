#include "linuxjail/listening.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace pj::linuxjail::listening {

namespace {

using util::Error;

constexpr size_t kHeader = NLMSG_ALIGN(sizeof(nlmsghdr));

// Kernel structures are copied out of the datagram, never cast in place:
// a datagram's bytes have no alignment the compiler may rely on.
template <typename T>
T read_at(std::string_view bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

template <typename T>
void append(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The kernel's filter for "the local port is one of `ports`"
// (net/ipv4/inet_diag.c, inet_diag_bc_run()): the program runs from the
// start; each operation jumps `yes` bytes when it holds, `no` when not;
// ending exactly at the end accepts the socket, jumping 4 past it
// refuses it. One block a port: local port >= P, local port <= P, then
// a jump to the end (accepted); a failed comparison jumps to the next
// block, or from the last one past the end. inet_diag_bc_audit() checks
// every jump of it before the dump starts.
std::string port_filter(const std::vector<std::uint16_t>& ports) {
  constexpr unsigned kBlock = 20;  // two comparisons of 8 bytes, a jump of 4
  const unsigned total = static_cast<unsigned>(ports.size()) * kBlock;
  std::string bc;
  for (size_t i = 0; i < ports.size(); ++i) {
    const unsigned start = static_cast<unsigned>(i) * kBlock;
    const bool last = i + 1 == ports.size();
    auto op = [&](unsigned char code, unsigned char yes, unsigned no) {
      append(bc, inet_diag_bc_op{code, yes, static_cast<unsigned short>(no)});
    };
    op(INET_DIAG_BC_S_GE, 8, last ? kBlock + 4 : kBlock);
    op(0, 0, ports[i]);  // the comparison's operand
    op(INET_DIAG_BC_S_LE, 8, last ? 12 + 4 : 12);
    op(0, 0, ports[i]);
    op(INET_DIAG_BC_JMP, 4, total - (start + 16));
  }
  return bc;
}

net::IpAddress address_of(int family, const std::uint32_t (&words)[4]) {
  net::IpAddress a;
  if (family == AF_INET) {
    std::memcpy(&a.v4addr, &words[0], sizeof a.v4addr);
    return a;
  }
  a.v6 = true;
  std::memcpy(&a.v6addr, words, sizeof a.v6addr);
  return a;
}

const char* family_name(int family) { return family == AF_INET6 ? "IPv6" : "IPv4"; }

}  // namespace

util::Result<std::string> dump_request(int family, const std::vector<std::uint16_t>& ports, std::uint32_t seq) {
  if (family != AF_INET && family != AF_INET6) return Error::invalid("a listening-socket dump of a family not IP");
  if (ports.empty() || ports.size() > kMaxPorts)
    return Error::invalid(fmt::format("a listening-socket dump for {} ports (1 to {})", ports.size(), kMaxPorts));
  const std::string bc = port_filter(ports);
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<std::uint8_t>(family);
  req.sdiag_protocol = IPPROTO_TCP;
  req.idiag_states = 1U << TCP_LISTEN;
  req.id.idiag_cookie[0] = req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  nlattr attr{};
  attr.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + bc.size());
  attr.nla_type = INET_DIAG_REQ_BYTECODE;
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(kHeader + NLMSG_ALIGN(sizeof req) + NLA_ALIGN(attr.nla_len));
  h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  h.nlmsg_seq = seq;
  std::string out;
  append(out, h);
  append(out, req);
  append(out, attr);
  out += bc;  // a multiple of 4: no padding
  return out;
}

util::Result<Reply> parse_reply(std::string_view datagram, int family, std::uint32_t seq) {
  auto refuse = [&](std::string why) {
    return Error::invalid(fmt::format("the kernel's list of listening {} sockets: {}", family_name(family), why));
  };
  if (datagram.size() > kMaxDatagram)
    return refuse(fmt::format("a datagram of {} bytes, more than the {} read", datagram.size(), kMaxDatagram));
  Reply r;
  size_t at = 0;
  while (at < datagram.size()) {
    const size_t left = datagram.size() - at;
    if (r.done) return refuse(fmt::format("{} bytes after the end of the dump", left));
    if (left < kHeader) return refuse(fmt::format("{} bytes, shorter than a message header", left));
    const auto h = read_at<nlmsghdr>(datagram, at);
    if (h.nlmsg_len < kHeader || h.nlmsg_len > left)
      return refuse(fmt::format("a message of {} bytes where {} are left", h.nlmsg_len, left));
    if (h.nlmsg_seq != seq) return refuse(fmt::format("a message of request {}, not {}", h.nlmsg_seq, seq));
    const std::string_view payload = datagram.substr(at + kHeader, h.nlmsg_len - kHeader);
    if (h.nlmsg_type == NLMSG_ERROR) {
      if (payload.size() < sizeof(int)) return refuse("an error message without its error");
      const int err = -read_at<int>(payload, 0);
      return Error::from_errno(fmt::format("the kernel's list of listening {} sockets", family_name(family)),
                               err > 0 ? err : EPROTO);
    }
    if (h.nlmsg_type == NLMSG_DONE) {
      // Since Linux 4.x the end carries the dump's own status.
      if (payload.size() >= sizeof(int) && read_at<int>(payload, 0) < 0)
        return Error::from_errno(fmt::format("the kernel's list of listening {} sockets", family_name(family)),
                                 -read_at<int>(payload, 0));
      r.done = true;
    } else if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      if (payload.size() < sizeof(inet_diag_msg))
        return refuse(fmt::format("a socket of {} bytes, shorter than inet_diag_msg", payload.size()));
      const auto m = read_at<inet_diag_msg>(payload, 0);
      if (m.idiag_family != family) return refuse(fmt::format("a socket of family {}", m.idiag_family));
      if (m.idiag_state != TCP_LISTEN) return refuse(fmt::format("a socket in TCP state {}", m.idiag_state));
      r.sockets.push_back({address_of(family, m.id.idiag_src), ntohs(m.id.idiag_sport)});
    } else {
      return refuse(fmt::format("a message of type {}", h.nlmsg_type));
    }
    // The next message starts aligned; the last one's padding may be cut.
    at += std::min<size_t>(NLMSG_ALIGN(h.nlmsg_len), left);
  }
  return r;
}

Families families_of(const Socket& s) {
  if (!s.addr.v6) {
    const std::uint32_t a = ntohl(s.addr.v4addr.s_addr);
    return {a == INADDR_LOOPBACK || a == INADDR_ANY, false};
  }
  if (IN6_IS_ADDR_LOOPBACK(&s.addr.v6addr)) return {false, true};
  if (IN6_IS_ADDR_UNSPECIFIED(&s.addr.v6addr)) return {true, true};
  if (IN6_IS_ADDR_V4MAPPED(&s.addr.v6addr)) {
    std::uint32_t a;
    std::memcpy(&a, &s.addr.v6addr.s6_addr[12], sizeof a);
    if (ntohl(a) == INADDR_LOOPBACK) return {true, false};
  }
  return {};
}

std::vector<Served> served_on_host(std::uint16_t port, Families jail) {
  if (!jail.any()) return {};
  const auto v4_loopback = *net::parse_ip("127.0.0.1");
  const auto v6_loopback = *net::parse_ip("::1");
  return {{false, jail.v4 ? v4_loopback : v6_loopback, port}, {true, jail.v6 ? v6_loopback : v4_loopback, port}};
}

}  // namespace pj::linuxjail::listening
