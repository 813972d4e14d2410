// The network filter's own Seatbelt profile (macOS), as plain data: the
// static profiles/seatbelt/pi-jail-filter.sb, then a rule for the
// libraries the loader maps and one for the ports the network rules let
// the filter connect to, every path and port a (param "...") value. The
// filter runs under it from its exec by sandbox-exec: deny default; read
// its executable and libraries (the loader), nothing else; accept on its
// two listeners; connect out on the rules' ports; no process, no signal
// to another, no file written. Pure: unit-tested on every platform.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "seatbelt/plan.h"
#include "util/result.h"

namespace pj::seatbelt {

struct FilterPlanInput {
  std::string exe;                     // the filter's executable, resolved (pi-jail itself)
  std::vector<std::string> args;       // after it: {"--network-filter"}
  std::vector<std::string> libraries;  // what the loader maps besides, resolved
  int http_port = 0;                   // the listeners on the host's loopback
  int socks_port = 0;
  std::vector<int> outbound_ports;  // where the rules let it connect (empty: nowhere)
};

// The static part (profiles/seatbelt/pi-jail-filter.sb).
std::string_view filter_base_profile();

// The filter's profile and command: exec_path the executable, argv it and
// `args`, an empty environment. Fails on a relative path or a port out
// of range; the profile is checked (check_profile) before it is returned.
util::Result<SeatbeltSpec> plan_filter(const FilterPlanInput& in);

}  // namespace pj::seatbelt
