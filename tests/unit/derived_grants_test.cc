// What pi-jail derives for a run (what the program needs: policy::ProgramNeed;
// the grants in Pi's agent dir) enters the policy through resolve(): with
// its provenance, after denies, within the system operator's limits, and
// listed by explain. An invented filesystem: no privileges, no real paths.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "pi/profile_adapter.h"
#include "policy/explain.h"
#include "policy/policy.h"

using namespace pj::policy;

namespace {

// Every path listed exists and is its own real path (no links).
struct Exists {
  std::set<std::string> paths;
  std::optional<std::string> operator()(const std::string& p) const {
    if (!paths.count(p)) return std::nullopt;
    return p;
  }
};

const Exists kHost{{"/", "/usr", "/usr/lib/node_modules", "/home/u", "/home/u/proj", "/home/u/.nvm/versions/node/v22",
                    "/home/u/.npm-global/lib/node_modules", "/home/u/.cargo/bin/rg", "/opt/node", "/proc/self", "/etc",
                    "/srv/secret/node"}};

Context context() {
  Context ctx{"/home/u/proj", "/home/u", "/home/u/proj", {}, kHost, std::nullopt};
  return ctx;
}

Layer layer(const std::string& text, const std::string& name, Authority a) {
  auto loaded = load_layer(text, name, a);
  for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
  return loaded.layer;
}

const char* kProfile = "[filesystem]\nsystem = [\"/usr\"]\n";

ProgramNeed need(std::string path, std::string why, Necessity necessity = Necessity::required) {
  return {std::move(path), {std::move(why), 0, 0}, necessity};
}

const Policy::PathGrant* grant(const Resolved& r, const std::string& path) {
  if (!r.policy) return nullptr;
  for (const auto& g : r.policy->grants())
    if (g.path == path) return &g;
  return nullptr;
}

}  // namespace

TEST_CASE("the program's needs arrive through resolve: read-only, with their provenance, listed by explain") {
  auto ctx = context();
  ctx.program = {need("/home/u/.npm-global/lib/node_modules", "runtime: pi itself"),
                 need("/home/u/.nvm/versions/node/v22", "runtime: interpreter of pi (#!/usr/bin/env node)"),
                 need("/home/u/.cargo/bin/rg", "Pi's rg (found on PATH)", Necessity::optional)};
  auto r = resolve({layer(kProfile, "pi.toml", Authority::profile)}, ctx);
  REQUIRE(r.policy);
  CHECK(r.errors.empty());
  CHECK(r.refused.empty());
  for (const auto& n : ctx.program) {
    CAPTURE(n.path);
    const auto* g = grant(r, n.path);
    REQUIRE(g);
    CHECK(g->access == PathAccess::read_only);
    CHECK(g->by == Authority::program);
    CHECK(g->src.str() == n.src.file);
  }
  // In the order found, after the layers' own grants.
  REQUIRE(r.policy->grants().size() == 3);
  CHECK(r.policy->grants()[1].path == "/home/u/.nvm/versions/node/v22");

  ExplainInput ex;
  ex.policy = &*r.policy;
  ex.resolved = &r;
  ex.workspace = ctx.workspace;
  const std::string text = explain_text(ex);
  CHECK(text.find("read-only       /home/u/.nvm/versions/node/v22                runtime: interpreter of pi "
                  "(#!/usr/bin/env node)\n") != std::string::npos);
  const std::string json = explain_json(ex);
  CHECK(json.find("\"path\": \"/home/u/.nvm/versions/node/v22\"") != std::string::npos);
  CHECK(json.find("\"file\": \"runtime: interpreter of pi (#!/usr/bin/env node)\"") != std::string::npos);

  // No program (explain): nothing derived, nothing else changes.
  ctx.program.clear();
  auto none = resolve({layer(kProfile, "pi.toml", Authority::profile)}, ctx);
  REQUIRE(none.policy);
  CHECK(none.policy->grants().empty());
}

TEST_CASE("the system operator's read limit bounds the program's needs: a required one is an error naming it") {
  const std::string system = "[limits]\nread = [\"/home/u/proj\", \"/opt\"]\n";
  auto ctx = context();
  ctx.program = {need("/home/u/.nvm/versions/node/v22", "runtime: interpreter of pi (#!/usr/bin/env node)"),
                 need("/usr/lib/node_modules", "runtime: pi itself"),  // in the system view: shown anyway
                 need("/opt/node", "runtime: interpreter of node")};
  auto r = resolve(
      {layer(kProfile, "pi.toml", Authority::profile), layer(system, "/etc/pi-jail/policy.toml", Authority::system)},
      ctx);
  CHECK_FALSE(r.policy);
  REQUIRE(r.errors.size() == 1);
  const std::string e = r.errors[0].str();
  CHECK(e.find("runtime: interpreter of pi (#!/usr/bin/env node): the program needs /home/u/.nvm/versions/node/v22 "
               "read-only, and it cannot be granted: /home/u/.nvm/versions/node/v22 is outside the system operator's "
               "read limit") != std::string::npos);
  CHECK(e.find("(limit: /etc/pi-jail/policy.toml:2:9)") != std::string::npos);

  // Within the limit, or within the system view: granted.
  ctx.program.erase(ctx.program.begin());
  auto ok = resolve(
      {layer(kProfile, "pi.toml", Authority::profile), layer(system, "/etc/pi-jail/policy.toml", Authority::system)},
      ctx);
  REQUIRE(ok.policy);
  CHECK(grant(ok, "/opt/node"));
  CHECK(grant(ok, "/usr/lib/node_modules"));

  // A write limit covers reads too; the user file's limits bound the
  // project only, as for every grant.
  ctx.program = {need("/home/u/.nvm/versions/node/v22", "runtime: interpreter of pi")};
  auto by_write = resolve({layer(kProfile, "pi.toml", Authority::profile),
                           layer(system + "write = [\"/home/u\"]\n", "/etc/pi-jail/policy.toml", Authority::system)},
                          ctx);
  CHECK(grant(by_write, "/home/u/.nvm/versions/node/v22"));
  auto by_user =
      resolve({layer(kProfile, "pi.toml", Authority::profile), layer(system, "user.toml", Authority::user)}, ctx);
  CHECK(grant(by_user, "/home/u/.nvm/versions/node/v22"));
}

