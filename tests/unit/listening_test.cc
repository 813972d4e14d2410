// Which of the jail's sockets listen (linuxjail/listening.h): the dump
// request's port filter, run here as the kernel runs it and once by the
// kernel itself against a listener of this process; the reply parsed
// strictly (truncated, oversized, another family, state or request, an
// error); and where the host serves each listening address.
#include "linuxjail/listening.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "util/unique_fd.h"

using namespace pj;
using namespace pj::linuxjail::listening;

namespace {

template <typename T>
void append(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// One message of a reply: a header and `payload`, padded to 4 bytes.
std::string message(std::uint16_t type, std::string_view payload, std::uint32_t seq = 7) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(sizeof h + payload.size());
  h.nlmsg_type = type;
  h.nlmsg_flags = NLM_F_MULTI;
  h.nlmsg_seq = seq;
  std::string out;
  append(out, h);
  out += payload;
  out.resize(NLMSG_ALIGN(out.size()), '\0');
  return out;
}

// A socket's message as the kernel sends it: inet_diag_msg, then an
// attribute (INET_DIAG_SHUTDOWN), which the parser skips.
std::string socket_message(int family, const char* addr, std::uint16_t port, std::uint8_t state = TCP_LISTEN,
                           std::uint32_t seq = 7) {
  inet_diag_msg m{};
  m.idiag_family = static_cast<std::uint8_t>(family);
  m.idiag_state = state;
  m.id.idiag_sport = htons(port);
  REQUIRE(::inet_pton(family, addr, m.id.idiag_src) == 1);
  std::string payload;
  append(payload, m);
  nlattr a{5, INET_DIAG_SHUTDOWN};
  append(payload, a);
  payload += std::string(4, '\0');
  return message(SOCK_DIAG_BY_FAMILY, payload, seq);
}

std::string done(int status = 0) {
  std::string p;
  append(p, status);
  return message(NLMSG_DONE, p);
}

std::string refusal(std::string_view datagram, int family = AF_INET) {
  auto r = parse_reply(datagram, family, 7);
  REQUIRE_FALSE(r.ok());
  return r.error().message();
}

// inet_diag_bc_run() of net/ipv4/inet_diag.c for a local port: whether
// the filter accepts a socket on `port`. Also walks it as
// inet_diag_bc_audit() does: every jump lands on an operation or just
// past the end.
bool kernel_accepts(const std::string& bc, std::uint16_t port) {
  int len = static_cast<int>(bc.size());
  size_t at = 0;
  while (len > 0) {
    REQUIRE(at + sizeof(inet_diag_bc_op) <= bc.size());
    inet_diag_bc_op op;
    std::memcpy(&op, bc.data() + at, sizeof op);
    bool yes = true;
    if (op.code == INET_DIAG_BC_JMP) {
      yes = false;
    } else {
      inet_diag_bc_op operand;
      std::memcpy(&operand, bc.data() + at + sizeof op, sizeof operand);
      REQUIRE((op.code == INET_DIAG_BC_S_GE || op.code == INET_DIAG_BC_S_LE));
      yes = op.code == INET_DIAG_BC_S_GE ? port >= operand.no : port <= operand.no;
    }
    const int jump = yes ? op.yes : op.no;
    REQUIRE(jump % 4 == 0);
    REQUIRE(jump <= len + 4);
    len -= jump;
    at += static_cast<size_t>(jump);
  }
  return len == 0;
}

std::string filter_of(const std::string& request) {
  // header, inet_diag_req_v2, then the bytecode attribute
  const size_t at = sizeof(nlmsghdr) + sizeof(inet_diag_req_v2);
  REQUIRE(request.size() > at + sizeof(nlattr));
  nlattr a;
  std::memcpy(&a, request.data() + at, sizeof a);
  CHECK(a.nla_type == INET_DIAG_REQ_BYTECODE);
  CHECK(a.nla_len == request.size() - at);
  return request.substr(at + sizeof a);
}

net::IpAddress ip(const char* text) { return *net::parse_ip(text); }

}  // namespace

