// The Linux relay (lib/netproxy/relay_splice.cc): one direction of a
// relayed connection, splice(2) through a pipe, on socket pairs.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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
  }
};

// Sends from `bytes` at `at` what the socket takes now (its buffer is
// net.core.wmem_default-sized: 208 KiB on a stock host).
void send_some(int fd, const std::string& bytes, size_t& at) {
  while (at < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) return;
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

// Whether the kernel grants this user a pipe of kBulkPipeSize now (past
// pipe-user-pages-soft it does not, for an unprivileged user).
bool bulk_pipes_granted() {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  const bool granted = ::fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(netproxy::kBulkPipeSize)) > 0;
  ::close(p[0]);
  ::close(p[1]);
  return granted;
}

}  // namespace

TEST_CASE("relay: a pump moves at most its slice, however large the pipe, and every byte in order") {
  Pair from, to;  // from.a -> from.b -> (flow) -> to.a -> to.b
  const std::string sent = pattern(600 * 1024);
  size_t at = 0;
  send_some(from.a.get(), sent, at);
  constexpr size_t kSlice = 100'000;  // not a multiple of any pipe size
  REQUIRE(at > kSlice);
  netproxy::Flow f;
  f.src = from.b.get();
  f.dst = to.a.get();
  REQUIRE(f.prepare());
  f.pump(kSlice);
  CHECK(f.bytes == kSlice);  // the last read asked for what the slice had left
  CHECK(f.want_in);          // the rest waits for the next turn
  std::string got = receive_available(to.b.get());
  while (got.size() < sent.size()) {
    send_some(from.a.get(), sent, at);
    f.pump(kSlice);
    REQUIRE(f.moved);
    got += receive_available(to.b.get());
  }
  CHECK(got == sent);
}

TEST_CASE("relay: a turn that needs a second read grows the pipe for bulk; a trickle keeps the default size") {
  Pair from, to;
  netproxy::Flow trickle;
  trickle.src = from.b.get();
  trickle.dst = to.a.get();
  REQUIRE(trickle.prepare());
  const std::string little(1000, 'x');
  size_t at = 0;
  send_some(from.a.get(), little, at);
  trickle.pump(256 * 1024);
  CHECK(trickle.bytes == 1000);
  CHECK(trickle.pipe_size == netproxy::kPipeSize);
  CHECK(::fcntl(trickle.pipe_w.get(), F_GETPIPE_SZ) == static_cast<int>(netproxy::kPipeSize));

  if (!bulk_pipes_granted()) {
    MESSAGE("this user's pipe budget (pipe-user-pages-soft) is spent: growth not checked");
    return;
  }
  Pair src2, dst2;
  netproxy::Flow bulk;
  bulk.src = src2.b.get();
  bulk.dst = dst2.a.get();
  REQUIRE(bulk.prepare());
  const std::string lots = pattern(1 << 20);
  size_t sent = 0;
  send_some(src2.a.get(), lots, sent);
  REQUIRE(sent > 2 * netproxy::kPipeSize);
  bulk.pump(256 * 1024);
  CHECK(bulk.pipe_size == netproxy::kBulkPipeSize);
  CHECK(::fcntl(bulk.pipe_w.get(), F_GETPIPE_SZ) == static_cast<int>(netproxy::kBulkPipeSize));
  CHECK(receive_available(dst2.b.get()).size() == std::min<size_t>(sent, 256 * 1024));
}

TEST_CASE("relay: at most kMaxBulkPipes flows hold a bulk pipe at once, and a closed flow gives its back") {
  if (!bulk_pipes_granted()) {
    MESSAGE("this user's pipe budget (pipe-user-pages-soft) is spent: not checked");
    return;
  }
  // Each flow relays two pipes' worth in one turn: a bulk transfer.
  auto bulk_flow = [](Pair& from, Pair& to) {
    auto f = std::make_unique<netproxy::Flow>();
    f->src = from.b.get();
    f->dst = to.a.get();
    REQUIRE(f->prepare());
    const std::string lots = pattern(3 * netproxy::kPipeSize);
    size_t at = 0;
    send_some(from.a.get(), lots, at);
    f->pump(256 * 1024);
    receive_available(to.b.get());
    return f;
  };
  constexpr int kMore = 4;
  std::vector<Pair> ins(netproxy::kMaxBulkPipes + kMore), outs(netproxy::kMaxBulkPipes + kMore);
  std::vector<std::unique_ptr<netproxy::Flow>> flows;
  for (size_t i = 0; i < ins.size(); ++i) flows.push_back(bulk_flow(ins[i], outs[i]));
  int grown = 0;
  for (const auto& f : flows) grown += f->pipe_size == netproxy::kBulkPipeSize;
  CHECK(grown == netproxy::kMaxBulkPipes);
  CHECK(flows.back()->pipe_size == netproxy::kPipeSize);
  flows.front().reset();  // gives its pipe back
  Pair in2, out2;
  auto again = bulk_flow(in2, out2);
  CHECK(again->pipe_size == netproxy::kBulkPipeSize);
}

TEST_CASE("relay: a pipe size the kernel refuses is asked for again at half, and what was granted is used") {
  // Past /proc/sys/fs/pipe-max-size only CAP_SYS_RESOURCE gets a pipe
  // (fcntl(2)); the locked-down filter never has it.
  std::ifstream in("/proc/sys/fs/pipe-max-size");
  size_t max = 0;
  in >> max;
  REQUIRE(!in.fail());
  REQUIRE(max > netproxy::kPipeSize);
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  util::UniqueFd r(p[0]), w(p[1]);
  const bool privileged = ::fcntl(w.get(), F_SETPIPE_SZ, static_cast<int>(2 * max)) > 0;
  REQUIRE(::fcntl(w.get(), F_SETPIPE_SZ, static_cast<int>(netproxy::kPipeSize)) > 0);  // back to the default
  const size_t got = netproxy::grow_pipe(w.get(), 2 * max, netproxy::kPipeSize);
  if (privileged) {
    MESSAGE("this process may exceed pipe-max-size (CAP_SYS_RESOURCE): the fallback is checked without it only");
    CHECK(got == 2 * max);
  } else {
    CHECK(got == max);
  }
  CHECK(::fcntl(w.get(), F_GETPIPE_SZ) == static_cast<int>(got));
}
