// The Seatbelt plan, on invented macOS hosts: golden profiles and
// parameters, injection, and the profile's shape. Runs everywhere; what
// it cannot show is what macOS enforces (see the README).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "golden.h"
#include "policy/policy.h"
#include "policy/profiles.h"
#include "runtime/request.h"
#include "seatbelt/plan.h"
#include "seatbelt/sbpl.h"
#include "seatbelt_rules.h"
#include "util/paths.h"

using namespace pj;
using namespace pj::seatbelt;

namespace {

// An invented Mac: /etc, /tmp and /var are symlinks into /private.
struct FakeMac {
  std::set<std::string> dirs, files;
  std::map<std::string, std::string> links;

  // realpath of the longest existing prefix, joined with the rest.
  std::string resolve(const std::string& path) const {
    std::string out;
    for (auto part : util::path_components(path)) {
      out += "/" + std::string(part);
      if (auto l = links.find(out); l != links.end()) out = l->second;
    }
    return out.empty() ? "/" : out;
  }
  PathFact fact(const std::string& path) const {
    PathFact f;
    f.resolved = resolve(path);
    f.is_symlink = links.count(path) > 0;
    f.kind = dirs.count(f.resolved)    ? PathFact::Kind::directory
             : files.count(f.resolved) ? PathFact::Kind::file
                                       : PathFact::Kind::absent;
    return f;
  }
  Facts facts(const PlanInput& in) const {
    Facts out;
    for (const auto& p : paths_to_probe(in)) out[p] = fact(p);
    return out;
  }
};

FakeMac mac() {
  FakeMac m;
  m.links = {{"/etc", "/private/etc"}, {"/tmp", "/private/tmp"}, {"/var", "/private/var"}};
  for (const char* d : {"/",
                        "/usr",
                        "/bin",
                        "/sbin",
                        "/private/etc",
                        "/private/etc/ssl",
                        "/private/etc/profile.d",
                        "/Users/u",
                        "/Users/u/src/proj",
                        "/Users/u/src/proj/.git",
                        "/Users/u/src/proj/.git/hooks",
                        "/Users/u/src/proj/src",
                        "/Users/u/.pi/agent",
                        "/Users/u/.pi/agent/extensions",
                        "/Users/u/.pi/agent/sessions",
                        "/Users/u/.pi/agent/sessions/--Users-u-src-proj--",
                        "/Users/u/.pi/agent/sessions/--Users-u-other--",
                        "/private/var/folders/xy/T/pi-jail.ab12",
                        "/opt/homebrew/Cellar/node/24.1.0",
                        "/opt/homebrew/lib/node_modules/@earendil-works/pi",
                        "/Users/u/data",
                        "/Users/u/data/keep",
                        "/Users/u/data/secret",
                        "/opt/tools"})
    m.dirs.insert(d);
  for (const char* f :
       {"/usr/bin/env", "/private/etc/passwd", "/private/etc/group", "/private/etc/hosts", "/private/etc/resolv.conf",
        "/private/etc/localtime", "/Users/u/src/proj/.git/config", "/Users/u/.pi/agent/settings.json",
        "/Users/u/.pi/agent/auth.json", "/opt/homebrew/lib/node_modules/@earendil-works/pi/dist/cli.js",
        "/Users/u/data/secret/key", "/Users/u/src/proj/.env"})
    m.files.insert(f);
  return m;
}

// The shipped "pi" profile resolved for user u on the invented Mac, as the
// supervisor would: workspace ~/src/proj, Pi run by node from Homebrew.
PlanInput pi_input(const FakeMac& m) {
  policy::Layer profile;
  for (const auto& p : policy::embedded_profiles())
    if (p.name == "pi") {
      auto loaded = policy::load_layer(p.text, "pi.toml", policy::Authority::profile);
      for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
      profile = loaded.layer;
    }
  policy::Context ctx{"/Users/u/src/proj",
                      "/Users/u",
                      "/Users/u/src/proj/src",
                      {{"pi_agent_dir", "/Users/u/.pi/agent"}},
                      [&m](const std::string& p) -> std::optional<std::string> {
                        auto f = m.fact(p);
                        if (f.kind == PathFact::Kind::absent) return std::nullopt;
                        return f.resolved;
                      },
                      std::nullopt};
  // Pi's sessions of this workspace, as the supervisor adds them.
  ctx.program.push_back({"/Users/u/.pi/agent/sessions/--Users-u-src-proj--",
                         {"Pi's sessions of this workspace (sessions/--Users-u-src-proj--)", 0, 0},
                         policy::Necessity::required,
                         policy::PathAccess::read_write});
  auto resolved = policy::resolve({profile}, ctx);
  REQUIRE(resolved.policy);
  PlanInput in;
  in.request.workspace = "/Users/u/src/proj";
  in.request.cwd = "/Users/u/src/proj/src";
  in.request.home = "/Users/u";
  runtime::apply_policy(*resolved.policy, in.request);
  in.request.grants.push_back(
      {"/opt/homebrew/Cellar/node/24.1.0", runtime::Access::read_only, "interpreter of pi (#!/usr/bin/env node)"});
  in.request.grants.push_back(
      {"/opt/homebrew/lib/node_modules/@earendil-works/pi", runtime::Access::read_only, "package of pi"});
  in.request.exec_path = "/opt/homebrew/lib/node_modules/@earendil-works/pi/dist/cli.js";
  in.request.argv = {"pi"};
  in.request.host_env = {"PATH=/opt/homebrew/bin:/usr/bin:/bin", "TERM=xterm-256color", "AWS_SECRET_ACCESS_KEY=x",
                         "ANTHROPIC_API_KEY=sk-test"};
  // Pi's login callbacks, as the pi profile's adapter names them
  // (pi/profile_adapter.cc).
  in.request.login_callbacks = {{53692, "Anthropic (Claude Pro/Max)", "profile pi"},
                                {1455, "OpenAI (ChatGPT Plus/Pro, Codex; Sign in with ChatGPT)", "profile pi"},
                                {1456, "Radius", "profile pi"}};
  in.tmpdir = "/private/var/folders/xy/T/pi-jail.ab12";
  in.tty = "/dev/ttys009";
  in.http_port = 50123;
  in.socks_port = 50124;
  return in;
}

// A policy with every kind of entry: a writable grant holding a kept
// read-only path two levels down and a mask, a read-only grant, forwards.
PlanInput policies_input() {
  PlanInput in;
  auto& r = in.request;
  r.workspace = "/Users/u/src/proj";
  r.cwd = "/Users/u";  // not visible: the command starts in the workspace
  r.home = "/Users/u";
  r.system = {{"/usr", "profile:1"}, {"/etc/hosts", "profile:2"}, {"/lib64", "profile:3 (absent on a Mac)"}};
  r.grants = {{"/Users/u/data", runtime::Access::read_write, "user.toml:4:1"},
              {"/opt/tools", runtime::Access::read_only, "--allow-read"}};
  r.read_only = {{"/Users/u/data/keep/sub/cfg", "user.toml:5:1", runtime::Node::file},
                 {"/Users/u/src/proj/.git/hooks", "profile:9", runtime::Node::directory}};
  r.denies = {{"/Users/u/data/secret", "user.toml:6:1"},
              {"/Users/u/src/proj/.env", "project:1:1"},
              {"/Users/u/absent", "absent: nothing to hide"}};
  r.forwards = {{runtime::Loopback::v4, 5432}, {runtime::Loopback::v6, 5432}, {runtime::Loopback::v4, 8080}};
  r.exec_path = "/usr/bin/env";
  r.argv = {"env"};
  in.tmpdir = "/private/var/folders/xy/T/pi-jail.ab12";
  in.http_port = 61000;
  in.socks_port = 61001;
  return in;
}

std::string render_params(const SeatbeltSpec& spec) {
  std::ostringstream out;
  for (const auto& p : spec.params) out << p.name << "=" << p.value << "    # " << p.why << "\n";
  out << "cwd " << spec.cwd << "\n";
  for (const auto& e : spec.env) out << "env " << e << "\n";
  return out.str();
}

// The part plan() adds after the base profile.
std::string generated(const SeatbeltSpec& spec) { return spec.profile.substr(base_profile().size()); }

const Param* param(const SeatbeltSpec& spec, const std::string& name) {
  for (const auto& p : spec.params)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> names(const SeatbeltSpec& spec) {
  std::vector<std::string> out;
  for (const auto& p : spec.params) out.push_back(p.name);
  return out;
}

}  // namespace

TEST_CASE("Seatbelt: the default Pi profile (golden profile and parameters)") {
  FakeMac m = mac();
  PlanInput in = pi_input(m);
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  check_golden("seatbelt_pi.sb", spec->profile);
  check_golden("seatbelt_pi.params", render_params(*spec));
  CHECK(check_profile(spec->profile, names(*spec)).ok());
  // Secrets stay out of the environment; the proxy is on the host's loopback.
  std::string env;
  for (const auto& e : spec->env) env += e + "\n";
  CHECK(env.find("AWS_SECRET_ACCESS_KEY") == std::string::npos);
  CHECK(env.find("ANTHROPIC_API_KEY=sk-test") != std::string::npos);
  CHECK(env.find("HTTPS_PROXY=http://127.0.0.1:50123\n") != std::string::npos);
  CHECK(env.find("TMPDIR=/private/var/folders/xy/T/pi-jail.ab12\n") != std::string::npos);
  CHECK(spec->cwd == "/Users/u/src/proj/src");
  // Of Pi's sessions only this workspace's are readable: sessions/ is
  // excluded from the agent dir's root, the workspace's directory is a
  // writable root of its own.
  const Param* hidden = param(*spec, "HIDDEN_0");
  REQUIRE(hidden);
  CHECK(hidden->value == "/Users/u/.pi/agent/sessions");
  CHECK(generated(*spec).find("(require-not (subpath (param \"HIDDEN_0\")))") != std::string::npos);
  bool own_root = false;
  for (const auto& p : spec->params)
    own_root =
        own_root || (p.name.starts_with("ROOT_") && p.value == "/Users/u/.pi/agent/sessions/--Users-u-src-proj--");
  CHECK(own_root);
  for (const auto& p : spec->params) CHECK(p.value.find("--Users-u-other--") == std::string::npos);
}

TEST_CASE("Seatbelt: grants, masks, read-only under writable and ports (golden)") {
  FakeMac m = mac();
  PlanInput in = policies_input();
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  check_golden("seatbelt_policies.sb", generated(*spec));
  check_golden("seatbelt_policies.params", render_params(*spec));
  std::string g = generated(*spec);
  // Symlinks resolved; absent system entries and masks skipped.
  REQUIRE(param(*spec, "ROOT_3"));
  CHECK(param(*spec, "ROOT_3")->value == "/private/etc/hosts");
  for (const auto& p : spec->params) {
    CHECK(p.value.find("lib64") == std::string::npos);
    CHECK(p.value != "/Users/u/absent");
  }
  // The writable grant excludes its kept path and its mask in the rule
  // itself, and denies them again after every allow.
  CHECK(g.find("(allow file-write*\n  (require-all\n    (subpath (param \"ROOT_4\"))\n"
               "    (require-not (subpath (param \"KEEP_RO_0\")))\n"
               "    (require-not (subpath (param \"MASK_0\")))))") != std::string::npos);
  // Absent: kept at its first missing component (the shared view's rule),
  // which cannot be created, nor made a link to somewhere writable.
  REQUIRE(param(*spec, "KEEP_RO_0"));
  CHECK(param(*spec, "KEEP_RO_0")->value == "/Users/u/data/keep/sub");
  CHECK(param(*spec, "MASK_0")->value == "/Users/u/data/secret");
  // The existing directories holding them inside the grant cannot be
  // renamed away.
  REQUIRE(param(*spec, "PIN_1"));
  CHECK(param(*spec, "PIN_0")->value == "/Users/u/data/keep");
  CHECK(param(*spec, "PIN_1")->value == "/Users/u/src/proj/.git");
  CHECK_FALSE(param(*spec, "PIN_2"));
  // Loopback forwards: one per port (Seatbelt names only "localhost").
  CHECK(param(*spec, "FORWARD_0")->value == "localhost:5432");
  CHECK(param(*spec, "FORWARD_1")->value == "localhost:8080");
  CHECK_FALSE(param(*spec, "FORWARD_2"));
  CHECK(param(*spec, "PROXY_HTTP")->value == "localhost:61000");
  CHECK(spec->cwd == "/Users/u/src/proj");
  CHECK(g.find("(allow network-outbound") != std::string::npos);
  CHECK(g.find("(remote tcp \"") == std::string::npos);  // ports only as parameters
}

TEST_CASE("Seatbelt: paths full of quotes, parentheses and newlines cannot change the profile") {
  FakeMac m = mac();
  PlanInput plain = policies_input();
  PlanInput hostile = plain;
  const std::string evil =
      "/Users/u/x\") (allow default) (allow file-write* (subpath \"/\")) ; \"\n(allow network*)\\#\"";
  hostile.request.workspace = evil + "/proj";
  hostile.request.grants[0].path = evil + "/data";
  hostile.request.read_only[0].path = evil + "/data/keep/sub/cfg";
  hostile.request.denies[0].path = evil + "/data/secret";
  hostile.request.read_only[1].path = evil + "/proj/.git/hooks";
  for (const char* d : {"/proj", "/proj/.git", "/proj/.git/hooks", "/data", "/data/keep", "/data/secret"})
    m.dirs.insert(evil + d);
  plain.request.workspace = "/Users/u/y/z/proj";
  plain.request.grants[0].path = "/Users/u/y/z/data";
  plain.request.read_only[0].path = "/Users/u/y/z/data/keep/sub/cfg";
  plain.request.denies[0].path = "/Users/u/y/z/data/secret";
  plain.request.read_only[1].path = "/Users/u/y/z/proj/.git/hooks";
  for (const char* d : {"/proj", "/proj/.git", "/proj/.git/hooks", "/data", "/data/keep", "/data/secret"})
    m.dirs.insert(std::string("/Users/u/y/z") + d);
  // The same shape: as many path components (the evil name has one "/").
  auto a = plan(plain, m.facts(plain));
  auto b = plan(hostile, m.facts(hostile));
  REQUIRE_MESSAGE(a.ok(), a.error().message());
  REQUIRE_MESSAGE(b.ok(), b.error().message());
  CHECK(a->profile == b->profile);  // the text does not depend on what the paths say
  CHECK(check_profile(b->profile, names(*b)).ok());
  REQUIRE(a->params.size() == b->params.size());
  size_t carried = 0;
  for (size_t i = 0; i < b->params.size(); ++i) {
    CHECK(a->params[i].name == b->params[i].name);
    carried += b->params[i].value.find(evil) == 0;
  }
  CHECK(carried >= 6);  // the hostile text travels only as -D values
  CHECK(b->profile.find("allow default") == std::string::npos);
  auto args = sandbox_exec_args(*b, "/usr/bin/sandbox-exec");
  CHECK(std::find(args.begin(), args.end(), "ROOT_0=" + evil + "/proj") != args.end());
}

TEST_CASE("Seatbelt: the profile is balanced S-expressions using only known operations and filters") {
  FakeMac m = mac();
  PlanInput in = pi_input(m);
  auto spec = plan(in, m.facts(in));
  REQUIRE(spec.ok());
  auto forms = read_sbpl(spec->profile);
  REQUIRE_MESSAGE(forms.ok(), forms.error().message());
  CHECK(forms->size() > 10);
  CHECK(check_profile(base_profile(), {}).ok());  // the base alone uses no parameter
  // The checker itself refuses what must not pass.
  auto refused = [](std::string_view text, std::vector<std::string> params = {}) {
    auto st = check_profile(text, params);
    return st.ok() ? std::string() : st.error().message();
  };
  const std::string head = "(version 1)\n(deny default)\n";
  CHECK(refused(head + "(allow file-read* (subpath \"/\")").find("not closed") != std::string::npos);
  CHECK(refused(head + "(allow file-read*))").find("closes nothing") != std::string::npos);
  CHECK(refused(head + "(allow network*)").find("unknown operation 'network*'") != std::string::npos);
  CHECK(refused(head + "(allow default)").find("only (deny default)") != std::string::npos);
  CHECK(refused(head + "(allow file-read* (path \"/\"))").find("unknown filter 'path'") != std::string::npos);
  CHECK(refused(head + "(allow file-read* (subpath (param \"X\")))").find("not a parameter") != std::string::npos);
  CHECK(refused(head + "(allow file-read* (subpath \"/\"))", {"X"}).find("X is not used") != std::string::npos);
  CHECK(refused(head + "(allow network-outbound (remote tcp \"*:443\"))").find("remote tcp takes (param") !=
        std::string::npos);
  CHECK(refused(head + "(allow file-read* (subpath \"a\nb\"))").find("past the end of its line") != std::string::npos);
  CHECK(refused("(deny default)\n(version 1)\n").find("starts with (version 1)") != std::string::npos);
  CHECK(refused(head + "(define x 1)").find("must be version, allow or deny") != std::string::npos);
  CHECK(refused(head + "(allow file-read* (require-not (subpath \"/a\") (subpath \"/b\")))").find("require-not") !=
        std::string::npos);
  // Network operations name their addresses, on the side each is checked on.
  CHECK(refused(head + "(allow network-bind)").find("(allow network-bind) names no address") != std::string::npos);
  CHECK(refused(head + "(allow network-inbound network-bind)").find("names no address") != std::string::npos);
  CHECK(refused(head + "(allow network-bind (remote tcp (param \"P\")))", {"P"})
            .find("network-bind takes (local tcp (param \"NAME\")) filters only") != std::string::npos);
  CHECK(refused(head + "(allow network-outbound (local tcp (param \"P\")))", {"P"})
            .find("network-outbound takes (remote tcp") != std::string::npos);
  CHECK(refused(head + "(allow network-bind (local tcp \"localhost:1455\"))").find("local tcp takes (param") !=
        std::string::npos);
  CHECK(refused(head + "(allow network-bind (local udp (param \"P\")))", {"P"}).find("local: only tcp") !=
        std::string::npos);
  CHECK(refused(head + "(allow network-bind network-inbound (local tcp (param \"P\")))", {"P"}).empty());
}

TEST_CASE("Seatbelt: the jail may listen only on localhost at the login callback ports, each once") {
  FakeMac m = mac();
  PlanInput in = pi_input(m);
  in.request.login_callbacks.push_back({1455, "OpenAI again", "profile pi"});
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  auto r = pj::test::sbpl_rules(spec->profile);
  const std::vector<std::string> locals{"local tcp LOGIN_CALLBACK_0", "local tcp LOGIN_CALLBACK_1",
                                        "local tcp LOGIN_CALLBACK_2"};
  CHECK(r.allowed["network-bind"] == locals);
  CHECK(r.allowed["network-inbound"] == locals);
  REQUIRE(param(*spec, "LOGIN_CALLBACK_2"));
  CHECK(param(*spec, "LOGIN_CALLBACK_0")->value == "localhost:53692");
  CHECK(param(*spec, "LOGIN_CALLBACK_1")->value == "localhost:1455");
  CHECK(param(*spec, "LOGIN_CALLBACK_2")->value == "localhost:1456");
  CHECK(param(*spec, "LOGIN_CALLBACK_0")->why == "profile pi: login callback (Anthropic (Claude Pro/Max))");
  CHECK_FALSE(param(*spec, "LOGIN_CALLBACK_3"));
  // No other rule names a local address; outbound stays as it was.
  // (No structured binding: clang 14 cannot capture one in CHECK_MESSAGE.)
  for (const auto& rule : r.allowed)
    if (rule.first != "network-bind" && rule.first != "network-inbound")
      for (const auto& f : rule.second) CHECK_MESSAGE(!f.starts_with("local "), rule.first << " " << f);
  CHECK(r.allowed["network-outbound"] == std::vector<std::string>{"remote tcp PROXY_HTTP", "remote tcp PROXY_SOCKS"});
  // The ports are parameters, never text of the profile.
  CHECK(generated(*spec).find("localhost") == std::string::npos);
  CHECK(generated(*spec).find("1455") == std::string::npos);
}

TEST_CASE("Seatbelt: without login callbacks the jail listens nowhere") {
  FakeMac m = mac();
  PlanInput in = policies_input();
  REQUIRE(in.request.login_callbacks.empty());
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  auto r = pj::test::sbpl_rules(spec->profile);
  CHECK(r.allowed.count("network-bind") == 0);
  CHECK(r.allowed.count("network-inbound") == 0);
  for (const auto& p : spec->params) CHECK_FALSE(p.name.starts_with("LOGIN_CALLBACK"));
  auto base = pj::test::sbpl_rules(std::string(base_profile()));
  CHECK(base.allowed.count("network-bind") == 0);
  CHECK(base.allowed.count("network-inbound") == 0);
  CHECK(base.allowed.count("network-outbound") == 0);
}

TEST_CASE("a login callback is free unless a forward of the policy takes its port") {
  runtime::Request r;
  r.forwards = {{runtime::Loopback::v4, 5432}, {runtime::Loopback::v6, 1455}};
  CHECK(runtime::login_callback_free(r, 53692));
  CHECK_FALSE(runtime::login_callback_free(r, 5432));
  CHECK_FALSE(runtime::login_callback_free(r, 1455));  // either family takes it
}

TEST_CASE("Seatbelt: a login callback on a forwarded or the filter's port is not listened on; port 0 stops the plan") {
  // Above 65535 cannot be said: the port is 16 bits wide.
  static_assert(std::is_same_v<decltype(runtime::Request::LoginCallback::port), std::uint16_t>);
  FakeMac m = mac();
  PlanInput in = policies_input();  // forwards 5432 and 8080; the filter on 61000 and 61001
  in.request.login_callbacks = {
      {5432, "forwarded", "profile pi"}, {61000, "the filter's", "profile pi"}, {1455, "OpenAI", "profile pi"}};
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  CHECK(pj::test::sbpl_rules(spec->profile).allowed["network-bind"] ==
        std::vector<std::string>{"local tcp LOGIN_CALLBACK_0"});
  REQUIRE(param(*spec, "LOGIN_CALLBACK_0"));
  CHECK(param(*spec, "LOGIN_CALLBACK_0")->value == "localhost:1455");
  CHECK_FALSE(param(*spec, "LOGIN_CALLBACK_1"));

  in.request.login_callbacks.push_back({0, "any free port", "profile pi"});
  auto zero = plan(in, m.facts(in));
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message().find("login callback port 0 (any free port, profile pi) is out of range") !=
        std::string::npos);
}