TEST_CASE("a listening-socket dump asks the kernel for the LISTEN state of one family, filtered to its ports") {
  auto req = dump_request(AF_INET6, {53692, 1455}, 42);
  REQUIRE(req.ok());
  nlmsghdr h;
  std::memcpy(&h, req->data(), sizeof h);
  CHECK(h.nlmsg_len == req->size());
  CHECK(h.nlmsg_type == SOCK_DIAG_BY_FAMILY);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_DUMP));
  CHECK(h.nlmsg_seq == 42);
  inet_diag_req_v2 r;
  std::memcpy(&r, req->data() + sizeof h, sizeof r);
  CHECK(r.sdiag_family == AF_INET6);
  CHECK(r.sdiag_protocol == IPPROTO_TCP);
  CHECK(r.idiag_states == 1U << TCP_LISTEN);

  const std::string bc = filter_of(*req);
  for (std::uint16_t port : std::vector<std::uint16_t>{53692, 1455}) CHECK(kernel_accepts(bc, port));
  for (std::uint16_t port : std::vector<std::uint16_t>{1, 1454, 1456, 53691, 53693, 65535})
    CHECK_FALSE(kernel_accepts(bc, port));
  // One port, and the most a request holds.
  std::vector<std::uint16_t> many;
  for (std::uint16_t p = 1000; many.size() < kMaxPorts; p += 3) many.push_back(p);
  auto most = dump_request(AF_INET, many, 1);
  REQUIRE(most.ok());
  for (std::uint16_t p = 995; p < 1000 + 3 * kMaxPorts + 5; ++p)
    CHECK(kernel_accepts(filter_of(*most), p) == (p >= 1000 && p < 1000 + 3 * kMaxPorts && (p - 1000) % 3 == 0));
  CHECK(kernel_accepts(filter_of(*dump_request(AF_INET, {1455}, 1)), 1455));

  CHECK_FALSE(dump_request(AF_INET, {}, 1).ok());
  many.push_back(9);
  CHECK_FALSE(dump_request(AF_INET, many, 1).ok());
  CHECK_FALSE(dump_request(AF_UNIX, {1455}, 1).ok());
}

