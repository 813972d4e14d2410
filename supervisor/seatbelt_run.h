// The macOS supervisor: what a Seatbelt run holds besides the profile
// (a PTY, the network filter's listeners on the host's loopback) and the
// loop that supervises the sandboxed command to its end: terminal relay,
// signals, --timeout and --grace, the network filter's process (under
// sandbox-exec with a profile of its own, seatbelt/filter_profile.h;
// filter_process.h speaks to it), and the leftovers of the command's
// process group. POSIX only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "run.h"
#include "seatbelt/launch.h"
#include "seatbelt/plan.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

// The command's terminal when any of fds 0-2 is one: a new PTY whose
// terminal side takes the outer terminal's settings and size and replaces
// each of them (the command never holds the real terminal).
struct Pty {
  util::UniqueFd master;
  util::UniqueFd terminal;  // handed to the command, closed here once it started
  std::string path;         // the terminal's device (for the profile)
  unsigned fds = 0;         // which of 0-2 are terminals (bit N: fd N)
};
// nullopt when none of fds 0-2 is a terminal (streams pass through).
util::Result<std::optional<Pty>> open_pty();

// The network filter's two listeners on 127.0.0.1, on ports the kernel
// picks.
struct Listeners {
  util::UniqueFd http, socks;
  int http_port = 0, socks_port = 0;
};
util::Result<Listeners> open_listeners();

// What the network filter's process is: this executable (found when the
// run was planned) and the libraries the loader maps for it, which its
// profile lets it read.
struct FilterImage {
  std::string exe;
  std::vector<std::string> libraries;
};
util::Result<FilterImage> filter_image();

// The ports the network filter connects out to, as `opts` says (its
// profile allows no other): the allow rules' (80 and 443 for a rule
// without one), the bound credentials' hosts', the upstream proxy's, a
// test build's stand-in addresses'.
std::vector<int> outbound_ports(const RunOptions& opts);

// Start the network filter's process (`image`, serving `listeners`),
// then `spec` under sandbox-exec, and supervise it until it ends. The
// filter's end, or a message it may not send, kills the command and ends
// the run with 125.
RunOutcome run_sandboxed(const seatbelt::SeatbeltSpec& spec, const std::string& sandbox_exec, std::optional<Pty> pty,
                         Listeners listeners, const FilterImage& image, const RunOptions& opts);

}  // namespace pj::supervisor
