// How the supervisor starts the network filter process, and how that
// process knows it is one (lib/filterproc/filter.h): pi-jail exec'd afresh
// under another name, with one argument and the control socket
// (channel.h) at a fixed descriptor. Constants only: main() reads them on
// every platform.
#pragma once

namespace pj::filterlink {

inline constexpr int kFilterControlFd = 3;
inline constexpr const char* kNetworkFilterArg = "--network-filter";
inline constexpr const char* kNetworkFilterName = "pi-jail-filter";

}  // namespace pj::filterlink
