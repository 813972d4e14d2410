// Git and ssh inside the jail to the hosts the operator allowed
// (`[network] ssh`, --allow-ssh), and nowhere else: the run's side of
// it. The jail's ssh config and known_hosts (sshagent/jail_config.h) are
// written to the run's notes directory (jail_notes.h), shown read-only at
// /run/pi-jail; SSH_AUTH_SOCK inside is pi-jail's agent proxy
// (sshagent/proxy.h), listening there. The user's agent socket never
// enters the jail.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policy/policy.h"
#include "runtime/request.h"
#include "sshagent/jail_config.h"
#include "sshagent/proxy.h"
#include "util/result.h"

namespace pj::supervisor {

// Everything --allow-ssh makes for a run: the files, the agent socket and
// its proxy. Removes its files when destroyed (before the notes directory).
class SshAccess {
public:
  // `notes_dir`: the host directory shown at /run/pi-jail; `home`: the
  // user's (for ~/.ssh/known_hosts); `agent`: $SSH_AUTH_SOCK outside.
  static util::Result<std::unique_ptr<SshAccess>> make(const std::string& notes_dir,
                                                       std::vector<sshagent::Target> targets, const std::string& home,
                                                       const std::string& agent);
  ~SshAccess();
  // The jail's environment and view: SSH_AUTH_SOCK, GIT_SSH_COMMAND, the
  // config over /etc/ssh/ssh_config.
  void show(runtime::Request& r) const;
  std::shared_ptr<sshagent::AgentProxy> proxy() const { return proxy_; }

private:
  SshAccess() = default;
  std::string dir_;
  std::shared_ptr<sshagent::AgentProxy> proxy_;
};

// The allowed hosts of `p` as the jail reaches them (ports assigned).
std::vector<sshagent::Target> ssh_targets(const std::vector<policy::Policy::SshHost>& hosts);

}  // namespace pj::supervisor
