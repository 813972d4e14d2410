// The effective policy with the source of every entry, and the refused
// requests: as text for people, and as JSON (schema pi-jail-explain/1,
// documented in pi-jail(1); stable: fields are only ever added).
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"

namespace pj::policy {

struct LayerInfo {
  Authority authority;
  std::string name;
  bool present;  // false: an optional operator file that does not exist
};

struct ExplainInput {
  const Policy* policy = nullptr;  // null when resolution failed
  const Resolved* resolved = nullptr;
  std::vector<LayerInfo> layers;
  std::string workspace;
  std::string backend = "linux";  // which jail runs it: "linux" or "macos-seatbelt"
  std::string jail_home = "";     // the host directory shown at $HOME; "" when ephemeral
  // The program's login callback ports (runtime::Request::login_callbacks):
  // served on the host's loopback while the jail listens on one (Linux);
  // on macOS the jail may listen on them on the host's loopback itself,
  // for the whole run (its Seatbelt profile allows that and no other bind).
  struct LoginCallback {
    int port = 0;
    std::string what;    // whose login waits there
    std::string source;  // "profile pi"
  };
  std::vector<LoginCallback> login_callbacks = {};
  // Where the network filter terminates TLS for a login inside (host:port;
  // credentials::RunCredentials::login_endpoints()), and who asked for it
  // ("profile pi").
  std::vector<std::string> login_endpoints = {};
  std::string login_endpoints_source = {};
};

// For people: paths, patterns and messages (which may come from the
// project file, written by the jail) go through util::printable.
std::string explain_text(const ExplainInput& in);
std::string explain_json(const ExplainInput& in);

}  // namespace pj::policy
