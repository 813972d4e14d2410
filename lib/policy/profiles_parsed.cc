// prebuilt_profile() where pj-profile-gen cannot run (a cross build): no
// layer is made at build time, so every profile is parsed at run time.
#include "policy/profiles.h"

namespace pj::policy {

std::optional<Layer> prebuilt_profile(std::string_view) { return std::nullopt; }

}  // namespace pj::policy
