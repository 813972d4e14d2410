// What a listening socket of the network filter serves. Plain: the
// supervisor hands listeners of each kind to the filter process
// (filterlink/messages.h), which carries the kind by these numbers.
#pragma once

#include <cstdint>

namespace pj::netproxy {

// http: an HTTP proxy (CONNECT and absolute-form requests); socks: SOCKS5;
// forward: the jail reaches a host-loopback service (a rule allowed it);
// publish: the host reaches a server inside the jail (an operator's
// `publish`): the listener is on the host's loopback and the connection
// is made from a socket of the jail's network namespace (JailSockets).
// The numbers are on the wire between supervisor and filter: a new kind
// takes the next number, none is renumbered.
enum class ListenerKind : std::uint8_t { http = 0, socks = 1, forward = 2, publish = 3 };

}  // namespace pj::netproxy
