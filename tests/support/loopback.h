// TCP on 127.0.0.1 for the network filter's loop tests: a listening
// socket on a free port, a client with a receive guard, and a server
// whose thread hands each connection it accepts to the test.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <utility>

#include "util/unique_fd.h"

namespace pj::test {

// A socket listening on 127.0.0.1 on a free port; `port` gets the port.
inline util::UniqueFd listen_loopback(int& port) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd.get(), 128) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

// A connection to 127.0.0.1:port whose reads give up after 10 s (a guard
// against a hung test, not a timing assertion).
inline util::UniqueFd connect_loopback(int port) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// A server on 127.0.0.1: listening from construction (`port`), accepting
// from start() on, on a thread that hands each connection to `serve`,
// which owns its fd. Destruction shuts the listening socket down (accept
// then fails) and joins the thread; what `serve` uses must outlive it.
class LoopbackServer {
public:
  LoopbackServer() : fd_(listen_loopback(port)) {}
  ~LoopbackServer() {
    stop_ = true;
    ::shutdown(fd_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  void start(std::function<void(int fd)> serve) {
    thread_ = std::thread([this, serve = std::move(serve)] {
      while (true) {
        int c = ::accept(fd_.get(), nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) ::close(c);
          return;
        }
        serve(c);
      }
    });
  }

  int port = 0;

private:
  util::UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pj::test
