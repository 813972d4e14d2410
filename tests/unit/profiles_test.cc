// The profiles built into pi-jail (profiles/embed.py leaves their comments
// out) are the files in profiles/: the same values, each at the file's line
// and column, so that errors and explain point into the file.
#include <doctest/doctest.h>
#include "thirdparty/toml.h"

#include <fstream>
#include <sstream>
#include <string>

#include "policy/profiles.h"

namespace {

void same_positions(const toml::node& a, const toml::node& b, const std::string& path) {
  CAPTURE(path);
  CHECK(a.type() == b.type());
  CHECK(a.source().begin == b.source().begin);
  CHECK(a.source().end == b.source().end);
  if (const toml::table* ta = a.as_table()) {
    const toml::table* tb = b.as_table();
    REQUIRE(tb);
    REQUIRE(ta->size() == tb->size());
    for (auto&& [key, value] : *ta) {
      auto it = tb->find(key.str());
      REQUIRE(it != tb->end());
      CHECK(key.source().begin == it->first.source().begin);
      same_positions(value, it->second, path + "." + std::string(key.str()));
    }
  } else if (const toml::array* aa = a.as_array()) {
    const toml::array* ab = b.as_array();
    REQUIRE(ab);
    REQUIRE(aa->size() == ab->size());
    for (size_t i = 0; i < aa->size(); ++i) same_positions((*aa)[i], (*ab)[i], path + "[" + std::to_string(i) + "]");
  }
}

}  // namespace

TEST_CASE("each built-in profile is its file without comments: same values at the same lines and columns") {
  int profiles = 0;
  for (const auto& p : pj::policy::embedded_profiles()) {
    CAPTURE(p.name);
    const std::string path = std::string(PJ_SOURCE_DIR) + "/profiles/" + std::string(p.name) + ".toml";
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "missing " << path);
    std::stringstream file;
    file << in.rdbuf();
    const toml::table from_file = toml::parse(file.str(), std::string_view(path));
    const toml::table built_in = toml::parse(p.text, std::string_view(path));
    CHECK(built_in == from_file);
    same_positions(built_in, from_file, std::string(p.name));
    CHECK(p.text.size() < file.str().size());  // the comments are left out
    ++profiles;
  }
  CHECK(profiles >= 2);
}

TEST_CASE("each built-in profile's layer made at build time is the one load_layer makes from its text") {
  // pj-profile-gen writes each layer as code, so that a run parses no TOML;
  // a field it forgot, or wrote wrong, differs here.
  size_t checked = 0;
  for (const auto& p : pj::policy::embedded_profiles()) {
    CAPTURE(p.name);
    auto built = pj::policy::prebuilt_profile(p.name);
#ifndef PJ_PREBUILT_PROFILES
    CHECK_FALSE(built);  // a cross build: each profile is parsed at run time
    ++checked;
    continue;
#endif
    REQUIRE(built);
    auto parsed =
        pj::policy::load_layer(p.text, pj::policy::built_in_profile_name(p.name), pj::policy::Authority::profile);
    REQUIRE(parsed.errors.empty());
    CHECK(*built == parsed.layer);
    CHECK(built->name == "profile " + std::string(p.name) + " (built in)");
    const bool written = !built->system.empty() || !built->deny.empty();
    CHECK(written);  // something was
    ++checked;
  }
  CHECK(checked == 2);  // pi and builtin
  CHECK_FALSE(pj::policy::prebuilt_profile("no-such-profile"));
}
