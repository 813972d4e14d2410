// What ssh inside a jail reads so that it reaches only the hosts the
// operator allowed (`[network] ssh`, --allow-ssh):
// - each host is a listener of the network filter inside the jail
//   (127.0.0.1, port kJailPortBase + its index) that connects to the
//   host's SSH port under the filter's rules;
// - an ssh config maps each host name there, with strict host key
//   checking against a known_hosts holding only those hosts' keys, taken
//   from the user's ~/.ssh/known_hosts (a host missing there is an error
//   that says how to add it); any other host is refused by ssh itself,
//   with a line naming --allow-ssh.
// Plain text in, text out: the run writes the files (supervisor/ssh_access.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace pj::sshagent {

// Where the jail finds the config, its known_hosts and the agent socket.
inline constexpr std::string_view kJailDir = "/run/pi-jail/ssh";
inline constexpr const char* kConfigName = "config";
inline constexpr const char* kKnownHostsName = "known_hosts";
inline constexpr const char* kAgentName = "agent";
inline constexpr int kJailPortBase = 2201;

// `name` in kJailDir.
std::string jail_file(const char* name);

// One allowed host as the jail reaches it.
struct Target {
  std::string host;  // normalised (policy::parse_ssh_host)
  int port = 22;
  int jail_port = 0;  // 127.0.0.1 inside the jail
  std::string why;    // the policy entry's source
};

// The jail's ssh config for `targets`: each host mapped to its listener,
// checked against its known_hosts name; every other host refused by a
// ProxyCommand that says how to allow it.
std::string jail_config_text(const std::vector<Target>& targets);

// Each target's keys in the user's known_hosts `text` (read from `path`,
// named in the error), as the jail's known_hosts; an error names every
// host with no key there and the way to add one. The keys found are
// appended to `host_key_blobs` (what the agent proxy binds sessions to).
util::Result<std::string> jail_known_hosts(std::string_view text, const std::string& path,
                                           const std::vector<Target>& targets,
                                           std::vector<std::string>& host_key_blobs);

}  // namespace pj::sshagent
