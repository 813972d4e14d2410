// Profiles shipped inside the binary (profiles/*.toml, embedded at build
// time), so no file is looked up at run time.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "policy/layer.h"

namespace pj::policy {

struct EmbeddedProfile {
  std::string_view name;
  std::string_view text;
};

std::span<const EmbeddedProfile> embedded_profiles();

// The name a built-in profile's layer has ("profile pi (built in)"): where
// its entries come from in explain and in messages.
inline std::string built_in_profile_name(std::string_view name) {
  return "profile " + std::string(name) + " (built in)";
}

// The layer of the embedded profile `name` as load_layer makes it from its
// text, written as code at build time (pj-profile-gen); nullopt for
// another name, and for every name in a build that could not run
// pj-profile-gen (a cross build: then the text is parsed at run time).
std::optional<Layer> prebuilt_profile(std::string_view name);

}  // namespace pj::policy
