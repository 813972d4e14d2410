// Git and ssh inside the jail to the hosts the operator allowed
// (`[network] ssh`, --allow-ssh), and nowhere else:
// - each host is a listener of the network filter inside the jail
//   (127.0.0.1, port kSshJailPortBase + its index) that connects to the
//   host's SSH port under the filter's rules;
// - an ssh config (at kSshJailDir/config, and over /etc/ssh/ssh_config
//   where the host has one, so plain `ssh` reads it too; GIT_SSH_COMMAND
//   names it for git) maps each host name there, with strict host key
//   checking against a known_hosts holding only those hosts' keys, taken
//   from the user's ~/.ssh/known_hosts (a host missing there stops the
//   run, saying how to add it); any other host is refused by ssh itself,
//   with a line naming --allow-ssh;
// - SSH_AUTH_SOCK inside is pi-jail's agent proxy (SshAgentProxy), which
//   asks the user's agent ($SSH_AUTH_SOCK outside) only what
//   sshagent::Session allows. The user's agent socket never enters the jail.
// The files live in the run's notes directory (jail_notes.h), shown
// read-only at /run/pi-jail.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/request.h"
#include "sshagent/known_hosts.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

inline constexpr std::string_view kSshJailDir = "/run/pi-jail/ssh";
inline constexpr int kSshJailPortBase = 2201;

// One allowed host as the jail reaches it.
struct SshTarget {
  std::string host;  // normalised (policy::parse_ssh_host)
  int port = 22;
  int jail_port = 0;  // 127.0.0.1 inside the jail
  std::string why;    // the policy entry's source
};

// The jail's ssh config for `targets`: each host mapped to its listener,
// checked against its known_hosts name; every other host refused by a
// ProxyCommand that says how to allow it.
std::string ssh_config_text(const std::vector<SshTarget>& targets);

// Each target's keys in the user's known_hosts `text` (read from `path`,
// named in the error), as the jail's known_hosts; an error names every
// host with no key there and the way to add one.
util::Result<std::string> jail_known_hosts(std::string_view text, const std::string& path,
                                           const std::vector<SshTarget>& targets,
                                           std::vector<std::string>& host_key_blobs);

// The proxy between the jail's SSH_AUTH_SOCK and the user's agent: one
// thread of the supervisor (started after the jail is cloned), at most
// kMaxClients connections, each judged by its own sshagent::Session.
class SshAgentProxy {
public:
  static constexpr size_t kMaxClients = 16;
  // `listener`: a listening unix socket; `upstream`: the user's agent
  // socket path (empty: none, so nothing is signed).
  SshAgentProxy(util::UniqueFd listener, std::string upstream, std::vector<std::string> host_keys);
  ~SshAgentProxy();
  util::Status start();
  // Stops the thread; the refusals, one line per reason with its count.
  std::vector<std::string> stop();

private:
  void serve();
  void refused(const std::string& why);

  util::UniqueFd listener_;
  std::string upstream_;
  std::vector<std::string> host_keys_;
  util::UniqueFd wake_read_, wake_write_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, size_t> refusals_;  // bounded: kMaxReasons
};

// Everything --allow-ssh makes for a run: the files, the agent socket and
// its proxy. Removes its files when destroyed (before the notes directory).
class SshAccess {
public:
  // `notes_dir`: the host directory shown at /run/pi-jail; `home`: the
  // user's (for ~/.ssh/known_hosts); `agent`: $SSH_AUTH_SOCK outside.
  static util::Result<std::unique_ptr<SshAccess>> make(const std::string& notes_dir, std::vector<SshTarget> targets,
                                                       const std::string& home, const std::string& agent);
  ~SshAccess();
  // The jail's environment and view: SSH_AUTH_SOCK, GIT_SSH_COMMAND, the
  // config over /etc/ssh/ssh_config.
  void show(runtime::Request& r) const;
  std::shared_ptr<SshAgentProxy> proxy() const { return proxy_; }

private:
  SshAccess() = default;
  std::string dir_;
  std::shared_ptr<SshAgentProxy> proxy_;
};

// The allowed hosts of `p` as the jail reaches them (ports assigned).
std::vector<SshTarget> ssh_targets(const std::vector<policy::Policy::SshHost>& hosts);

}  // namespace pj::supervisor
