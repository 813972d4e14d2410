// The program's login callbacks under the Linux jail: a login that waits
// for the browser's redirect on a loopback port (Pi's Anthropic login on
// 53692, OpenAI's on 1455: runtime::Request::login_callbacks) listens in
// the jail's own network namespace, which the host's browser cannot
// reach. While something in the jail listens on one of those ports, the
// supervisor serves the same port on the host's loopback (127.0.0.1, and
// ::1 for a listener on ::1 or :: when the host has one), exactly as
// --publish does: the network filter accepts there and connects from a
// socket made in the jail's namespace to that port of the jail's
// loopback, and nowhere else. It stops as soon as the jail stops
// listening there. A port outside the list is never served; a port an
// operator publishes is left to that.
//
// Which of the jail's sockets listen is asked of the kernel a few times a
// second, through a NETLINK_SOCK_DIAG socket made once in the jail's
// namespace (linuxjail/listening.h): a dump filtered to these ports, so
// its size does not grow with the jail's other sockets; each wake-up
// reads a bounded number of datagrams. A host port that is taken (the
// host's own Pi mid-login, the Codex CLI) is said in one line naming it,
// and pasting the redirect URL into the program still works; nothing of
// this ever ends the run. The filter's end does, elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
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

private:
  // A host listener: its family and port (its jail address follows).
  using Key = std::pair<bool, std::uint16_t>;  // (v6, port)

  LoginCallbacks(util::UniqueFd sock, std::vector<runtime::Request::LoginCallback> ports, FilterProcess& filter);
  void ask(int family);
  void read();
  void apply();
  void publish(const Key& key);
  void stop(const std::string& why);
  const runtime::Request::LoginCallback& callback(std::uint16_t port) const;

  util::UniqueFd sock_;
  std::vector<runtime::Request::LoginCallback> callbacks_;
  std::vector<std::uint16_t> ports_;
  FilterProcess& filter_;
  int asking_ = 0;  // the family a dump is being read of; 0: none
  std::uint32_t seq_ = 0;
  Clock::time_point next_look_{};
  std::set<Key> found_;                   // this look's, so far
  std::map<Key, std::uint64_t> served_;   // the filter's listener of each
  std::map<Key, std::uint64_t> closing_;  // told to close, not yet said closed
  std::set<Key> said_taken_;              // said once while the jail listens there
};

}  // namespace pj::supervisor
