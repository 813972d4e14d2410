// The control socket under the filter's messages: a record and its
// descriptor arrive as one message; an oversized message and the end of
// the stream are told apart from a record.
#include "filterlink/channel.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <type_traits>

using namespace pj;
using namespace pj::filterlink;

// A received record's bytes (the run CA's key, a credential's value) are
// wiped with their buffer (util/secret.h; secret_test.cc).
static_assert(std::is_same_v<decltype(Received::bytes), util::SecretString>);

namespace {

struct Pair {
  util::UniqueFd a, b;
  Pair() {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    a.reset(sp[0]);
    b.reset(sp[1]);
  }
};

}  // namespace

TEST_CASE("a listener and its socket cross the control socket as one message") {
  Pair p;
  ListenerMessage m;
  m.kind = ListenerMessage::Kind::socks;
  m.fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(send_message(p.a.get(), FromSupervisor(std::move(m))).ok());
  auto got = receive_record(p.b.get());
  REQUIRE(got.ok());
  REQUIRE(*got);
  REQUIRE((*got)->fds.size() == 1);
  CHECK((::fcntl((*got)->fds[0].get(), F_GETFD) & FD_CLOEXEC) != 0);
  auto decoded = decode_from_supervisor((*got)->bytes, std::move((*got)->fds));
  REQUIRE(decoded.ok());
  CHECK(std::get<ListenerMessage>(*decoded).kind == ListenerMessage::Kind::socks);
  CHECK(std::get<ListenerMessage>(*decoded).fd.valid());
}

TEST_CASE("a control message longer than a record is refused, and the end of the stream is no record") {
  Pair p;
  std::string big(kMaxRecord + 100, 'x');
  REQUIRE(::send(p.a.get(), big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
  auto got = receive_record(p.b.get());
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message() == "a control message of more than 65536 bytes");
  p.a.reset();
  auto end = receive_record(p.b.get());
  REQUIRE(end.ok());
  CHECK_FALSE(*end);
}

TEST_CASE("sending to a filter that is gone is an error, not SIGPIPE") {
  Pair p;
  p.b.reset();
  auto st = send_message(p.a.get(), FromSupervisor(Stop{}));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().err() == EPIPE);
}
