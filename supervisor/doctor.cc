#include "doctor.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "util/json.h"
#include "util/log.h"

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

// "NoNewPrivs:\t1" in /proc/self/status; true where there is no /proc to
// ask (macOS: PI_JAIL alone decides).
bool no_new_privs_or_unknown() {
  std::ifstream status("/proc/self/status");
  if (!status) return true;
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("NoNewPrivs:")) return line.find('1') != std::string::npos;
  return true;
}

}  // namespace

JailEvidence jail_evidence() {
  const char* v = std::getenv("PI_JAIL");
  JailEvidence e;
  e.pi_jail_env = v && std::string_view(v) == "1";
  e.no_new_privs = no_new_privs_or_unknown();
  return e;
}

int doctor(const runtime::HostReport& r, bool json, const JailEvidence& evidence) {
  // Every pi-jail jail sets PI_JAIL=1 and no_new_privs; the variable alone
  // (an --unsandboxed run passes the host's environment) is not enough.
  const bool inside = evidence.pi_jail_env && evidence.no_new_privs;
  if (json) {
    util::JsonWriter j;
    j.begin_object();
    j.field("jail_possible", r.jail_possible);
    j.field("inside_pi_jail", inside);
    j.key("checks").begin_array();
    for (const auto& c : r.checks) {
      j.begin_object();
      j.field("name", c.name).field("state", state_word(c.state)).field("detail", c.detail).field("fix", c.fix);
      j.end_object();
    }
    j.end_array();
    j.end_object();
    util::out("{}", j.str());
    return r.jail_possible ? 0 : 1;
  }
  if (inside)
    util::out(
        "{:8} inside a pi-jail jail: PI_JAIL=1 and no_new_privs are set; the checks below describe this jail, "
        "not the host\n",
        "info");
  for (const auto& c : r.checks) {
    util::out("{:8} {}: {}\n", state_word(c.state), c.name, c.detail);
    // Inside a jail a missing feature is the jail's doing (its syscall
    // filter refuses what a nested jail needs), not the host's: the
    // host's fixes would mislead.
    if (!inside && !c.fix.empty() && c.state == runtime::Check::State::missing) util::out("         fix: {}\n", c.fix);
  }
  if (inside && !r.jail_possible)
    util::out(
        "\nThis is already a pi-jail jail, and jails do not nest here (the jail's syscall filter refuses the new "
        "namespaces a jail needs; a policy can allow them with unsafe_nested_user_namespaces). To check the "
        "host, run `pi-jail doctor` outside the jail.\n");
  else
    util::out("\n{}\n", r.jail_possible ? inside ? "This jail can build a nested pi-jail jail."
                                                 : "This host can build a pi-jail jail."
                                        : "This host cannot build a pi-jail jail; see the fixes above.");
  return r.jail_possible ? 0 : 1;
}

}  // namespace pj::supervisor
