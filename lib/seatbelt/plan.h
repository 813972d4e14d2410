// plan(): from a request (runtime/request.h) and the host's paths to a
// Seatbelt profile for macOS, as plain data.
//
// The profile is the static base profile (profiles/seatbelt/pi-jail.sb)
// followed by rules made from the policy. Those rules are built from
// fixed templates whose only variable parts are parameter NAMES chosen
// here (ROOT_0, KEEP_RO_1, ...); every path and port is a parameter VALUE,
// passed to sandbox-exec with -D NAME=VALUE. So no path, however odd
// (quotes, parentheses, newlines), can change the profile's text: the same
// policy shape gives the same profile. Pure: host facts are gathered
// beforehand, so it is unit-tested on any platform.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/request.h"
#include "util/result.h"
#include "view/facts.h"

namespace pj::seatbelt {

// What the host has at each path (view/facts.h, probed once). Seatbelt
// matches the real path (after symlinks: /etc/hosts is /private/etc/hosts),
// so every path enters the profile resolved; for an absent path,
// `resolved` is the real path of its nearest existing ancestor joined
// with the rest.
using ::pj::view::Facts;
using ::pj::view::PathFact;

struct Param {
  std::string name;   // fixed by the template: ROOT_0, PROXY_HTTP, ...
  std::string value;  // a resolved path, or "localhost:PORT"
  std::string why;    // where it comes from (a policy source, "workspace", ...)
};

struct PlanInput {
  runtime::Request request;
  std::string tmpdir;  // the run's private TMPDIR (made by the supervisor), resolved
  std::string tty;     // the PTY given to the command, or empty
  int http_port = 0;   // the network filter on the host's loopback
  int socks_port = 0;
};

struct SeatbeltSpec {
  std::string profile;        // base profile + generated rules
  std::vector<Param> params;  // every (param "...") the profile uses
  std::string exec_path;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
};

// The base profile shipped in profiles/seatbelt/pi-jail.sb.
std::string_view base_profile();

// Every path plan() asks about.
std::vector<std::string> paths_to_probe(const PlanInput& in);

// The profile for `in`; fails (all problems at once) when a grant does not
// exist, a kept-read-only path is a symlink, or a port is out of range.
util::Result<SeatbeltSpec> plan(const PlanInput& in, const Facts& facts);

// sandbox-exec's argument vector: -p PROFILE, -D NAME=VALUE..., --, argv.
std::vector<std::string> sandbox_exec_args(const SeatbeltSpec& spec, const std::string& sandbox_exec);

}  // namespace pj::seatbelt