TEST_CASE("the kernel takes the dump request and lists a listener of this process on an asked port only") {
  util::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(listener.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener.get(), 1) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::uint16_t port = ntohs(a.sin_port);

  util::UniqueFd diag(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  REQUIRE(diag.valid());
  auto dump = [&](std::vector<std::uint16_t> ports, std::uint32_t seq) {
    auto req = dump_request(AF_INET, ports, seq);
    REQUIRE(req.ok());
    REQUIRE(::send(diag.get(), req->data(), req->size(), 0) == static_cast<ssize_t>(req->size()));
    std::vector<Socket> found;
    std::string buf(kMaxDatagram, '\0');
    for (bool ended = false; !ended;) {
      ssize_t n = ::recv(diag.get(), buf.data(), buf.size(), 0);
      REQUIRE(n > 0);
      auto r = parse_reply(std::string_view(buf.data(), static_cast<size_t>(n)), AF_INET, seq);
      REQUIRE_MESSAGE(r.ok(), r.error().message());
      found.insert(found.end(), r->sockets.begin(), r->sockets.end());
      ended = r->done;
    }
    return found;
  };
  auto found = dump({static_cast<std::uint16_t>(port == 1 ? 2 : port - 1), port}, 1);
  REQUIRE(found.size() == 1);
  CHECK(found[0].port == port);
  CHECK(found[0].addr == ip("127.0.0.1"));
  CHECK(dump({static_cast<std::uint16_t>(port == 65535 ? 65534 : port + 1)}, 2).empty());
}

TEST_CASE("a reply's sockets and its end are read; its attributes skipped") {
  auto r = parse_reply(socket_message(AF_INET, "127.0.0.1", 53692) + socket_message(AF_INET, "0.0.0.0", 1455) + done(),
                       AF_INET, 7);
  REQUIRE(r.ok());
  CHECK(r->done);
  REQUIRE(r->sockets.size() == 2);
  CHECK(r->sockets[0].addr == ip("127.0.0.1"));
  CHECK(r->sockets[0].port == 53692);
  CHECK(r->sockets[1].port == 1455);
  auto six = parse_reply(socket_message(AF_INET6, "::1", 1455), AF_INET6, 7);
  REQUIRE(six.ok());
  CHECK_FALSE(six->done);
  REQUIRE(six->sockets.size() == 1);
  CHECK(six->sockets[0].addr == ip("::1"));
  CHECK(parse_reply("", AF_INET, 7).ok());
}

TEST_CASE("a truncated reply is refused at every cut inside a message, never read past its end") {
  const std::string good = socket_message(AF_INET, "127.0.0.1", 53692) + done();
  const size_t first = socket_message(AF_INET, "127.0.0.1", 53692).size();
  for (size_t cut = 1; cut < good.size(); ++cut) {
    CAPTURE(cut);
    auto r = parse_reply(std::string_view(good).substr(0, cut), AF_INET, 7);
    CHECK(r.ok() == (cut == first));  // only the cut between the two messages is whole
  }
  CHECK(refusal(good.substr(0, 10)).find("shorter than a message header") != std::string::npos);
  CHECK(refusal(good.substr(0, 40)).find("a message of") != std::string::npos);
  // A socket message too short for inet_diag_msg.
  CHECK(refusal(message(SOCK_DIAG_BY_FAMILY, std::string(20, '\0'))).find("shorter than inet_diag_msg") !=
        std::string::npos);
}

TEST_CASE("an oversized reply is refused: a length past the datagram, a datagram past what is read") {
  std::string bad = socket_message(AF_INET, "127.0.0.1", 53692);
  std::uint32_t huge = 0x7fffffff;
  std::memcpy(bad.data(), &huge, sizeof huge);
  CHECK(refusal(bad).find("a message of 2147483647 bytes") != std::string::npos);
  std::uint32_t tiny = 8;
  std::memcpy(bad.data(), &tiny, sizeof tiny);
  CHECK(refusal(bad).find("a message of 8 bytes") != std::string::npos);
  std::string many;
  while (many.size() <= kMaxDatagram) many += socket_message(AF_INET, "127.0.0.1", 53692);
  CHECK(refusal(many).find("more than the 65536 read") != std::string::npos);
}

TEST_CASE("a reply of another family, state, request or type, an error, or bytes after the end are refused") {
  CHECK(refusal(socket_message(AF_INET6, "::1", 1455)).find("a socket of family 10") != std::string::npos);
  CHECK(refusal(socket_message(AF_INET, "127.0.0.1", 1455), AF_INET6).find("a socket of family 2") !=
        std::string::npos);
  CHECK(refusal(socket_message(AF_INET, "127.0.0.1", 1455, TCP_ESTABLISHED)).find("TCP state 1") != std::string::npos);
  CHECK(refusal(socket_message(AF_INET, "127.0.0.1", 1455, TCP_LISTEN, 8)).find("request 8, not 7") !=
        std::string::npos);
  CHECK(refusal(message(16, std::string(16, '\0'))).find("a message of type 16") != std::string::npos);  // RTM_NEWLINK
  CHECK(refusal(done() + socket_message(AF_INET, "127.0.0.1", 1455)).find("after the end") != std::string::npos);
  nlmsgerr e{};
  e.error = -EINVAL;
  std::string p;
  append(p, e);
  auto err = parse_reply(message(NLMSG_ERROR, p), AF_INET, 7);
  REQUIRE_FALSE(err.ok());
  CHECK(err.error().err() == EINVAL);
  auto failed_dump = parse_reply(done(-ENOBUFS), AF_INET, 7);
  REQUIRE_FALSE(failed_dump.ok());
  CHECK(failed_dump.error().err() == ENOBUFS);
}

TEST_CASE("a socket on the jail's IPv4 loopback or wildcard counts as IPv4, on ::1 as IPv6, on :: as both") {
  auto families = [](const char* addr) { return families_of({ip(addr), 53692}); };
  CHECK(families("127.0.0.1") == Families{true, false});
  CHECK(families("0.0.0.0") == Families{true, false});
  CHECK(families("::1") == Families{false, true});
  CHECK(families("::") == Families{true, true});
  net::IpAddress mapped;
  mapped.v6 = true;
  REQUIRE(::inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.v6addr) == 1);
  CHECK(families_of({mapped, 53692}) == Families{true, false});
  CHECK_FALSE(families("127.0.0.2").any());
  CHECK_FALSE(families("10.0.0.1").any());
  CHECK_FALSE(families("fe80::1").any());
}

TEST_CASE("the host serves both 127.0.0.1 and ::1 for a port the jail listens on with either family, or neither") {
  const auto v4 = ip("127.0.0.1"), v6 = ip("::1");
  // Each host family to the jail's own where it listens there.
  CHECK(served_on_host(53692, {true, true}) == std::vector<Served>{{false, v4, 53692}, {true, v6, 53692}});
  // A jail on one family only: both host families go to it, so that a
  // login on the host cannot bind the other and lose its redirect.
  CHECK(served_on_host(53692, {false, true}) == std::vector<Served>{{false, v6, 53692}, {true, v6, 53692}});
  CHECK(served_on_host(1455, {true, false}) == std::vector<Served>{{false, v4, 1455}, {true, v4, 1455}});
  CHECK(served_on_host(1455, {}).empty());
}
