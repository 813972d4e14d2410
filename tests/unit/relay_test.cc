// The Linux relay (lib/netproxy/relay_splice.cc): one direction of a
// relayed connection, splice(2) through a pipe, on socket pairs.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "netproxy/relay.h"

using namespace pj;

namespace {

// A connected pair of non-blocking stream sockets.
struct Pair {
  util::UniqueFd a, b;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
    int big = 4 << 20;
    for (int fd : fds) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    }
  }
};

void send_all(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    at += static_cast<size_t>(n);
  }
}

std::string receive_available(int fd) {
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string pattern(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

}  // namespace

TEST_CASE("relay: a pump moves at most its slice, however large the pipe, and every byte in order") {
  Pair from, to;  // from.b -> (flow) -> to.a
  const std::string sent = pattern(300 * 1024);
  send_all(from.a.get(), sent);
  netproxy::Flow f;
  f.src = from.b.get();
  f.dst = to.a.get();
  REQUIRE(f.prepare());
  constexpr size_t kSlice = 100'000;  // not a multiple of any pipe size
  f.pump(kSlice);
  CHECK(f.bytes == kSlice);  // the last read asked for what the slice had left
  CHECK(f.want_in);          // the rest waits for the next turn
  std::string got = receive_available(to.b.get());
  while (got.size() < sent.size()) {
    f.pump(kSlice);
    REQUIRE(f.moved);
    got += receive_available(to.b.get());
  }
  CHECK(got == sent);
}

TEST_CASE("relay: a read that fills the pipe grows it for bulk; a trickle keeps the default size") {
  Pair from, to;
  netproxy::Flow trickle;
  trickle.src = from.b.get();
  trickle.dst = to.a.get();
  REQUIRE(trickle.prepare());
  send_all(from.a.get(), std::string(1000, 'x'));
  trickle.pump(256 * 1024);
  CHECK(trickle.bytes == 1000);
  CHECK(::fcntl(trickle.pipe_w.get(), F_GETPIPE_SZ) == static_cast<int>(netproxy::kPipeSize));

  Pair src2, dst2;
  netproxy::Flow bulk;
  bulk.src = src2.b.get();
  bulk.dst = dst2.a.get();
  REQUIRE(bulk.prepare());
  send_all(src2.a.get(), pattern(1 << 20));
  bulk.pump(256 * 1024);
  CHECK(bulk.pipe_size == netproxy::kBulkPipeSize);
  CHECK(::fcntl(bulk.pipe_w.get(), F_GETPIPE_SZ) == static_cast<int>(netproxy::kBulkPipeSize));
  CHECK(receive_available(dst2.b.get()).size() == 256 * 1024);
}
