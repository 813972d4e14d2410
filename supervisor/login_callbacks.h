// The program's login callbacks under the Linux jail: a login that waits
// for the browser's redirect on a loopback port (Pi's Anthropic login on
// 53692, OpenAI's on 1455: runtime::Request::login_callbacks) listens in
// the jail's own network namespace, which the host's browser cannot
// reach. While something in the jail listens on one of those ports, the
// supervisor serves the same port on the host's loopback, exactly as
// --publish does: the network filter accepts there and connects from a
// socket made in the jail's namespace to that port of the jail's
// loopback, and nowhere else. It stops as soon as the jail stops
// listening there. A port outside the list is never served; a port an
// operator publishes is left to that.
//
// Both of the host's loopback families are served, or neither
// (listening::served_on_host): 127.0.0.1 and ::1 (when the host has
// one), whichever the jail listens on, each to the jail's address of its
// own family where it listens there, else to the other. A browser opens
// http://localhost:PORT/ on ::1 or 127.0.0.1, whichever it tries first:
// serving one family only would let a login on the host bind the other
// without an error and then lose its redirect (code and state) to the
// jail. And when a host login holds either family first, the other is
// not served either.
//
// Which of the jail's sockets listen is asked of the kernel a few times a
// second, through a NETLINK_SOCK_DIAG socket made once in the jail's
// namespace (linuxjail/listening.h): a dump filtered to these ports, so
// its size does not grow with the jail's other sockets; each wake-up
// reads a bounded number of datagrams. A host port that is taken (the
// host's own Pi mid-login, the Codex CLI) is said in one line naming it,
// nothing of that port is served while it is, and pasting the redirect
// URL into the program still works; nothing of this ever ends the run.
// The filter's end does, elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "filter_process.h"
#include "linuxjail/listening.h"
#include "run.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

class LoginCallbacks {
public:
  using Clock = std::chrono::steady_clock;
  // How often the jail's listening sockets are looked at.
  static constexpr std::chrono::milliseconds kLookEvery{250};

  // Watch the jail whose init is `jail_pidfd` for listeners on the run's
  // login callback ports, served through `filter` (which must outlive
  // this). Null when there is no port to watch; when the jail's socket
  // cannot be made, that is said once and nothing is watched.
  static std::unique_ptr<LoginCallbacks> start(int jail_pidfd, const RunOptions& opts, FilterProcess& filter);
  ~LoginCallbacks() = default;
  LoginCallbacks(const LoginCallbacks&) = delete;
  LoginCallbacks& operator=(const LoginCallbacks&) = delete;

  // To poll for POLLIN: the socket while a dump is being read, else -1.
  int fd() const;
  // Milliseconds until the next look is due (0: now), for poll's timeout.
  int timeout_ms(Clock::time_point now) const;
  // Read what the kernel answered, and look again when due; never blocks.
  void on_poll(Clock::time_point now);
  // Every host address and port served so far, each once, in order.
  const std::vector<ServedLoginCallback>& served_log() const { return served_log_; }

private:
  // What the host serves of a port: the filter's listener of each host
  // family, and the jail's families they go to.
  struct Served {
    linuxjail::listening::Families jail;
    std::vector<std::uint64_t> ids;
  };

  LoginCallbacks(util::UniqueFd sock, std::vector<runtime::Request::LoginCallback> ports, FilterProcess& filter);
  void ask(int family);
  void read();
  void apply();
  void serve(std::uint16_t port, linuxjail::listening::Families jail);
  void stop(const std::string& why);
  const runtime::Request::LoginCallback& callback(std::uint16_t port) const;

  util::UniqueFd sock_;
  std::vector<runtime::Request::LoginCallback> callbacks_;
  std::vector<std::uint16_t> ports_;
  FilterProcess& filter_;
  int asking_ = 0;  // the family a dump is being read of; 0: none
  std::uint32_t seq_ = 0;
  Clock::time_point next_look_{};
  std::map<std::uint16_t, linuxjail::listening::Families> found_;  // this look's, so far
  std::map<std::uint16_t, Served> served_;
  std::map<std::uint16_t, std::vector<std::uint64_t>> closing_;  // told to close, not yet all said closed
  std::set<std::uint16_t> said_taken_;                           // said once while the jail listens there
  std::vector<ServedLoginCallback> served_log_;                  // for the report
};

}  // namespace pj::supervisor