TEST_CASE("an optional need the policy excludes is a refusal by the program, not an error") {
  auto ctx = context();
  ctx.program = {need("/home/u/.cargo/bin/rg", "Pi's rg (found on PATH)", Necessity::optional)};
  auto r = resolve({layer(kProfile, "pi.toml", Authority::profile),
                    layer("[limits]\nread = [\"/home/u/proj\"]\n", "/etc/pi-jail/policy.toml", Authority::system)},
                   ctx);
  REQUIRE(r.policy);
  CHECK_FALSE(grant(r, "/home/u/.cargo/bin/rg"));
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].by == Authority::program);
  CHECK(r.refused[0].str() ==
        "Pi's rg (found on PATH): read /home/u/.cargo/bin/rg: /home/u/.cargo/bin/rg is outside "
        "the system operator's read limit; add it to [limits] read there, or run a program "
        "installed within the limit (limit: /etc/pi-jail/policy.toml:2:9)");
}

TEST_CASE("a need that is masked, missing, the whole host or a tree the jail makes is never granted") {
  struct Case {
    std::string path;
    std::string policy;  // an operator's layer
    std::string reason;
  } cases[] = {
      {"/srv/secret/node", "[filesystem]\ndeny = [\"/srv/secret\"]\n",
       "/srv/secret/node is denied (limit: /etc/pi-jail/policy.toml:2:9)"},
      {"/home/u/gone", "", "it does not exist"},
      {"/", "", "it is / (the whole host)"},
      {"/proc/self", "", "the jail has its own /proc"},
      {"/etc", "", "the jail shows a chosen set of /etc files"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    auto ctx = context();
    ctx.program = {need(c.path, "runtime: node itself")};
    std::vector<Layer> layers{layer(kProfile, "pi.toml", Authority::profile)};
    if (!c.policy.empty()) layers.push_back(layer(c.policy, "/etc/pi-jail/policy.toml", Authority::system));
    auto r = resolve(layers, ctx);
    CHECK_FALSE(r.policy);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str().starts_with("runtime: node itself: the program needs " + c.path));
    CHECK(r.errors[0].message.find(c.reason) != std::string::npos);

    ctx.program[0].necessity = Necessity::optional;  // optional: refused, the rest runs
    auto optional = resolve(layers, ctx);
    REQUIRE(optional.policy);
    CHECK_FALSE(grant(optional, c.path));
    REQUIRE(optional.refused.size() == 1);
    CHECK(optional.refused[0].by == Authority::program);
  }
}

TEST_CASE(
    "Pi's agent dir is where the caller puts it: what the profile writes there is within the system write limit") {
  // The pi profile's own entries for ${pi_agent_dir}.
  const char* pi =
      "[filesystem]\nprivate = [\"${pi_agent_dir}\"]\nwrite = [\"${pi_agent_dir}/sessions/\"]\n"
      "write_back = [\"${pi_agent_dir}/auth.json\"]\n";
  Exists fs = kHost;
  for (const char* p : {"/home/u/.pi/agent", "/home/u/.pi/agent/sessions", "/srv/agent", "/srv/agent/sessions"})
    fs.paths.insert(p);
  auto ctx_at = [&](const std::string& agent) {
    Context ctx{"/home/u/proj", "/home/u", "/home/u/proj", {{"pi_agent_dir", agent}}, fs, std::nullopt};
    ctx.placed = {pj::pi::agent_dir_placed()};  // as the pi profile's adapter places it
    return ctx;
  };
  const std::string system = "[limits]\nwrite = [\"/home/u\"]\n";
  auto layers = [&] {
    return std::vector<Layer>{layer(pi, "profile pi (built in)", Authority::profile),
                              layer(system, "/etc/pi-jail/policy.toml", Authority::system)};
  };
  // Within the limit: granted, with the profile's sources.
  auto ok = resolve(layers(), ctx_at("/home/u/.pi/agent"));
  REQUIRE(ok.policy);
  const auto* sessions = grant(ok, "/home/u/.pi/agent/sessions");
  REQUIRE(sessions);
  CHECK(sessions->src.str() == "profile pi (built in):3:10");

  // PI_CODING_AGENT_DIR=/srv/agent, outside it: the run stops, naming the dir and the limit.
  auto out = resolve(layers(), ctx_at("/srv/agent"));
  CHECK_FALSE(out.policy);
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0].str() ==
        "profile pi (built in):3:10: Pi's agent dir /srv/agent ($PI_CODING_AGENT_DIR, else "
        "~/.pi/agent) is outside the system operator's write limit (limit: "
        "/etc/pi-jail/policy.toml:2:10); set PI_CODING_AGENT_DIR to a directory within it");

  // No system write limit: anywhere, as before.
  auto free = resolve({layer(pi, "profile pi (built in)", Authority::profile)}, ctx_at("/srv/agent"));
  REQUIRE(free.policy);
  CHECK(grant(free, "/srv/agent/sessions"));
}
