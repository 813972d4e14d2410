#include "doctor.h"

#include <fmt/format.h>

#include "util/json.h"

namespace pj::supervisor {

namespace {

const char* state_word(runtime::Check::State s) {
  switch (s) {
    case runtime::Check::State::ok: return "ok";
    case runtime::Check::State::missing: return "missing";
    case runtime::Check::State::info: return "info";
  }
  return "?";
}

}  // namespace

int doctor(const runtime::HostReport& r, bool json) {
  if (json) {
    util::JsonWriter j;
    j.begin_object();
    j.field("jail_possible", r.jail_possible);
    j.key("checks").begin_array();
    for (const auto& c : r.checks) {
      j.begin_object();
      j.field("name", c.name).field("state", state_word(c.state)).field("detail", c.detail).field("fix", c.fix);
      j.end_object();
    }
    j.end_array();
    j.end_object();
    fmt::print("{}", j.str());
  } else {
    for (const auto& c : r.checks) {
      fmt::print("{:8} {}: {}\n", state_word(c.state), c.name, c.detail);
      if (!c.fix.empty() && c.state == runtime::Check::State::missing) fmt::print("         fix: {}\n", c.fix);
    }
    fmt::print("\n{}\n", r.jail_possible ? "This host can build a pi-jail jail."
                                         : "This host cannot build a pi-jail jail; see the fixes above.");
  }
  return r.jail_possible ? 0 : 1;
}

}  // namespace pj::supervisor
