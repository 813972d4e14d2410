// The user's known_hosts (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT") read for
// the keys of one host: plain and hashed (|1|salt|hash) host patterns,
// "*" and "?" wildcards, negated patterns; @revoked keys removed from the
// answer; @cert-authority lines skipped (a CA is not a host's key).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pj::sshagent {

struct HostKey {
  std::string type;    // "ssh-ed25519"
  std::string base64;  // as in the file
  std::string blob;    // decoded
  bool operator==(const HostKey&) const = default;
};

// The name known_hosts stores for `host` on `port`: "host" on 22,
// "[host]:port" otherwise.
std::string known_hosts_name(std::string_view host, int port);

// The keys `text` holds for `host`:`port` (each once), in file order.
std::vector<HostKey> find_host_keys(std::string_view text, std::string_view host, int port);

// A known_hosts file naming each key under `name` (one line a key).
std::string known_hosts_text(std::string_view name, const std::vector<HostKey>& keys);

}  // namespace pj::sshagent
