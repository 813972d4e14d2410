#pragma once

namespace pj::supervisor {

// `pi-jail doctor`: 0 when this host can build a jail, 1 otherwise.
int doctor(bool json);

}  // namespace pj::supervisor
