#include "ssh_access.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "jail_notes.h"
#include "sshagent/agent.h"
#include "util/escape.h"
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::supervisor {

namespace {

constexpr const char* kDirName = "ssh";
constexpr const char* kConfigName = "config";
constexpr const char* kKnownHostsName = "known_hosts";
constexpr const char* kAgentName = "agent";
// The user's known_hosts: far beyond any real one.
constexpr size_t kMaxKnownHosts = 16 << 20;
// Distinct refusal reasons kept (the rest counted under one line).
constexpr size_t kMaxReasons = 20;
// How long the user's agent may take to answer (it may ask the user to
// confirm a signature: ssh-add -c).
constexpr int kUpstreamTimeoutMs = 120000;
// How long a jailed client may take to read an answer.
constexpr int kClientWriteTimeoutMs = 10000;

std::string jail_file(const char* name) { return fmt::format("{}/{}", kSshJailDir, name); }

std::string known_name(const SshTarget& t) { return sshagent::known_hosts_name(t.host, t.port); }

// All of `data` to blocking-or-not `fd`, waiting at most `timeout_ms` for room.
bool write_all(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

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
  if (!write_all(up.get(), sshagent::frame(body), kUpstreamTimeoutMs) || !read_exact(up.get(), head, 4, kUpstreamTimeoutMs)) {
    up.reset();
    return std::nullopt;
  }
  auto len = sshagent::frame_length(head);
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
  sshagent::Session session;
};

const std::string kFailure(1, static_cast<char>(sshagent::kAgentFailure));
const std::string kSuccess(1, static_cast<char>(sshagent::kAgentSuccess));

}  // namespace

std::vector<SshTarget> ssh_targets(const std::vector<policy::Policy::SshHost>& hosts) {
  std::vector<SshTarget> out;
  for (const auto& h : hosts)
    out.push_back({h.pattern.host, h.pattern.port, kSshJailPortBase + static_cast<int>(out.size()), h.src.str()});
  return out;
}

std::string ssh_config_text(const std::vector<SshTarget>& targets) {
  std::string out =
      "# pi-jail: ssh in this jail reaches only the hosts the user allowed (--allow-ssh), through pi-jail's\n"
      "# network filter, checked against their keys from the user's known_hosts; logins are signed by\n"
      "# pi-jail's agent proxy ($SSH_AUTH_SOCK), for those hosts only.\n";
  for (const auto& t : targets)
    out += fmt::format("Host {}\n  HostName 127.0.0.1\n  Port {}\n  HostKeyAlias {}\n  CheckHostIP no\n"
                       "  ProxyCommand none\n",
                       t.host, t.jail_port, known_name(t));
  out += fmt::format(
      "Host *\n  StrictHostKeyChecking yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n"
      "  UpdateHostKeys no\n  ForwardAgent no\n  IdentityAgent {}\n"
      "  ProxyCommand sh -c 'echo \"pi-jail: ssh to %h is not allowed in this jail; to allow it, run pi-jail with "
      "--allow-ssh %h (pi-jail(1), SSH)\" >&2; exit 1'\n",
      jail_file(kKnownHostsName), jail_file(kAgentName));
  return out;
}

util::Result<std::string> jail_known_hosts(std::string_view text, const std::string& path,
                                           const std::vector<SshTarget>& targets,
                                           std::vector<std::string>& host_key_blobs) {
  std::string out, missing;
  for (const auto& t : targets) {
    auto keys = sshagent::find_host_keys(text, t.host, t.port);
    if (keys.empty()) {
      const std::string port = t.port == 22 ? "" : fmt::format("-p {} ", t.port);
      missing += fmt::format("\n  {} ({}): no key in {}; add it outside the jail, after checking its fingerprint "
                             "with the host's owner: ssh-keyscan {}{} >> {} (or connect once: ssh {}{})",
                             known_name(t), t.why, path, port, t.host, path, port, t.host);
      continue;
    }
    out += sshagent::known_hosts_text(known_name(t), keys);
    for (auto& k : keys) host_key_blobs.push_back(std::move(k.blob));
  }
  if (!missing.empty())
    return util::Error::invalid("--allow-ssh: the jail checks an SSH host by its keys in your known_hosts:" + missing);
  return out;
}

SshAgentProxy::SshAgentProxy(util::UniqueFd listener, std::string upstream, std::vector<std::string> host_keys)
    : listener_(std::move(listener)), upstream_(std::move(upstream)), host_keys_(std::move(host_keys)) {}

SshAgentProxy::~SshAgentProxy() { (void)stop(); }

util::Status SshAgentProxy::start() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return util::Error::from_errno("the SSH agent proxy's wake-up pipe", errno);
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
  thread_ = std::thread([this] { serve(); });
  return {};
}

std::vector<std::string> SshAgentProxy::stop() {
  if (thread_.joinable()) {
    (void)!::write(wake_write_.get(), "x", 1);
    thread_.join();
  }
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [why, count] : refusals_)
    out.push_back(fmt::format("ssh agent: refused {}{}", util::printable(why), count > 1 ? fmt::format(" ({}x)", count) : ""));
  refusals_.clear();
  return out;
}

