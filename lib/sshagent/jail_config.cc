#include "sshagent/jail_config.h"

#include <fmt/format.h>

#include "sshagent/known_hosts.h"

namespace pj::sshagent {

namespace {

std::string known_name(const Target& t) { return known_hosts_name(t.host, t.port); }

}  // namespace

std::string jail_file(const char* name) { return fmt::format("{}/{}", kJailDir, name); }

std::string jail_config_text(const std::vector<Target>& targets) {
  std::string out =
      "# pi-jail: ssh in this jail reaches only the hosts the user allowed (--allow-ssh), through pi-jail's\n"
      "# network filter, checked against their keys from the user's known_hosts; logins are signed by\n"
      "# pi-jail's agent proxy ($SSH_AUTH_SOCK), for those hosts only.\n";
  for (const auto& t : targets)
    out += fmt::format(
        "Host {}\n  HostName 127.0.0.1\n  Port {}\n  HostKeyAlias {}\n  CheckHostIP no\n"
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
                                           const std::vector<Target>& targets,
                                           std::vector<std::string>& host_key_blobs) {
  std::string out, missing;
  for (const auto& t : targets) {
    auto keys = find_host_keys(text, t.host, t.port);
    if (keys.empty()) {
      const std::string port = t.port == 22 ? "" : fmt::format("-p {} ", t.port);
      missing += fmt::format(
          "\n  {} ({}): no key in {}; add it outside the jail, after checking its fingerprint "
          "with the host's owner: ssh-keyscan {}{} >> {} (or connect once: ssh {}{})",
          known_name(t), t.why, path, port, t.host, path, port, t.host);
      continue;
    }
    out += known_hosts_text(known_name(t), keys);
    for (auto& k : keys) host_key_blobs.push_back(std::move(k.blob));
  }
  if (!missing.empty())
    return util::Error::invalid("--allow-ssh: the jail checks an SSH host by its keys in your known_hosts:" + missing);
  return out;
}

}  // namespace pj::sshagent
