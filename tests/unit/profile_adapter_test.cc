// What a profile adds to preparing a run comes through the adapter the
// profile chose (runtime/profile_adapter.h, pi/profile_adapter.h); the
// resolver checks a directory the caller places whatever its name.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>

#include "pi/profile_adapter.h"
#include "policy/layer.h"
#include "policy/policy.h"
#include "temp_dir.h"

using namespace pj;

namespace {

// $PI_CODING_AGENT_DIR unset for the length of a test, then as it was.
struct NoAgentDirVariable {
  std::optional<std::string> saved;
  NoAgentDirVariable() {
    if (const char* v = ::getenv("PI_CODING_AGENT_DIR")) saved = v;
    ::unsetenv("PI_CODING_AGENT_DIR");
  }
  ~NoAgentDirVariable() {
    if (saved) ::setenv("PI_CODING_AGENT_DIR", saved->c_str(), 1);
  }
};

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string var(const policy::Places& places, const std::string& name) {
  auto it = std::find_if(places.vars.begin(), places.vars.end(), [&](const auto& v) { return v.first == name; });
  return it == places.vars.end() ? "(unset)" : it->second;
}

}  // namespace

TEST_CASE("the pi profile's adapter makes Pi's agent dir and names it as a directory the caller places") {
  NoAgentDirVariable no_var;
  test::TempDir home;
  policy::Places places{.workspace = home.path + "/proj", .home = home.path, .cwd = home.path + "/proj"};
  auto adapter = pi::profile_adapter("pi");
  REQUIRE(adapter->place(places, {.home_real = home.path}));
  CHECK(is_dir(home.path + "/.pi/agent"));
  CHECK(var(places, "pi_agent_dir") == home.path + "/.pi/agent");
  REQUIRE(places.placed.size() == 1);
  CHECK(places.placed[0].var == "pi_agent_dir");
}

TEST_CASE("another profile's adapter defines ${pi_agent_dir} and makes nothing") {
  NoAgentDirVariable no_var;
  test::TempDir home;
  for (const char* profile : {"builtin", "/etc/pi-jail/mine.toml", "Pi", ""}) {
    CAPTURE(profile);
    policy::Places places{.workspace = home.path + "/proj", .home = home.path, .cwd = home.path + "/proj"};
    auto adapter = pi::profile_adapter(profile);
    REQUIRE(adapter->place(places, {.home_real = home.path}));
    CHECK_FALSE(is_dir(home.path + "/.pi"));
    CHECK(var(places, "pi_agent_dir") == home.path + "/.pi/agent");
    runtime::Request in;
    runtime::ProfileHints hints;
    adapter->shape(in, hints);
    CHECK(in.env_set.empty());
    CHECK(in.private_hidden.empty());
    CHECK(in.login_callbacks.empty());
    CHECK_FALSE(hints.keep_new_dirs);
  }
}

TEST_CASE("the pi profile's adapter names the ports of Pi's login callbacks, as data, and no other port") {
  NoAgentDirVariable no_var;
  test::TempDir home;
  policy::Places places{.workspace = home.path + "/proj", .home = home.path, .cwd = home.path + "/proj"};
  auto adapter = pi::profile_adapter("pi");
  REQUIRE(adapter->place(places, {.home_real = home.path}));
  runtime::Request in;
  runtime::ProfileHints hints;
  adapter->shape(in, hints);
  std::vector<std::uint16_t> ports;
  for (const auto& c : in.login_callbacks) {
    ports.push_back(c.port);
    CHECK_FALSE(c.what.empty());
    CHECK(c.source == "profile pi");
  }
  // anthropic.js (53692), openai-codex.js and openai-chatgpt.js (1455),
  // radius.js (1456) of Pi 1.4.0 and 1.6.0.
  CHECK(ports == std::vector<std::uint16_t>{53692, 1455, 1456});
}

TEST_CASE("only the pi profile's adapter tells Pi where its agent dir is and hides other projects' sessions") {
  NoAgentDirVariable no_var;
  test::TempDir home;
  policy::Places places{.workspace = home.path + "/proj", .home = home.path, .cwd = home.path + "/proj"};
  auto adapter = pi::profile_adapter("pi");
  REQUIRE(adapter->place(places, {.home_real = home.path}));
  runtime::Request in;
  in.workspace = places.workspace;
  runtime::ProfileHints hints;
  adapter->shape(in, hints);
  REQUIRE(in.env_set.size() == 1);
  CHECK(in.env_set[0].first == "PI_CODING_AGENT_DIR");
  CHECK(in.env_set[0].second == home.path + "/.pi/agent");
  CHECK(in.private_hidden == std::vector<std::string>{home.path + "/.pi/agent/sessions"});
  CHECK(hints.keep_new_dirs);
}

TEST_CASE("the pi profile's adapter refuses Pi's agent dir where it would make the home directory writable") {
  test::TempDir home;
  NoAgentDirVariable no_var;
  ::setenv("PI_CODING_AGENT_DIR", home.path.c_str(), 1);
  policy::Places places{.workspace = home.path + "/proj", .home = home.path, .cwd = home.path + "/proj"};
  auto placed = pi::profile_adapter("pi")->place(places, {.home_real = home.path});
  REQUIRE_FALSE(placed);
  CHECK(placed.error().message().find("it is your home directory or contains it") != std::string::npos);
  CHECK(places.vars.empty());
}

TEST_CASE("a directory the caller places answers to the system write limit whatever its variable is named") {
  auto loaded = [](const char* text, const char* name, policy::Authority a) {
    auto l = policy::load_layer(text, name, a);
    REQUIRE(l.errors.empty());
    return l.layer;
  };
  std::vector<policy::Layer> layers{
      loaded("[filesystem]\nwrite = [\"${tool_dir}/data/\"]\n", "profile t", policy::Authority::profile),
      loaded("[limits]\nwrite = [\"/home/u\"]\n", "/etc/pi-jail/policy.toml", policy::Authority::system)};
  policy::Context ctx{"/home/u/proj",
                      "/home/u",
                      "/home/u/proj",
                      {{"tool_dir", "/srv/tool"}},
                      [](const std::string& p) -> std::optional<std::string> { return p; },
                      std::nullopt};
  // Not placed by the caller: an operator's path like any other (granted).
  CHECK(policy::resolve(layers, ctx).errors.empty());
  ctx.placed = {{"tool_dir", "The tool's dir", "$TOOL_DIR", "set TOOL_DIR within it"}};
  auto out = policy::resolve(layers, ctx);
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0].message ==
        "The tool's dir /srv/tool ($TOOL_DIR) is outside the system operator's write limit (limit: "
        "/etc/pi-jail/policy.toml:2:10); set TOOL_DIR within it");
}
