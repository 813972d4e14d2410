#include "sshagent/proxy.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "sshagent/agent.h"
#include "util/bounded_io.h"
#include "util/escape.h"

namespace pj::sshagent {

namespace {

// Distinct refusal reasons kept (the rest counted under one line).
constexpr size_t kMaxReasons = 20;
// How long the user's agent may take to answer (it may ask the user to
// confirm a signature: ssh-add -c).
constexpr int kUpstreamTimeoutMs = 120000;
// How long a jailed client may take to read an answer.
constexpr int kClientWriteTimeoutMs = 10000;

// Exactly `n` bytes from `fd`, waiting at most `timeout_ms` each time.
bool read_exact(int fd, std::string& out, size_t n, int timeout_ms) {
  out.clear();
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[16384];
    ssize_t got = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return false;
    out.append(buf, static_cast<size_t>(got));
  }
  return true;
}

util::UniqueFd connect_unix(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path) return {};
  std::memcpy(sa.sun_path, path.data(), path.size());
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return {};
  return fd;
}

// One message to the user's agent and its answer (a body), or nullopt.
std::optional<std::string> ask_upstream(util::UniqueFd& up, const std::string& path, std::string_view body) {
  if (!up.valid()) up = connect_unix(path);
  if (!up.valid()) return std::nullopt;
  std::string head, answer;
  if (!util::send_all(up.get(), frame(body), std::chrono::milliseconds(kUpstreamTimeoutMs)).sent() ||
      !read_exact(up.get(), head, 4, kUpstreamTimeoutMs)) {
    up.reset();
    return std::nullopt;
  }
  auto len = frame_length(head);
  if (!len.body || !read_exact(up.get(), answer, *len.body, kUpstreamTimeoutMs)) {
    up.reset();
    return std::nullopt;
  }
  return answer;
}

struct Client {
  util::UniqueFd fd;
  util::UniqueFd upstream;  // the user's agent, for this client alone (its session binds are this client's)
  std::string in;
  Session session;
};

const std::string kFailure(1, static_cast<char>(kAgentFailure));
const std::string kSuccess(1, static_cast<char>(kAgentSuccess));

}  // namespace

AgentProxy::AgentProxy(util::UniqueFd listener, std::string upstream, std::vector<std::string> host_keys)
    : listener_(std::move(listener)), upstream_(std::move(upstream)), host_keys_(std::move(host_keys)) {}

AgentProxy::~AgentProxy() { (void)stop(); }

util::Status AgentProxy::start() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return util::Error::from_errno("the SSH agent proxy's wake-up pipe", errno);
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
  thread_ = std::thread([this] { serve(); });
  return {};
}

std::vector<std::string> AgentProxy::stop() {
  if (thread_.joinable()) {
    (void)!::write(wake_write_.get(), "x", 1);
    thread_.join();
  }
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [why, count] : refusals_)
    out.push_back(
        fmt::format("ssh agent: refused {}{}", util::printable(why), count > 1 ? fmt::format(" ({}x)", count) : ""));
  refusals_.clear();
  return out;
}

void AgentProxy::refused(const std::string& why) {
  std::lock_guard lock(mu_);
  if (refusals_.size() >= kMaxReasons && !refusals_.count(why))
    ++refusals_["(more requests of other kinds)"];
  else
    ++refusals_[why];
}

void AgentProxy::serve() {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), static_cast<short>(clients.size() < kMaxClients ? POLLIN : 0), 0});
    for (const auto& c : clients) fds.push_back({c->fd.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    std::vector<bool> gone(clients.size(), false);
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fds[i + 2].revents) continue;
      Client& c = *clients[i];
      char buf[16384];
      ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        gone[i] = true;
        continue;
      }
      c.in.append(buf, static_cast<size_t>(n));
      while (!gone[i]) {
        auto len = frame_length(c.in);
        if (len.bad) {
          refused(fmt::format("a message longer than {} bytes (the connection was closed)", kMaxMessage));
          gone[i] = true;
          break;
        }
        if (!len.body || c.in.size() < 4 + *len.body) break;
        const std::string body = c.in.substr(4, *len.body);
        c.in.erase(0, 4 + *len.body);
        auto j = c.session.judge(body);
        std::string reply = kFailure;
        if (j.action == Action::refuse) {
          refused(j.refusal);
        } else if (auto answer = ask_upstream(c.upstream, upstream_, body)) {
          reply = j.action == Action::forward_then_success ? kSuccess : *answer;
        } else if (j.action == Action::forward_then_success) {
          reply = kSuccess;  // an agent without session binds: pi-jail's own check is what counts
        } else {
          refused(upstream_.empty() ? "a request: pi-jail had no agent to ask ($SSH_AUTH_SOCK was not set)"
                                    : "a request: the user's agent did not answer");
        }
        if (!util::send_all(c.fd.get(), frame(reply), std::chrono::milliseconds(kClientWriteTimeoutMs)).sent())
          gone[i] = true;
      }
    }
    for (size_t i = clients.size(); i-- > 0;)
      if (gone[i]) clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) clients.push_back(std::make_unique<Client>(Client{util::UniqueFd(fd), {}, {}, Session(host_keys_)}));
    }
  }
}

}  // namespace pj::sshagent