TEST_CASE("Seatbelt: problems are all reported; nothing is planned around them") {
  FakeMac m = mac();
  m.links["/Users/u/src/proj/.pi"] = "/Users/u/elsewhere";
  PlanInput in = policies_input();
  in.request.grants.push_back({"/Users/u/missing", runtime::Access::read_only, "--allow-read"});
  in.request.read_only.push_back({"/Users/u/src/proj/.pi", "profile:40", runtime::Node::directory});
  in.socks_port = 70000;
  auto spec = plan(in, m.facts(in));
  REQUIRE_FALSE(spec.ok());
  const std::string msg = spec.error().message();
  CHECK(msg.find("--allow-read /Users/u/missing: no such file or directory") != std::string::npos);
  CHECK(msg.find("/Users/u/src/proj/.pi is a symlink") != std::string::npos);
  CHECK(msg.find("port 70000 is out of range") != std::string::npos);
}

// The rule the Linux jail had and Seatbelt lacked, now one rule in the
// shared view: a kept path below a writable root must not be reached
// through a symlink the jail could repoint.
TEST_CASE("Seatbelt: a symlink between a writable root and a kept path stops the run, naming it") {
  FakeMac m = mac();
  m.links["/Users/u/src/proj/.git"] = "/Users/u/elsewhere-git";
  m.dirs.insert("/Users/u/elsewhere-git");
  m.dirs.insert("/Users/u/elsewhere-git/hooks");
  PlanInput in = policies_input();
  auto spec = plan(in, m.facts(in));
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().message().find("/Users/u/src/proj/.git is a symlink, and /Users/u/src/proj/.git/hooks below it "
                                    "must stay read-only (profile:9)") != std::string::npos);
}

