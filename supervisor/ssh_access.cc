#include "ssh_access.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::supervisor {

namespace {

constexpr const char* kDirName = "ssh";
// The user's known_hosts: far beyond any real one.
constexpr size_t kMaxKnownHosts = 16 << 20;

}  // namespace

std::vector<sshagent::Target> ssh_targets(const std::vector<policy::Policy::SshHost>& hosts) {
  std::vector<sshagent::Target> out;
  for (const auto& h : hosts)
    out.push_back(
        {h.pattern.host, h.pattern.port, sshagent::kJailPortBase + static_cast<int>(out.size()), h.src.str()});
  return out;
}

util::Result<std::unique_ptr<SshAccess>> SshAccess::make(const std::string& notes_dir,
                                                         std::vector<sshagent::Target> targets, const std::string& home,
                                                         const std::string& agent) {
  const std::string kh_path = home + "/.ssh/known_hosts";
  auto text = util::read_untrusted_file(kh_path, kMaxKnownHosts);
  if (!text) return std::move(text.take_error()).context("--allow-ssh: read your known_hosts");
  std::vector<std::string> blobs;
  auto known = sshagent::jail_known_hosts(text->value_or(""), kh_path, targets, blobs);
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
  for (const auto& [name, content] : {std::pair{sshagent::kConfigName, sshagent::jail_config_text(targets)},
                                      std::pair{sshagent::kKnownHostsName, *known}}) {
    auto tmp = util::TempFile::create(dir.get(), name);
    if (!tmp) return tmp.error();
    if (auto ok = tmp->fill(content, util::Durability::page_cache, 0644); !ok) return ok.take_error();
    if (auto ok = tmp->rename_over(name); !ok) return ok.take_error();
  }
  // The agent socket: made here, in pi-jail's own directory, which no
  // jail can write; the jail connects to it through the read-only view.
  const std::string sock_path = out->dir_ + "/" + sshagent::kAgentName;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (sock_path.size() >= sizeof sa.sun_path)
    return util::Error::invalid(
        fmt::format("the SSH agent socket path {} is too long for a unix socket; set "
                    "XDG_STATE_HOME to a shorter directory",
                    sock_path));
  std::memcpy(sa.sun_path, sock_path.data(), sock_path.size());
  util::UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) return util::Error::from_errno("make the SSH agent socket", errno);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return util::Error::from_errno("bind the SSH agent socket " + sock_path, errno);
  // The jail's user may be another uid of the host (its root maps to
  // the caller): anyone who can reach the directory may connect.
  if (::chmod(sock_path.c_str(), 0666) != 0 || ::listen(listener.get(), 16) != 0)
    return util::Error::from_errno("listen on the SSH agent socket " + sock_path, errno);
  out->proxy_ = std::make_shared<sshagent::AgentProxy>(std::move(listener), agent, std::move(blobs));
  return out;
}

SshAccess::~SshAccess() {
  if (dir_.empty()) return;
  for (const char* name : {sshagent::kConfigName, sshagent::kKnownHostsName, sshagent::kAgentName})
    ::unlink((dir_ + "/" + name).c_str());
  ::rmdir(dir_.c_str());
}

void SshAccess::show(runtime::Request& r) const {
  r.env_set.emplace_back("SSH_AUTH_SOCK", sshagent::jail_file(sshagent::kAgentName));
  r.env_set.emplace_back("GIT_SSH_COMMAND", fmt::format("ssh -F {}", sshagent::jail_file(sshagent::kConfigName)));
  struct stat st;
  if (::lstat("/etc/ssh/ssh_config", &st) == 0 && S_ISREG(st.st_mode))
    r.shown_files.push_back({"/etc/ssh/ssh_config", dir_ + "/" + sshagent::kConfigName,
                             "pi-jail's ssh config: the allowed SSH hosts only (pi-jail(1), SSH)"});
}

}  // namespace pj::supervisor
