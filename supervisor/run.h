#pragma once

#include "linuxjail/spec.h"

namespace pj::supervisor {

// The signals the supervisor forwards to the jail. Block them (before
// cloning the jail) with block_forwarded_signals().
void block_forwarded_signals();

// Launch the jail for `spec` and supervise it until it ends. Returns the
// exit status for pi-jail (see DESIGN.md: the command's, 128+N, 125-127).
int run_jailed(const linuxjail::JailSpec& spec);

// --unsandboxed: announce loudly, then exec the command in place.
[[noreturn]] void exec_unsandboxed(const std::string& path, const std::vector<std::string>& argv);

}  // namespace pj::supervisor
