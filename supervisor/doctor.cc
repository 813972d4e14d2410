#include "doctor.h"

#include <fmt/format.h>

#include "linuxjail/host.h"

namespace pj::supervisor {

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += c;
    }
  }
  return out + "\"";
}

const char* state_word(linuxjail::Check::State s) {
  switch (s) {
    case linuxjail::Check::State::ok: return "ok";
    case linuxjail::Check::State::missing: return "missing";
    case linuxjail::Check::State::info: return "info";
  }
  return "?";
}

}  // namespace

int doctor(bool json) {
  linuxjail::HostReport r = linuxjail::probe_host();
  if (json) {
    fmt::print("{{\"jail_possible\": {}, \"checks\": [", r.jail_possible);
    for (size_t i = 0; i < r.checks.size(); ++i) {
      const auto& c = r.checks[i];
      fmt::print("{}\n  {{\"name\": {}, \"state\": \"{}\", \"detail\": {}, \"fix\": {}}}", i ? "," : "",
                 json_string(c.name), state_word(c.state), json_string(c.detail), json_string(c.fix));
    }
    fmt::print("\n]}}\n");
  } else {
    for (const auto& c : r.checks) {
      fmt::print("{:8} {}: {}\n", state_word(c.state), c.name, c.detail);
      if (!c.fix.empty() && c.state == linuxjail::Check::State::missing) fmt::print("         fix: {}\n", c.fix);
    }
    fmt::print("\n{}\n", r.jail_possible ? "This host can build a pi-jail jail."
                                         : "This host cannot build a pi-jail jail; see the fixes above.");
  }
  return r.jail_possible ? 0 : 1;
}

}  // namespace pj::supervisor
