#include "util/fd_passing.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

using namespace pj::util;

namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    a = sp[0];
    b = sp[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += ::fcntl(fd, F_GETFD) != -1;
  return n;
}

}  // namespace

TEST_CASE("fd passing: descriptors and their tag arrive, close-on-exec, as the one message sent") {
  Pair p;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  char tag = 'L';
  REQUIRE(send_fds(p.a, &tag, 1, pipe_fds, 2) == 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  char got = 0;
  int fds[kMaxPassedFds];
  size_t count = 0;
  CHECK(receive_fds(p.b, &got, 1, fds, &count) == 1);
  CHECK(got == 'L');
  REQUIRE(count == 2);
  CHECK((::fcntl(fds[0], F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(::write(fds[1], "x", 1) == 1);
  char c = 0;
  CHECK(::read(fds[0], &c, 1) == 1);
  CHECK(c == 'x');
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("fd passing: too many descriptors to send is E2BIG; the peer's end of stream is 0") {
  Pair p;
  std::vector<int> many(kMaxPassedFds + 1, 0);
  char tag = 't';
  CHECK(send_fds(p.a, &tag, 1, many.data(), many.size()) == -E2BIG);
  ::close(p.a);
  p.a = -1;
  int fds[kMaxPassedFds];
  size_t count = 7;
  CHECK(receive_fds(p.b, &tag, 1, fds, &count) == 0);
  CHECK(count == 0);
}

TEST_CASE("fd passing: a message with more descriptors than fit is refused and leaks none") {
  Pair p;
  const size_t sent = kMaxPassedFds + 16;
  std::vector<int> fds(sent, 0);  // stdin, sent many times over
  char tag = 'x';
  iovec iov{&tag, 1};
  std::vector<char> cbuf(CMSG_SPACE(sizeof(int) * sent));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf.data();
  msg.msg_controllen = cbuf.size();
  cmsghdr* h = CMSG_FIRSTHDR(&msg);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int) * sent);
  std::memcpy(CMSG_DATA(h), fds.data(), sizeof(int) * sent);
  REQUIRE(::sendmsg(p.a, &msg, 0) == 1);
  const int before = open_fds();
  int got[kMaxPassedFds];
  size_t count = 0;
  CHECK(receive_fds(p.b, &tag, 1, got, &count) == -EMSGSIZE);
  CHECK(count == 0);
  CHECK(open_fds() == before);
}
