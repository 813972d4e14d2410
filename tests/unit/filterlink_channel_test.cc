// The control socket under the filter's messages, in both framings: a
// record and its descriptor arrive as one message; an oversized message,
// a record cut short and the end of the stream are told apart from a
// record. SOCK_SEQPACKET is Linux's; SOCK_STREAM is what macOS has.
#include "filterlink/channel.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
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
  explicit Pair(int type) {
    if (type == SOCK_STREAM) {
      auto p = stream_pair();
      REQUIRE(p.ok());
      a = std::move((*p)[0]);
      b = std::move((*p)[1]);
      return;
    }
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sp) == 0);
    a.reset(sp[0]);
    b.reset(sp[1]);
  }
};

std::vector<int> framings() {
#ifdef __linux__
  return {SOCK_SEQPACKET, SOCK_STREAM};
#else
  return {SOCK_STREAM};
#endif
}

const char* name(int type) { return type == SOCK_STREAM ? "SOCK_STREAM" : "SOCK_SEQPACKET"; }

util::UniqueFd dev_null() { return util::UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

}  // namespace

TEST_CASE("a listener and its socket cross the control socket as one message") {
  for (int type : framings()) {
    CAPTURE(name(type));
    Pair p(type);
    ListenerMessage m;
    m.kind = ListenerMessage::Kind::socks;
    m.fd = dev_null();
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
}

TEST_CASE("records sent back to back come apart with their own descriptors, a large one whole") {
  for (int type : framings()) {
    CAPTURE(name(type));
    Pair p(type);
    // About 32 KiB: four times macOS's default buffer for a stream.
    auto pem = [](std::string_view head) { return std::string(head) + std::string(kMaxPem - head.size(), 'A'); };
    RunCa big{pem("-----BEGIN PRIVATE KEY-----"), pem("-----BEGIN CERTIFICATE-----")};
    REQUIRE(send_message(p.a.get(), FromSupervisor(UpstreamCa{dev_null()})).ok());
    REQUIRE(send_message(p.a.get(), FromSupervisor(Stop{})).ok());
    REQUIRE(send_message(p.a.get(), FromSupervisor(TrustRoots{dev_null()})).ok());
    REQUIRE(send_message(p.a.get(), FromSupervisor(big)).ok());
    auto decode_next = [&] {
      auto got = receive_record(p.b.get(), MSG_DONTWAIT);
      REQUIRE(got.ok());
      REQUIRE(*got);
      auto m = decode_from_supervisor((*got)->bytes, std::move((*got)->fds));
      REQUIRE_MESSAGE(m.ok(), m.error().message());
      return std::move(*m);
    };
    CHECK(std::get<UpstreamCa>(decode_next()).pem.valid());
    CHECK(std::holds_alternative<Stop>(decode_next()));  // and no descriptor: decoding would refuse one
    CHECK(std::get<TrustRoots>(decode_next()).pem.valid());
    CHECK(std::get<RunCa>(decode_next()).cert_pem == big.cert_pem);
    auto none = receive_record(p.b.get(), MSG_DONTWAIT);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().err() == EAGAIN);
  }
}

TEST_CASE("a control message longer than a record is refused, and the end of the stream is no record") {
  for (int type : framings()) {
    CAPTURE(name(type));
    Pair p(type);
    // A header whose length says more than a record holds (a stream
    // reads no further than the header to know).
    std::string big(kMaxRecord + 100, 'x');
    big[8] = big[9] = big[10] = static_cast<char>(0xff), big[11] = 0;
    REQUIRE(::send(p.a.get(), big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
    auto got = receive_record(p.b.get());
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().message() == "a control message of more than 65536 bytes");
    if (type == SOCK_STREAM) continue;  // the rest of that stream is no record
    p.a.reset();
    auto end = receive_record(p.b.get());
    REQUIRE(end.ok());
    CHECK_FALSE(*end);
  }
  Pair s(SOCK_STREAM);
  s.a.reset();
  auto end = receive_record(s.b.get());
  REQUIRE(end.ok());
  CHECK_FALSE(*end);
}

TEST_CASE("on a stream, a record cut short is an error: its peer ended, or sent no more within the guard") {
  auto rec = encode(FromSupervisor(RuleMessage{RuleMessage::Kind::deny, "example.com", "test"}));
  REQUIRE(rec.ok());
  {
    Pair p(SOCK_STREAM);
    REQUIRE(::send(p.a.get(), rec->bytes.data(), rec->bytes.size() - 3, 0) > 0);
    p.a.reset();
    auto got = receive_record(p.b.get());
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().message() == "the network filter's control socket ended within a record");
  }
  Pair p(SOCK_STREAM);
  REQUIRE(::send(p.a.get(), rec->bytes.data(), 5, 0) == 5);  // not even the whole header
  const auto start = std::chrono::steady_clock::now();
  auto got = receive_record(p.b.get(), MSG_DONTWAIT);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message().find("sent part of a record and no more for 2000 ms") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start >= kRestGuard);
}

TEST_CASE("sending to a filter that is gone is an error, not SIGPIPE") {
  for (int type : framings()) {
    CAPTURE(name(type));
    Pair p(type);
    p.b.reset();
    auto st = send_message(p.a.get(), FromSupervisor(Stop{}));
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().err() == EPIPE);
  }
}
