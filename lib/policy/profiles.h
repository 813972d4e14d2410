// Profiles shipped inside the binary (profiles/*.toml, embedded at build
// time), so no file is looked up at run time.
#pragma once

#include <span>
#include <string_view>

namespace pj::policy {

struct EmbeddedProfile {
  std::string_view name;
  std::string_view text;
};

std::span<const EmbeddedProfile> embedded_profiles();

}  // namespace pj::policy