void SshAgentProxy::refused(const std::string& why) {
  std::lock_guard lock(mu_);
  if (refusals_.size() >= kMaxReasons && !refusals_.count(why)) ++refusals_["(more requests of other kinds)"];
  else ++refusals_[why];
}

void SshAgentProxy::serve() {
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
        auto len = sshagent::frame_length(c.in);
        if (len.bad) {
          refused(fmt::format("a message longer than {} bytes (the connection was closed)", sshagent::kMaxMessage));
          gone[i] = true;
          break;
        }
        if (!len.body || c.in.size() < 4 + *len.body) break;
        const std::string body = c.in.substr(4, *len.body);
        c.in.erase(0, 4 + *len.body);
        auto j = c.session.judge(body);
        std::string reply = kFailure;
        if (j.action == sshagent::Action::refuse) {
          refused(j.refusal);
        } else if (auto answer = ask_upstream(c.upstream, upstream_, body)) {
          reply = j.action == sshagent::Action::forward_then_success ? kSuccess : *answer;
        } else if (j.action == sshagent::Action::forward_then_success) {
          reply = kSuccess;  // an agent without session binds: pi-jail's own check is what counts
        } else {
          refused(upstream_.empty() ? "a request: pi-jail had no agent to ask ($SSH_AUTH_SOCK was not set)"
                                    : "a request: the user's agent did not answer");
        }
        if (!write_all(c.fd.get(), sshagent::frame(reply), kClientWriteTimeoutMs)) gone[i] = true;
      }
    }
    for (size_t i = clients.size(); i-- > 0;)
      if (gone[i]) clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) clients.push_back(std::make_unique<Client>(Client{util::UniqueFd(fd), {}, {}, sshagent::Session(host_keys_)}));
    }
  }
}

util::Result<std::unique_ptr<SshAccess>> SshAccess::make(const std::string& notes_dir, std::vector<SshTarget> targets,
                                                         const std::string& home, const std::string& agent) {
  const std::string kh_path = home + "/.ssh/known_hosts";
  auto text = util::read_untrusted_file(kh_path, kMaxKnownHosts);
  if (!text) return std::move(text.take_error()).context("--allow-ssh: read your known_hosts");
  std::vector<std::string> blobs;
  auto known = jail_known_hosts(text->value_or(""), kh_path, targets, blobs);
  if (!known) return known.take_error();

  std::unique_ptr<SshAccess> out(new SshAccess());
  out->dir_ = notes_dir + "/" + kDirName;
  if (::mkdir(out->dir_.c_str(), 0755) != 0) {
    int err = errno;
    out->dir_.clear();
    return util::Error::from_errno("make " + notes_dir + "/" + kDirName, err);
  }
  util::UniqueFd dir(::open(out->dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return util::Error::from_errno("open " + out->dir_, errno);
  for (const auto& [name, content] : {std::pair{kConfigName, ssh_config_text(targets)}, std::pair{kKnownHostsName, *known}}) {
    auto tmp = util::TempFile::create(dir.get(), name);
    if (!tmp) return tmp.error();
    if (auto ok = tmp->fill(content, util::Durability::page_cache, 0644); !ok) return ok.take_error();
    if (auto ok = tmp->rename_over(name); !ok) return ok.take_error();
  }
  // The agent socket: made here, in pi-jail's own directory, which no
  // jail can write; the jail connects to it through the read-only view.
  const std::string sock_path = out->dir_ + "/" + kAgentName;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (sock_path.size() >= sizeof sa.sun_path)
    return util::Error::invalid(fmt::format("the SSH agent socket path {} is too long for a unix socket; set "
                                            "XDG_STATE_HOME to a shorter directory", sock_path));
  std::memcpy(sa.sun_path, sock_path.data(), sock_path.size());
  util::UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) return util::Error::from_errno("make the SSH agent socket", errno);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return util::Error::from_errno("bind the SSH agent socket " + sock_path, errno);
  // The jail's user may be another uid of the host (its root maps to
  // the caller): anyone who can reach the directory may connect.
  if (::chmod(sock_path.c_str(), 0666) != 0 || ::listen(listener.get(), 16) != 0)
    return util::Error::from_errno("listen on the SSH agent socket " + sock_path, errno);
  out->proxy_ = std::make_shared<SshAgentProxy>(std::move(listener), agent, std::move(blobs));
  return out;
}

SshAccess::~SshAccess() {
  if (dir_.empty()) return;
  for (const char* name : {kConfigName, kKnownHostsName, kAgentName}) ::unlink((dir_ + "/" + name).c_str());
  ::rmdir(dir_.c_str());
}

void SshAccess::show(runtime::Request& r) const {
  r.env_set.emplace_back("SSH_AUTH_SOCK", jail_file(kAgentName));
  r.env_set.emplace_back("GIT_SSH_COMMAND", fmt::format("ssh -F {}", jail_file(kConfigName)));
  struct stat st;
  if (::lstat("/etc/ssh/ssh_config", &st) == 0 && S_ISREG(st.st_mode))
    r.shown_files.push_back({"/etc/ssh/ssh_config", dir_ + "/" + kConfigName,
                             "pi-jail's ssh config: the allowed SSH hosts only (pi-jail(1), SSH)"});
}

}  // namespace pj::supervisor
