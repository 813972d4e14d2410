// A policy file: the TOML loader, then resolution with ${...} and ~
// expansion, as a project's .pi/jail.toml (the jail can write it) or an
// operator's file (the first byte chooses whose).
#include <string>

#include "fuzz.h"
#include "policy/layer.h"
#include "policy/policy.h"

using namespace pj::policy;

namespace {

const Authority kAuthorities[] = {Authority::project, Authority::user, Authority::system, Authority::command_line};

// Paths exist as written: resolution follows no link here.
std::optional<std::string> as_written(const std::string& p) {
  if (p.empty() || p.front() != '/') return std::nullopt;
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  const Authority who = kAuthorities[pj::fuzz::take_byte(in) % std::size(kAuthorities)];
  Loaded loaded = load_layer(in, "fuzz.toml", who);
  for (const auto& e : loaded.errors)
    if (e.message.empty()) pj::fuzz::broken("an error without a message");
  if (!loaded.errors.empty()) return 0;
  Context ctx{"/home/u/proj", "/home/u",   "/home/u/proj", {{"pi_agent_dir", "/home/u/.pi/agent"}},
              as_written,     std::nullopt};
  Resolved r = resolve({loaded.layer}, ctx);
  if (r.policy.has_value() != r.errors.empty()) pj::fuzz::broken("a policy with errors, or none without");
  return 0;
}
