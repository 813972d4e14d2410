#include "netproxy/resolver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#if defined(__linux__)
#include <sys/eventfd.h>
#endif

#include "util/unique_fd.h"

namespace pj::netproxy {

Resolver::Answer look_up(const std::string& host) {
  Resolver::Answer res{0, {}, {}};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &ai);
  if (rc != 0) {
    res.error = ::gai_strerror(rc);
    return res;
  }
  for (addrinfo* p = ai; p; p = p->ai_next) {
    net::IpAddress a;
    if (p->ai_family == AF_INET) {
      a.v4addr = reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr;
    } else if (p->ai_family == AF_INET6) {
      char text[INET6_ADDRSTRLEN];
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr, text, sizeof text);
      auto parsed = net::parse_ip(text);  // unwraps IPv4-mapped forms
      if (!parsed) continue;
      a = *parsed;
    } else {
      continue;
    }
    if (std::find(res.addrs.begin(), res.addrs.end(), a) == res.addrs.end()) res.addrs.push_back(a);
  }
  ::freeaddrinfo(ai);
  return res;
}

Resolver::Resolver(size_t max_names, int threads)
    : max_names_(max_names), max_threads_(threads > 0 ? static_cast<size_t>(threads) : 0) {
#if defined(__linux__)
  wake_r_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake_r_.valid()) wake_w_.reset(::dup(wake_r_.get()));
#else
  int p[2];
  if (::pipe(p) == 0) {
    wake_r_.reset(p[0]);
    wake_w_.reset(p[1]);
    if (!util::set_nonblocking_cloexec(p[0]) || !util::set_nonblocking_cloexec(p[1])) wake_r_.reset();
  }
#endif
}

Resolver::~Resolver() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

int Resolver::fd() const { return wake_r_.valid() && wake_w_.valid() ? wake_r_.get() : -1; }

bool Resolver::submit(std::uint64_t conn, const std::string& host) {
  if (auto it = waiters_.find(host); it != waiters_.end()) {
    it->second.push_back(conn);  // joins the look-up under way
    return true;
  }
  if (waiters_.size() >= max_names_) return false;
  // Questions whose names nobody waits for any more are still out until
  // answered: they are bounded too, so that a jail connecting and going
  // away cannot grow the table while the supervisor is slow.
  if (ask_ && asked_.size() >= 4 * max_names_) return false;
  waiters_[host].push_back(conn);
  if (ask_) {
    std::uint64_t id = next_question_++;
    asked_[id] = host;
    if (!ask_(id, host)) answer(id, {}, "the name could not be asked of the supervisor");
    return true;
  }
  bool started;
  {
    std::lock_guard lock(m_);
    queue_.push_back(host);
    started = grow_locked();
    // No worker runs and none could start: the name fails now rather
    // than waiting for a worker that will never come.
    if (!started) done_.push_back({queue_.back(), {}, "no resolver thread could be started"});
    if (!started) queue_.pop_back();
  }
  if (!started) {
    std::uint64_t one = 1;
    ssize_t w = ::write(wake_w_.get(), &one, sizeof one);
    (void)w;
    return true;
  }
  cv_.notify_one();
  return true;
}

bool Resolver::grow_locked() {
  if (queue_.size() <= idle_ || threads_.size() >= max_threads_) return !threads_.empty() || max_threads_ == 0;
  try {
    threads_.emplace_back([this] { work(); });
  } catch (const std::system_error&) {
    // Fewer workers than asked for: the queued names wait for the ones
    // that run.
  }
  return !threads_.empty();
}

void Resolver::cancel(std::uint64_t conn, const std::string& host) {
  auto it = waiters_.find(host);
  if (it == waiters_.end()) return;
  std::erase(it->second, conn);
  if (!it->second.empty()) return;
  if (ask_) {
    // The question stays asked (its id is known to the supervisor); its
    // answer will find no one, and the name counts no more.
    waiters_.erase(it);
    return;
  }
  std::lock_guard lock(m_);
  auto q = std::find(queue_.begin(), queue_.end(), host);
  if (q == queue_.end()) return;  // being looked up: its answer will find no one
  queue_.erase(q);
  waiters_.erase(it);
}

void Resolver::answer(std::uint64_t id, std::vector<net::IpAddress> addrs, std::string error) {
  auto it = asked_.find(id);
  if (it == asked_.end()) return;
  Done d{std::move(it->second), std::move(addrs), std::move(error)};
  asked_.erase(it);
  if (d.addrs.empty() && d.error.empty()) d.error = "no address";
  finish(std::move(d));
}

void Resolver::finish(Done d) {
  {
    std::lock_guard lock(m_);
    done_.push_back(std::move(d));
  }
  std::uint64_t one = 1;
  ssize_t w = ::write(wake_w_.get(), &one, sizeof one);  // a pipe takes 8 bytes as well
  (void)w;
}

std::vector<Resolver::Answer> Resolver::take() {
  std::uint64_t drained;
  while (::read(wake_r_.get(), &drained, sizeof drained) > 0) {
  }
  std::deque<Done> done;
  {
    std::lock_guard lock(m_);
    done.swap(done_);
  }
  std::vector<Answer> out;
  for (auto& d : done) {
    auto it = waiters_.find(d.host);
    if (it == waiters_.end()) continue;
    for (auto conn : it->second) out.push_back({conn, d.addrs, d.error});
    waiters_.erase(it);
  }
  return out;
}

void Resolver::work() {
  while (true) {
    std::string host;
    {
      std::unique_lock lock(m_);
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (stop_) return;
      host = std::move(queue_.front());
      queue_.pop_front();
    }
    Answer a = look_up(host);
    finish({std::move(host), std::move(a.addrs), std::move(a.error)});
  }
}

}  // namespace pj::netproxy
