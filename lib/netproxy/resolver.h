// Name resolution off the network filter's loop: a few worker threads,
// results announced through a wake-up fd (an eventfd, or a pipe). The
// workers start on demand (a name queued and no worker idle, up to
// `threads`): a run that resolves nothing starts none
// (threads cost every start).
//
// Bounded and cancellable: one look-up per name at a time, however many
// connections wait for it; at most `max_names` names queued or being
// looked up; a connection that goes away leaves its name's waiters, and a
// name nobody waits for any more leaves the queue (a look-up already
// running finishes, and its answer is dropped). Every call except the
// workers' own is made on the loop's thread.
//
// In the network filter process, which may not open files (getaddrinfo
// needs /etc and NSS plugins), names are asked of the supervisor instead
// (ask_by()): each new name is one question with its own id, and its
// answer() arrives on the loop's thread; the bounds above are the same.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "netproxy/rules.h"
#include "util/unique_fd.h"

namespace pj::netproxy {

class Resolver {
public:
  struct Answer {
    std::uint64_t conn;
    std::vector<net::IpAddress> addrs;
    std::string error;
  };

  // Sends question `id` for `host` elsewhere; false when it could not be
  // sent (the name then fails at once).
  using Ask = std::function<bool(std::uint64_t id, const std::string& host)>;

  explicit Resolver(size_t max_names, int threads = 4);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Readable when take() has answers; -1 if it could not be made.
  int fd() const;
  // Look `host` up for `conn`; false when the queue is full.
  [[nodiscard]] bool submit(std::uint64_t conn, const std::string& host);
  // `conn` no longer waits for `host`.
  void cancel(std::uint64_t conn, const std::string& host);
  // Answers for the connections still waiting.
  std::vector<Answer> take();
  // Names queued or being looked up (for tests).
  size_t pending() const { return waiters_.size(); }
  // From now on, ask `ask` instead of looking names up on worker threads
  // (before the first submit()).
  void ask_by(Ask ask) { ask_ = std::move(ask); }
  // The answer to question `id` (ask_by()); an unknown id, or the answer
  // to a name nobody waits for any more, is dropped.
  void answer(std::uint64_t id, std::vector<net::IpAddress> addrs, std::string error);

private:
  struct Done {
    std::string host;
    std::vector<net::IpAddress> addrs;
    std::string error;
  };
  void work();
  void finish(Done d);  // an answer is ready: queue it, wake the loop
  // Under m_: start one more worker if a queued name has none idle to
  // take it; false if none could be started while none runs.
  bool grow_locked();

  size_t max_names_;
  util::UniqueFd wake_r_, wake_w_;  // the same fd twice for an eventfd
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // under m_
  std::deque<Done> done_;          // under m_
  bool stop_ = false;              // under m_
  size_t idle_ = 0;                // workers waiting for a name; under m_
  size_t max_threads_;
  std::map<std::string, std::vector<std::uint64_t>> waiters_;  // loop thread only
  std::vector<std::thread> threads_;                           // started by the loop thread only
  Ask ask_;                                                    // loop thread only
  std::uint64_t next_question_ = 1;                            // loop thread only
  std::map<std::uint64_t, std::string> asked_;                 // question id -> name; loop thread only
};

// One look-up with getaddrinfo(3), on the caller's thread (blocking): the
// workers' own, and the supervisor's for the upstream proxy's name before
// the filter starts. `conn` of the answer is 0.
Resolver::Answer look_up(const std::string& host);

}  // namespace pj::netproxy
