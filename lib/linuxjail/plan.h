// plan(): from what was asked and what the host has, decide the jail.
//
// Pure: the facts about host paths are gathered beforehand by
// probe_paths() (host.h), so every decision here is unit-tested without
// privileges. The filesystem view comes from the request (the resolved
// policy's grants, system paths, masks and read-only paths) plus the
// structural table in view.h (scratch, devices, /proc).
#pragma once

#include <sys/types.h>

#include <cstddef>

#include <map>
#include <string>
#include <vector>

#include "linuxjail/spec.h"
#include "util/result.h"

namespace pj::linuxjail {

// Where the network filter listens inside the jail.
inline constexpr int kHttpProxyPort = 3128;
inline constexpr int kSocksProxyPort = 1080;
// The most host-loopback ports one jail forwards (pi-jail.toml(5)).
inline constexpr size_t kMaxForwardPorts = 256;

// What the host has at one path. `kind` describes what the path resolves
// to; `is_symlink` whether the path itself is a symlink.
struct SourceFact {
  enum class Kind { absent, directory, file, socket, other };
  Kind kind = Kind::absent;
  bool is_symlink = false;
  std::string link_target;  // readlink(2) of the path when is_symlink
  std::string resolved;     // realpath(3) when it exists
  dev_t dev = 0;
  ino_t ino = 0;
};
using Facts = std::map<std::string, SourceFact>;

using runtime::PathGrant;
using runtime::PathRule;
using PathDeny = PathRule;

// The request (runtime/request.h) and what only the Linux jail uses.
struct PlanInput : runtime::Request {
  SeccompOptions seccomp;
  // The network filter's listeners inside the jail: the HTTP and SOCKS
  // proxies, and the request's host-loopback forwards at the same address.
  bool network_filter = true;
  int landlock_abi = 0;  // the host kernel's (host probe); 0: none
  LandlockUse landlock_use = LandlockUse::if_available;
  std::vector<std::string> landlock_read_only;  // test aid: narrows only
};

// Read-only paths that were absent and are covered by an empty read-only
// placeholder: pi-jail creates the mountpoint on the host (through the
// writable grant) and removes it after the run if it is still empty.
std::vector<std::pair<std::string, Node>> placeholders(const JailSpec& spec);

// Every host path plan() will ask about; probe_paths() answers them.
// (The policy module turns profiles and operator files into these lists;
// see supervisor/prepare.cc.)
std::vector<std::string> paths_to_probe(const PlanInput& in);

// The jail for `in`. Fails (with every problem listed) when a grant names
// a path that does not exist or the input is inconsistent.
util::Result<JailSpec> plan(const PlanInput& in, const Facts& facts);

}  // namespace pj::linuxjail