TEST_CASE("Seatbelt: a mask below a system path reached through a link (/etc -> /private/etc) is kept") {
  FakeMac m = mac();
  m.dirs.insert("/private/etc/ssl/private");
  PlanInput in = policies_input();
  in.request.system.push_back({"/etc/ssl", "profile:4"});
  in.request.denies.push_back({"/etc/ssl/private", "profile:5"});
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  bool masked = false, shown = false;
  for (const auto& p : spec->params) {
    masked = masked || (p.name.starts_with("MASK_") && p.value == "/private/etc/ssl/private");
    shown = shown || (p.name.starts_with("ROOT_") && p.value == "/private/etc/ssl");
  }
  CHECK(shown);
  CHECK(masked);
}

// The base profile reads system trees that are no place of the view
// (/System, the command-line tools), and a deny over a narrower grant came
// last and won on macOS: every existing deny stays a mask.
TEST_CASE("Seatbelt: a deny under a tree only the base profile reads, and a deny over a narrower grant, stay masks") {
  FakeMac m = mac();
  m.dirs.insert("/Library/Developer/CommandLineTools/secret");
  m.dirs.insert("/Users/u/d");
  m.files.insert("/Users/u/d/f");
  PlanInput in = policies_input();
  in.request.denies.push_back({"/Library/Developer/CommandLineTools/secret", "--deny"});
  in.request.denies.push_back({"/Users/u/d", "--deny"});
  in.request.grants.push_back({"/Users/u/d/f", pj::runtime::Access::read_only, "--allow-read"});
  auto spec = plan(in, m.facts(in));
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  std::set<std::string> masks;
  for (const auto& p : spec->params)
    if (p.name.starts_with("MASK_")) masks.insert(p.value);
  CHECK(masks.count("/Library/Developer/CommandLineTools/secret") == 1);
  CHECK(masks.count("/Users/u/d") == 1);
}

TEST_CASE("Seatbelt: sandbox-exec's arguments: profile, parameters, then the command") {
  FakeMac m = mac();
  PlanInput in = policies_input();
  in.request.argv = {"env", "-i", "--", "x"};
  auto spec = plan(in, m.facts(in));
  REQUIRE(spec.ok());
  auto args = sandbox_exec_args(*spec, "/usr/bin/sandbox-exec");
  REQUIRE(args.size() == 3 + 2 * spec->params.size() + 1 + 4);
  CHECK(args[0] == "/usr/bin/sandbox-exec");
  CHECK(args[1] == "-p");
  CHECK(args[2] == spec->profile);
  CHECK(args[3] == "-D");
  CHECK(args[4] == spec->params[0].name + "=" + spec->params[0].value);
  size_t dashes = 3 + 2 * spec->params.size();
  CHECK(args[dashes] == "--");
  CHECK(args[dashes + 1] == "/usr/bin/env");
  CHECK(args[dashes + 2] == "-i");
  CHECK(args[dashes + 3] == "--");
  CHECK(args[dashes + 4] == "x");
}
