// util::send_all and util::wait_ready: a whole buffer sent on a
// non-blocking socket, each wait for room bounded by time and a stop fd.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "util/bounded_io.h"
#include "util/unique_fd.h"

using namespace pj;
using namespace std::chrono_literals;

namespace {

// A connected pair of non-blocking stream sockets.
struct Pair {
  util::UniqueFd a, b;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
    REQUIRE(util::set_nonblocking_cloexec(a.get()));
    REQUIRE(util::set_nonblocking_cloexec(b.get()));
  }
};

// Fills `fd`'s send buffer (and the peer's receive buffer) until a send would block.
void fill(int fd) {
  const std::string chunk(65536, 'x');
  while (::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

TEST_CASE("send_all sends more than the socket holds while the peer reads") {
  Pair p;
  const std::string data(4 << 20, 'd');
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    while (got.size() < data.size()) {
      if (util::wait_ready(p.b.get(), POLLIN, -1, 5000ms) != util::WaitEnd::ready) break;
      ssize_t n = ::recv(p.b.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
    }
  });
  util::SendEnd end = util::send_all(p.a.get(), data, 5000ms);
  reader.join();
  CHECK(end.sent());
  CHECK(got == data);
}

TEST_CASE("send_all gives up after its wait when the peer stops reading") {
  Pair p;
  fill(p.a.get());
  util::SendEnd end = util::send_all(p.a.get(), "more", 20ms);
  CHECK(end.how == util::SendEnd::How::timed_out);
}

TEST_CASE("send_all stops at once when the stop fd becomes readable") {
  Pair p;
  fill(p.a.get());
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  util::UniqueFd stop_r(stop[0]), stop_w(stop[1]);
  REQUIRE(::write(stop_w.get(), "x", 1) == 1);
  const auto started = std::chrono::steady_clock::now();
  util::SendEnd end = util::send_all(p.a.get(), "more", 60000ms, stop_r.get());
  CHECK(end.how == util::SendEnd::How::stopped);
  CHECK(std::chrono::steady_clock::now() - started < 30000ms);
}

TEST_CASE("send_all fails with send's errno when the peer is gone") {
  Pair p;
  p.b.reset();
  util::SendEnd end = util::send_all(p.a.get(), "to no one", 20ms);
  CHECK(end.how == util::SendEnd::How::failed);
  CHECK(end.error == EPIPE);
}

TEST_CASE("wait_ready tells ready from timed out") {
  Pair p;
  CHECK(util::wait_ready(p.a.get(), POLLIN, -1, 10ms) == util::WaitEnd::timed_out);
  REQUIRE(::send(p.b.get(), "x", 1, MSG_DONTWAIT) == 1);
  CHECK(util::wait_ready(p.a.get(), POLLIN, -1, 1000ms) == util::WaitEnd::ready);
}
