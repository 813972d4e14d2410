// Policy loading and resolution, on invented files and an invented
// filesystem: no privileges, no real paths.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include "golden.h"
#include "policy/explain.h"
#include "policy/policy.h"
#include "thirdparty/toml.h"

using namespace pj::policy;

namespace {

// A pretend filesystem: paths that exist, and symlinks (absolute targets).
struct FakeFs {
  std::set<std::string> exists;
  std::map<std::string, std::string> links;

  std::optional<std::string> realpath(const std::string& p) const {
    std::string cur;
    std::string rest = p;
    for (int hops = 0; hops < 40; ++hops) {
      cur.clear();
      size_t i = 1;
      bool relinked = false;
      while (i <= rest.size()) {
        size_t j = rest.find('/', i);
        if (j == std::string::npos) j = rest.size();
        cur += "/" + rest.substr(i, j - i);
        if (auto l = links.find(cur); l != links.end()) {
          rest = l->second + rest.substr(j);
          relinked = true;
          break;
        }
        i = j + 1;
      }
      if (!relinked) break;
    }
    if (!exists.count(rest)) return std::nullopt;
    return rest;
  }
};

FakeFs host() {
  FakeFs fs;
  for (const char* p : {"/", "/usr", "/etc", "/etc/ssl", "/home/u", "/home/u/.ssh", "/home/u/proj", "/home/u/proj/src",
                        "/home/u/proj/.env", "/home/u/.cache", "/opt/tools", "/srv/data", "/home/u/x"})
    fs.exists.insert(p);
  fs.links["/home/u/proj/escape"] = "/home/u/.ssh";
  fs.links["/home/u/proj/inside"] = "/home/u/proj/src";
  return fs;
}

Context context(const FakeFs& fs) {
  return Context{"/home/u/proj",
                 "/home/u",
                 "/home/u/proj",
                 {{"pi_agent_dir", "/home/u/.pi/agent"}},
                 [&fs](const std::string& p) { return fs.realpath(p); },
                 std::nullopt};
}

Layer layer(const std::string& text, const std::string& name, Authority a) {
  auto loaded = load_layer(text, name, a);
  for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
  return loaded.layer;
}

const char* kProfile = R"(
[filesystem]
system = ["/usr"]
deny = ["${workspace}/.env"]
[limits]
read = ["${workspace}", "/opt"]
write = ["${workspace}"]
network = ["*.npmjs.org", "pypi.org:443"]
env = ["NPM_*", "DEBUG"]
)";

Resolved resolve_with(const std::string& project, const std::string& user = "", const std::string& system = "") {
  static FakeFs fs = host();
  std::vector<Layer> layers{layer(kProfile, "pi.toml", Authority::profile)};
  if (!system.empty()) layers.push_back(layer(system, "/etc/pi-jail/policy.toml", Authority::system));
  if (!user.empty()) layers.push_back(layer(user, "user.toml", Authority::user));
  layers.push_back(layer(project, ".pi/jail.toml", Authority::project));
  return resolve(layers, context(fs));
}

bool has_grant(const Resolved& r, const std::string& path, PathAccess a) {
  if (!r.policy) return false;
  for (const auto& g : r.policy->grants())
    if (g.path == path && g.access == a) return true;
  return false;
}

}  // namespace

TEST_CASE("project requests beyond the limits are refused and reported with both sources") {
  struct Case {
    const char* name;
    std::string project;
    std::string what;    // in the refusal
    std::string reason;  // in the refusal
  } cases[] = {
      {"more network", "[network]\nallow = [\"evil.example\"]\n", "network evil.example", "outside the network limit"},
      {"the apex of a wildcard limit", "[network]\nallow = [\"npmjs.org\"]\n", "network npmjs.org",
       "outside the network limit"},
      {"a wildcard wider than the limit", "[network]\nallow = [\"*.js.org\"]\n", "network *.js.org",
       "outside the network limit"},
      {"another port", "[network]\nallow = [\"pypi.org:22\"]\n", "network pypi.org:22", "outside the network limit"},
      {"write outside the workspace", "[filesystem]\nwrite = [\"~/x\"]\n", "write ~/x", "outside the write limit"},
      {"write into a read-only limit", "[filesystem]\nwrite = [\"/opt/tools\"]\n", "write /opt/tools",
       "outside the write limit"},
      {"lift a deny", "[filesystem]\nread = [\".env\"]\n", "read .env", "is denied"},
      {"a symlink out of the limit", "[filesystem]\nread = [\"escape\"]\n", "read escape", "resolves to /home/u/.ssh"},
      {"a .. escape", "[filesystem]\nread = [\"../.ssh\"]\n", "read ../.ssh", "outside the read limit"},
      {"climbing above /", "[filesystem]\nread = [\"../../../../..\"]\n", "read ../../../../..", "climbs above /"},
      {"a missing path", "[filesystem]\nread = [\"nope\"]\n", "read nope", "does not exist"},
      {"an env name", "[env]\npass = [\"AWS_SECRET_ACCESS_KEY\"]\n", "env AWS_SECRET_ACCESS_KEY",
       "outside the env limit"},
      {"an env value", "[env]\nset = { LD_PRELOAD = \"/x.so\" }\n", "env.set LD_PRELOAD", "outside the env limit"},
      {"unsafe ptrace", "[hardening]\nunsafe_allow_ptrace = true\n", "unsafe_allow_ptrace", "for operators only"},
      {"unsafe userns", "[hardening]\nunsafe_nested_user_namespaces = true\n", "unsafe_nested_user_namespaces",
       "for operators only"},
      {"its own limits", "[limits]\nwrite = [\"/\"]\n", "[limits]", "set by operators"},
      {"the excess switch", "[policy]\non_excess = \"warn\"\n", "on_excess", "set by operators"},
      {"the compile cache", "[runtime]\ncompile_cache = false\n", "[runtime] compile_cache", "set by operators"},
      {"the jail home", "[home]\npersist = false\n", "[home] persist", "set by operators"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Resolved r = resolve_with(c.project);
    REQUIRE(r.errors.empty());
    REQUIRE(r.refused.size() == 1);
    CHECK(r.refused[0].what.find(c.what) != std::string::npos);
    CHECK(r.refused[0].reason.find(c.reason) != std::string::npos);
    CHECK(r.refused[0].request.file == ".pi/jail.toml");
    CHECK(r.refused[0].request.line >= 1);
    CHECK(r.refused[0].by == Authority::project);
    REQUIRE(r.policy);
    CHECK_FALSE(r.policy->ptrace_allowed());
    CHECK_FALSE(r.policy->nested_userns_allowed());
  }
}

TEST_CASE("a refusal names the limit it exceeds") {
  Resolved r = resolve_with("[network]\nallow = [\"evil.example\"]\n");
  REQUIRE(r.refused.size() == 1);
  REQUIRE(r.refused[0].limit);
  CHECK(r.refused[0].limit->str() == "pi.toml:8:12");
  CHECK(r.refused[0].str() ==
        ".pi/jail.toml:2:10: network evil.example: outside the network limit (limit: pi.toml:8:12)");
}

TEST_CASE("project requests within the limits are applied with their source") {
  Resolved r = resolve_with(
      "[filesystem]\nread = [\"/opt/tools\", \"inside\"]\nwrite = [\"src\"]\n"
      "[network]\nallow = [\"registry.npmjs.org\", \"PyPI.org.:443\"]\n[env]\npass = [\"NPM_TOKEN\"]\n"
      "[hardening]\nlandlock = \"required\"\n");
  CHECK(r.refused.empty());
  REQUIRE(r.policy);
  CHECK(has_grant(r, "/opt/tools", PathAccess::read_only));
  CHECK(has_grant(r, "/home/u/proj/src", PathAccess::read_only));  // "inside" resolved
  CHECK(has_grant(r, "/home/u/proj/src", PathAccess::read_write));
  REQUIRE(r.policy->net_allow().size() == 2);
  CHECK(r.policy->net_allow()[1].pattern.str() == "pypi.org:443");
  CHECK(r.policy->net_allow()[0].src.str() == ".pi/jail.toml:5:10");
  CHECK(r.policy->landlock() == LandlockUse::required);
}

TEST_CASE("user limits cannot exceed the system operator's; system limits bound the user's grants") {
  const std::string system = "[limits]\nwrite = [\"${workspace}\"]\nnetwork = [\"*.npmjs.org\"]\n";
  const std::string user =
      "[filesystem]\nwrite = [\"~/.cache\"]\n[network]\nallow = [\"github.com\"]\n"
      "[limits]\nwrite = [\"${home}\"]\nnetwork = [\"registry.npmjs.org\"]\n";
  Resolved r = resolve_with("[network]\nallow = [\"registry.npmjs.org\"]\n", user, system);
  REQUIRE(r.policy);
  std::set<std::string> refused;
  for (const auto& x : r.refused) refused.insert(x.what);
  CHECK(refused.count("write ~/.cache"));        // user grant outside the system write limit
  CHECK(refused.count("network github.com"));    // user grant outside the system network limit
  CHECK(refused.count("limits.write ${home}"));  // user limit wider than the system's
  CHECK(refused.size() == 3);
  CHECK(r.policy->net_allow().size() == 1);  // the project's request, within the user's limit
  for (const auto& x : r.refused) CHECK(x.by == Authority::user);
}

TEST_CASE("operator layers grant; denies from any layer win; provenance is kept in order") {
  FakeFs fs = host();
  std::vector<Layer> layers{
      layer(kProfile, "pi.toml", Authority::profile),
      layer("[filesystem]\nread = [\"/srv/data\"]\n[hardening]\nunsafe_allow_ptrace = true\n",
            "/etc/pi-jail/policy.toml", Authority::system),
  };
  Layer cli;
  cli.authority = Authority::command_line;
  cli.name = "command line";
  cli.write.push_back({"/home/u/x", {"--allow-write", 0, 0}});
  layers.push_back(cli);
  layers.push_back(layer("[filesystem]\ndeny = [\"/srv/data\"]\n", ".pi/jail.toml", Authority::project));
  Resolved r = resolve(layers, context(fs));
  REQUIRE(r.policy);
  REQUIRE(r.policy->grants().size() == 2);
  CHECK(r.policy->grants()[0].src.str() == "/etc/pi-jail/policy.toml:2:9");
  CHECK(r.policy->grants()[1].src.str() == "--allow-write");
  CHECK(r.policy->ptrace_allowed());
  CHECK(r.policy->ptrace_src().str() == "/etc/pi-jail/policy.toml:4:23");
  // The project may narrow: its deny is kept (the planner masks the grant).
  REQUIRE(r.policy->denies().size() == 2);
  CHECK(r.policy->denies()[1].path == "/srv/data");
}

TEST_CASE("[runtime] compile_cache: on by default, an operator turns it off, with its source") {
  FakeFs fs = host();
  Resolved on = resolve({layer(kProfile, "pi.toml", Authority::profile)}, context(fs));
  REQUIRE(on.policy);
  CHECK(on.policy->compile_cache());
  CHECK(on.policy->compile_cache_src().file == "default");
  Resolved off = resolve({layer(kProfile, "pi.toml", Authority::profile),
                          layer("[runtime]\ncompile_cache = false\n", "/etc/pi-jail/policy.toml", Authority::system)},
                         context(fs));
  REQUIRE(off.policy);
  CHECK_FALSE(off.policy->compile_cache());
  CHECK(off.policy->compile_cache_src().str() == "/etc/pi-jail/policy.toml:2:17");
  auto bad = load_layer("[runtime]\ncompile_cache = \"no\"\ncache = 1\n", "f.toml", Authority::user);
  REQUIRE(bad.errors.size() == 2);
  CHECK(bad.errors[0].str() == "f.toml:2:17: runtime.compile_cache must be true or false");
  CHECK(bad.errors[1].str().find("unknown key \"cache\" in [runtime]") != std::string::npos);
}

TEST_CASE("on_excess = \"error\" turns project refusals into errors") {
  Resolved r = resolve_with("[network]\nallow = [\"evil.example\"]\n", "[policy]\non_excess = \"error\"\n");
  CHECK_FALSE(r.policy);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str().find(".pi/jail.toml:2:10: refused") == 0);
}

TEST_CASE("malformed files: every problem, each with file:line:column, never a crash") {
  struct Case {
    const char* name;
    std::string text;
    std::vector<std::string> want;  // substrings of the error lines, in order
  } cases[] = {
      {"syntax", "[filesystem\nread = []\n", {"f.toml:1:12:"}},
      {"unterminated string", "[network]\nallow = [\"a.b]\n", {"f.toml:2:"}},
      {"unknown table", "[filesytem]\nread = []\n", {"f.toml:1:2: unknown table [filesytem]"}},
      {"unknown key", "[filesystem]\nwrites = [\"/x\"]\n", {"f.toml:2:1: unknown key \"writes\" in [filesystem]"}},
      {"wrong type", "[filesystem]\nread = \"/x\"\n", {"f.toml:2:8: filesystem.read must be an array of strings"}},
      {"wrong item type",
       "[filesystem]\nread = [\"/x\", 3]\n",
       {"f.toml:2:15: filesystem.read must contain only strings"}},
      {"bad pattern",
       "[network]\nallow = [\"exa mple.com\", \"*.com\", \"a.b:99999\", \"::1\", \"*\"]\n",
       {"f.toml:2:10: bad network pattern \"exa mple.com\"", "f.toml:2:26: bad network pattern \"*.com\"",
        "f.toml:2:35: bad network pattern \"a.b:99999\"", "f.toml:2:48: bad network pattern \"::1\"",
        "f.toml:2:55: bad network pattern \"*\""}},
      {"a wildcard over an address",
       "[network]\ndeny = [\"*.1.2.3\"]\n",
       {"f.toml:2:9: bad network pattern \"*.1.2.3\": a wildcard needs a domain name, not an address"}},
      {"bad enum",
       "[hardening]\nlandlock = \"sometimes\"\n",
       {"f.toml:2:12: hardening.landlock must be one of \"if-available\", \"required\""}},
      {"bad on_excess",
       "[policy]\non_excess = \"Error\"\n",
       {"f.toml:2:13: policy.on_excess must be one of \"warn\", \"error\""}},
      {"choice not a string", "[policy]\non_excess = true\n", {"f.toml:2:13: policy.on_excess must be a string"}},
      {"bad bool",
       "[hardening]\nunsafe_allow_ptrace = \"yes\"\n",
       {"f.toml:2:23: hardening.unsafe_allow_ptrace must be true or false"}},
      {"bad env name",
       "[env]\npass = [\"A B\"]\nset = { \"X-Y\" = \"1\", OK = 2 }\n",
       {"f.toml:2:9: \"A B\" is not an environment variable name", "f.toml:3:9: \"X-Y\" is not",
        "f.toml:3:27: env.set.OK must be a string"}},
      {"table as value", "filesystem = 3\n", {"f.toml:1:14: \"filesystem\" must be a table"}},
      {"several at once",
       "[filesystem]\nbogus = 1\nread = 2\n[network]\nallow = [\"\"]\n",
       {"f.toml:2:1: unknown key", "f.toml:3:8:", "f.toml:5:10: network.allow: empty string"}},
      {"deep nesting", std::string(10000, '[') + std::string(10000, ']'), {"f.toml:1:"}},
      {"scratch not a string", "[limits]\nscratch = 8\n", {"f.toml:2:11: limits.scratch must be a string"}},
      {"bad scratch sizes", "[limits]\nscratch = \"lots\"\n", {"f.toml:2:11: limits.scratch \"lots\": "}},
      {"scratch of zero", "[limits]\nscratch = \"0M\"\n", {"f.toml:2:11: limits.scratch \"0M\": 0 "}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto loaded = load_layer(c.text, "f.toml", Authority::project);
    REQUIRE(loaded.errors.size() >= c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) {
      CAPTURE(loaded.errors[i].str());
      CHECK(loaded.errors[i].str().find(c.want[i]) != std::string::npos);
    }
  }
}

TEST_CASE("[limits] scratch loads from an operator file") {
  for (const char* size : {"2G", "512M", "25%", "100%", "65536", "64k"}) {
    CAPTURE(size);
    auto loaded = load_layer(std::string("[limits]\nscratch = \"") + size + "\"\n", "policy.toml", Authority::system);
    for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
    REQUIRE(loaded.layer.limits);
  }
}

TEST_CASE("scratch sizes: bytes with K, M, G or T, or 1-100% of RAM; never 0, never ambiguous") {
  const std::pair<const char*, const char*> good[] = {
      {"2G", "2G"},    {"512M", "512M"},  {"512m", "512M"},   {"25%", "25%"}, {"100%", "100%"}, {"1%", "1%"},
      {"1024K", "1M"}, {"8388608", "8M"}, {"1536K", "1536K"}, {"100", "100"}, {"3t", "3T"},
  };
  for (const auto& c : good) {  // not a structured binding: CAPTURE's lambda takes it
    const char* in = c.first;
    CAPTURE(in);
    std::string why;
    auto size = parse_memory_size(in, why);
    REQUIRE_MESSAGE(size, why);
    CHECK(size->str() == c.second);
  }
  for (const char* bad : {"", "0", "0M", "0%", "101%", "-1G", "1.5G", "2 G", " 2G", "2GB", "2GiB", "G", "%", "2P",
                          "99999999999999999999", "9999999999T", "50%%", "0x10"}) {
    CAPTURE(bad);
    std::string why;
    CHECK_FALSE(parse_memory_size(bad, why));
    CHECK_FALSE(why.empty());
  }
  std::string why;
  CHECK(parse_memory_size("25%", why)->bytes(16ULL << 30) == 4ULL << 30);
  CHECK_FALSE(parse_memory_size("25%", why)->bytes(0));
  CHECK(parse_memory_size("2G", why)->bytes(0) == 2ULL << 30);
}

TEST_CASE(
    "[limits] scratch: half the RAM by default; the system file sets it; the user only within it; "
    "a project never") {
  auto scratch_of = [](const Resolved& r) { return r.policy ? r.policy->scratch().str() : "(no policy)"; };
  Resolved none = resolve_with("");
  REQUIRE(none.policy);
  CHECK(scratch_of(none) == "50%");
  CHECK(none.policy->scratch_src().str() == "default");

  Resolved sys = resolve_with("", "", "[limits]\nscratch = \"2G\"\n");
  CHECK(scratch_of(sys) == "2G");
  CHECK(sys.policy->scratch_src().str() == "/etc/pi-jail/policy.toml:2:11");
  CHECK(sys.refused.empty());

  Resolved smaller = resolve_with("", "[limits]\nscratch = \"512M\"\n", "[limits]\nscratch = \"2G\"\n");
  CHECK(scratch_of(smaller) == "512M");
  CHECK(smaller.policy->scratch_src().str() == "user.toml:2:11");
  CHECK(smaller.refused.empty());

  Resolved larger = resolve_with("", "[limits]\nscratch = \"4G\"\n", "[limits]\nscratch = \"2G\"\n");
  CHECK(scratch_of(larger) == "2G");
  REQUIRE(larger.refused.size() == 1);
  CHECK(larger.refused[0].str() ==
        "user.toml:2:11: limits.scratch 4G: larger than the system operator's limit (limit: "
        "/etc/pi-jail/policy.toml:2:11)");
  CHECK(larger.refused[0].by == Authority::user);

  // A share of RAM against a size: compared through the host's RAM, or
  // refused when it is unknown.
  static FakeFs fs = host();
  auto with_ram = [&](std::uint64_t ram) {
    auto ctx = context(fs);
    ctx.ram_bytes = ram;
    return resolve({layer("[limits]\nscratch = \"2G\"\n", "/etc/pi-jail/policy.toml", Authority::system),
                    layer("[limits]\nscratch = \"25%\"\n", "user.toml", Authority::user)},
                   ctx);
  };
  CHECK(scratch_of(with_ram(4ULL << 30)) == "25%");  // 1 GiB
  CHECK(scratch_of(with_ram(16ULL << 30)) == "2G");  // 4 GiB: refused
  Resolved unknown = with_ram(0);
  CHECK(scratch_of(unknown) == "2G");
  REQUIRE(unknown.refused.size() == 1);
  CHECK(unknown.refused[0].reason.find("RAM is unknown") != std::string::npos);

  // The user file alone (no system limit) sets it.
  Resolved user_only = resolve_with("", "[limits]\nscratch = \"64G\"\n");
  CHECK(scratch_of(user_only) == "64G");

  // A project may only lower it.
  Resolved project = resolve_with("[limits]\nscratch = \"100%\"\n", "", "[limits]\nscratch = \"1G\"\n");
  CHECK(scratch_of(project) == "1G");
  REQUIRE(project.refused.size() == 1);
  CHECK(project.refused[0].what == "limits.scratch 100%");
  CHECK(project.refused[0].request.str() == ".pi/jail.toml:2:11");
  Resolved lower = resolve_with("[limits]\nscratch = \"512M\"\n", "", "[limits]\nscratch = \"1G\"\n");
  CHECK(scratch_of(lower) == "512M");
  CHECK(lower.refused.empty());
}

TEST_CASE("explain says where the scratch size applies: the Linux jail, not the macOS one") {
  static FakeFs fs = host();
  Resolved r = resolve({layer("[limits]\nscratch = \"8M\"\n", "op.toml", Authority::system)}, context(fs));
  REQUIRE(r.policy);
  ExplainInput ex{&*r.policy, &r, {{Authority::system, "op.toml", true}}, "/home/u/proj"};
  auto compact_json = [&] {
    std::string j = explain_json(ex);
    std::erase_if(j, [](char c) { return c == ' ' || c == '\n'; });
    return j;
  };
  CHECK(explain_text(ex).find("\nscratch (one tmpfs for /tmp, /var/tmp and /dev/shm together):\n"
                              "  size            8M                                            op.toml:2:11\n") !=
        std::string::npos);
  CHECK(compact_json().find(R"("scratch":{"size":"8M","enforced":true,"places":["/tmp","/var/tmp","/dev/shm"],)"
                            R"("source":{"file":"op.toml","line":2,"column":11}})") != std::string::npos);
  ex.backend = "macos-seatbelt";
  CHECK(explain_text(ex).find("8M (no effect on macOS: TMPDIR is a private directory on the host disk)") !=
        std::string::npos);
  CHECK(compact_json().find(R"("scratch":{"size":"8M","enforced":false,"places":[],)") != std::string::npos);
}

TEST_CASE("explain lists the login callbacks: served on the host by Linux, listened on by the macOS jail itself") {
  static FakeFs fs = host();
  Resolved r = resolve({layer("[network]\nallow = [\"example.com\"]\n", "op.toml", Authority::system)}, context(fs));
  REQUIRE(r.policy);
  ExplainInput ex{&*r.policy, &r, {{Authority::system, "op.toml", true}}, "/home/u/proj"};
  auto compact_json = [&] {
    std::string j = explain_json(ex);
    std::erase_if(j, [](char c) { return c == ' ' || c == '\n'; });
    return j;
  };
  CHECK(compact_json().find("login_callbacks") == std::string::npos);  // none: no member
  ex.login_callbacks = {{53692, "Anthropic (Claude Pro/Max)", "profile pi"}};
  CHECK(explain_text(ex).find("  login-callback  host 127.0.0.1:53692 -> jail, while it listens there: Anthropic "
                              "(Claude Pro/Max) profile pi\n") != std::string::npos);
  CHECK(compact_json().find(R"x("login_callbacks":[{"port":53692,"what":"Anthropic(ClaudePro/Max)",)x"
                            R"x("jail_listens_on_host":false,"source":{"file":"profilepi","line":0,"column":0}}])x") !=
        std::string::npos);
  ex.backend = "macos-seatbelt";
  CHECK(explain_text(ex).find("  login-callback  host localhost:53692 (127.0.0.1, ::1): the jail may listen there "
                              "itself, all run long: Anthropic (Claude Pro/Max) profile pi\n") != std::string::npos);
  CHECK(compact_json().find(R"x("login_callbacks":[{"port":53692,"what":"Anthropic(ClaudePro/Max)",)x"
                            R"x("jail_listens_on_host":true,"source":{"file":"profilepi","line":0,"column":0}}])x") !=
        std::string::npos);
  ex.backend = "another";  // a backend that says nothing of them
  CHECK(explain_text(ex).find("login-callback") == std::string::npos);
  CHECK(compact_json().find("login_callbacks") == std::string::npos);
}

TEST_CASE("huge and unreadable files are errors, a missing optional file is not") {
  std::string big = "/tmp/pj-unit-big-" + std::to_string(::getpid()) + ".toml";
  {
    std::ofstream out(big);
    out << "[filesystem]\nread = [\n";
    for (int i = 0; i < 60000; ++i) out << "  \"/some/rather/long/path/number/" << i << "\",\n";
    out << "]\n";
  }
  auto loaded = load_file(big, Authority::project, Presence::optional);
  std::remove(big.c_str());
  REQUIRE(loaded.errors.size() == 1);
  CHECK(loaded.errors[0].str().find("limited to 1 MiB") != std::string::npos);

  auto missing = load_file("/nonexistent/pi-jail.toml", Authority::user, Presence::optional);
  CHECK(missing.errors.empty());
  auto required = load_file("/nonexistent/pi-jail.toml", Authority::system, Presence::required);
  REQUIRE(required.errors.size() == 1);
  CHECK(required.errors[0].str() == "/nonexistent/pi-jail.toml: cannot read: No such file or directory");
  auto dir = load_file("/tmp", Authority::project, Presence::optional);
  REQUIRE(dir.errors.size() == 1);
  CHECK(dir.errors[0].message == "not a regular file");
}

TEST_CASE("network patterns normalise") {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"Example.COM", "example.com"}, {"example.com.", "example.com"}, {"*.Example.com:8443", "*.example.com:8443"},
      {"10.0.0.1:80", "10.0.0.1:80"}, {"[::1]:11434", "[::1]:11434"},  {"[2001:DB8::1]", "[2001:db8::1]"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto p = parse_net_pattern(c.in);
    REQUIRE_MESSAGE(p, (p ? "" : p.error().what()));
    CHECK(p->str() == c.out);
  }
}

TEST_CASE("explain: golden text and JSON") {
  FakeFs fs = host();
  std::vector<Layer> layers{layer(kProfile, "pi.toml", Authority::profile),
                            layer("[network]\nallow = [\"registry.npmjs.org\", \"evil.example\"]\n"
                                  "[filesystem]\nwrite = [\"src\"]\n",
                                  ".pi/jail.toml", Authority::project)};
  Resolved r = resolve(layers, context(fs));
  ExplainInput ex{r.policy ? &*r.policy : nullptr,
                  &r,
                  {{Authority::profile, "pi.toml", true},
                   {Authority::system, "/etc/pi-jail/policy.toml", false},
                   {Authority::project, ".pi/jail.toml", true}},
                  "/home/u/proj"};
  ex.jail_home = "/home/u/.local/share/pi-jail/homes/proj-0123456789abcdef";
  for (const auto& golden : {std::pair<std::string, std::string>{"explain.txt", explain_text(ex)},
                             std::pair<std::string, std::string>{"explain.json", explain_json(ex)}}) {
    const std::string& file = golden.first;  // not a structured binding: CAPTURE's lambda takes it
    const std::string& text = golden.second;
    CAPTURE(file);
    std::string path = std::string(PJ_GOLDEN_DIR) + "/" + file;
    if (std::getenv("PJ_UPDATE_GOLDEN")) {
      std::ofstream(path) << text;
      continue;
    }
    std::ifstream in(path);
    REQUIRE(in.good());
    std::stringstream want;
    want << in.rdbuf();
    CHECK(text == want.str());
  }
}

// Every row explain has, so that a change to one rendering shows in the
// golden files: each network kind, variables (a socket's too), every
// limit, the unsafe switches, refusals with and without a limit, and the
// errors of a policy that does not resolve; bytes from the files are
// escaped in the text.
TEST_CASE("explain: golden text and JSON with every section, and with errors") {
  static FakeFs fs = host();
  auto ctx = context(fs);
  ctx.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SSH_AUTH_SOCK") return "/tmp/ssh-x/agent.1";
    return std::nullopt;
  };
  const std::string op = R"([filesystem]
read = ["/opt/tools"]
sockets = ["$SSH_AUTH_SOCK"]
[network]
allow = ["registry.npmjs.org", { host = "db.corp:5432", allow_private = true }]
deny = ["*.evil.test"]
publish = ["3000", "[::1]:4000:4001"]
ssh = ["git.corp:2222"]
[env]
pass = ["LANG"]
set = { FOO = "bar\u001b[31m" }
[limits]
network = ["*.npmjs.org"]
memory = "1G"
pids = 128
cpus = 1.5
cgroup = ["/sys/fs/cgroup/pj"]
[hardening]
landlock = "required"
unsafe_allow_ptrace = true
unsafe_nested_user_namespaces = true
[home]
persist = false
[runtime]
compile_cache = false
[credentials]
bind = { anthropic = ["llm.corp.example"], ollama = ["http://127.0.0.1:11434"] }
logins = "write-back"
)";
  const std::string project =
      "[network]\nallow = [\"evil.example\"]\n[env]\npass = [\"SECRET\"]\n"
      "[limits]\nmemory = \"8G\"\n";
  std::vector<LayerInfo> infos{{Authority::profile, "pi.toml", true},
                               {Authority::system, "op.toml", true},
                               {Authority::project, ".pi/jail.toml", true}};
  Resolved r = resolve({layer(kProfile, "pi.toml", Authority::profile), layer(op, "op.toml", Authority::system),
                        layer(project, ".pi/jail.toml", Authority::project)},
                       ctx);
  REQUIRE(r.policy);
  ExplainInput ex{&*r.policy, &r, infos, "/home/u/proj"};
  // What the pi profile's adapter adds (runtime::Request::login_callbacks).
  ex.login_callbacks = {{53692, "Anthropic (Claude Pro/Max)", "profile pi"}, {1455, "OpenAI", "profile pi"}};
  check_golden("explain_every_section.txt", explain_text(ex));
  check_golden("explain_every_section.json", explain_json(ex));
  ex.backend = "macos-seatbelt";
  check_golden("explain_every_section_macos.txt", explain_text(ex));

  auto bad = load_layer("[network]\nallow = [\"*.1.2.3\"]\n[limits]\nnetwork = [\"*.npmjs.org\"]\n", "op.toml",
                        Authority::system);
  Resolved failed = resolve(
      {layer(kProfile, "pi.toml", Authority::profile), bad.layer, layer(project, ".pi/jail.toml", Authority::project)},
      ctx);
  REQUIRE_FALSE(failed.policy);
  ExplainInput errors{nullptr, &failed, infos, "/home/u/proj"};
  check_golden("explain_errors.txt", explain_text(errors));
  check_golden("explain_errors.json", explain_json(errors));
}

TEST_CASE("variables expand in one pass over the policy text, never over a substituted value") {
  FakeFs fs = host();
  auto ctx = context(fs);
  const std::string agent_named_ws = "/home/u/${pi_agent_dir}";
  const std::string loop_ws = "/home/u/${workspace}";
  fs.exists.insert(agent_named_ws);
  fs.exists.insert(loop_ws);
  const char* profile = R"(
[filesystem]
read_only = ["${workspace}/.envrc", "~/${workspace}"]
)";
  for (const std::string& ws : {agent_named_ws, loop_ws}) {
    CAPTURE(ws);
    ctx.workspace = ws;
    auto r = resolve({layer(profile, "pi.toml", Authority::profile)}, ctx);
    REQUIRE(r.policy);
    REQUIRE(r.policy->read_only().size() == 2);
    CHECK(r.policy->read_only()[0].path == ws + "/.envrc");
    CHECK(r.policy->read_only()[1].path == "/home/u" + ws);
  }
  ctx.workspace = "/home/u/proj";
  auto bad =
      resolve({layer("[filesystem]\nread = [\"${nope}/x\", \"${unclosed\"]\n", "pi.toml", Authority::profile)}, ctx);
  REQUIRE(bad.errors.size() == 2);
  CHECK(bad.errors[0].message.find("unknown variable") != std::string::npos);
}

TEST_CASE("a checked git worktree's common dir is a derived grant, bounded like a request, shown with its source") {
  FakeFs fs = host();
  for (const char* p : {"/srv/main/.git", "/srv/main/.git/worktrees/wt", "/home/u/.git"}) fs.exists.insert(p);
  auto ctx = context(fs);
  const Worktree good{"/home/u/proj/.git", "/srv/main/.git/worktrees/wt", "/srv/main/.git"};
  ctx.worktree = good;
  auto profile = layer(kProfile, "pi.toml", Authority::profile);
  auto r = resolve({profile}, ctx);
  REQUIRE(r.policy);
  CHECK(has_grant(r, "/srv/main/.git", PathAccess::read_write));
  std::set<std::string> kept;
  for (const auto& k : r.policy->read_only()) {
    kept.insert(k.path);
    if (k.path == "/srv/main/.git/config")
      CHECK(k.src.str() == "git worktree /home/u/proj/.git -> /srv/main/.git/worktrees/wt");
  }
  for (const char* p :
       {"/srv/main/.git/hooks", "/srv/main/.git/config", "/srv/main/.git/commondir",
        "/srv/main/.git/worktrees/wt/commondir", "/srv/main/.git/worktrees/wt/gitdir", "/home/u/proj/.git"})
    CHECK(kept.count(p) == 1);

  // $HOME or an ancestor, a masked path, or beyond the system operator's write limit: refused, reported.
  struct Case {
    Worktree w;
    std::string system;
    std::string reason;
  } cases[] = {
      {{"/home/u/proj/.git", "/home/u/.git/worktrees/x", "/home/u"}, "", "home directory"},
      {{"/home/u/proj/.git", "/x/worktrees/y", "/"}, "", "home directory"},
      {good, "[filesystem]\ndeny = [\"/srv\"]\n", "denied"},
      {good, "[limits]\nwrite = [\"/home/u\"]\n", "outside the operators' write limit"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.w.common_dir);
    CAPTURE(c.system);
    ctx.worktree = c.w;
    std::vector<Layer> layers{profile};
    if (!c.system.empty()) layers.push_back(layer(c.system, "/etc/pi-jail/policy.toml", Authority::system));
    auto refused = resolve(layers, ctx);
    REQUIRE(refused.policy);
    CHECK_FALSE(has_grant(refused, c.w.common_dir, PathAccess::read_write));
    REQUIRE(refused.refused.size() == 1);
    CHECK(refused.refused[0].by == Authority::git_worktree);
    CHECK(refused.refused[0].reason.find(c.reason) != std::string::npos);
  }
}

TEST_CASE("allow_private: an operator's per-rule switch; a project cannot set it") {
  const std::string user =
      "[network]\nallow = [\"github.com\", { host = \"db.corp:5432\", allow_private = true },\n"
      "  { host = \"plain.corp\" }, { host = \"off.corp\", allow_private = false }]\n";
  Resolved r = resolve_with(
      "[network]\nallow = [{ host = \"registry.npmjs.org\", allow_private = true }, \"pypi.org:443\"]\n", user);
  REQUIRE(r.policy);
  std::map<std::string, PrivateRanges> got;
  for (const auto& n : r.policy->net_allow()) got[n.pattern.str()] = n.private_ranges;
  CHECK(got.size() == 5);
  CHECK(got["db.corp:5432"] == PrivateRanges::allowed);
  CHECK(got["github.com"] == PrivateRanges::refused);
  CHECK(got["plain.corp"] == PrivateRanges::refused);
  CHECK(got["off.corp"] == PrivateRanges::refused);
  CHECK(got["pypi.org:443"] == PrivateRanges::refused);
  CHECK_FALSE(got.count("registry.npmjs.org"));  // within the limit, but it asked for private ranges
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].str() ==
        ".pi/jail.toml:2:10: network registry.npmjs.org (allow_private): allow_private is set by operators, not by "
        "projects");
  ExplainInput ex{&*r.policy, &r, {}, "/home/u/proj"};
  CHECK(explain_text(ex).find("db.corp:5432 (allow_private)") != std::string::npos);
  CHECK(explain_json(ex).find("\"allow_private\": true") != std::string::npos);
}

TEST_CASE("[network] allow tables are checked: host required, known keys, boolean switch") {
  auto errors = [](const std::string& text) {
    std::string all;
    for (const auto& e : load_layer(text, "f.toml", Authority::user).errors) all += e.str() + "\n";
    return all;
  };
  CHECK(errors("[network]\nallow = [{ allow_private = true }]\n") ==
        "f.toml:2:10: network.allow: a table needs host = \"PATTERN\"\n");
  CHECK(errors("[network]\nallow = [{ host = \"a.test\", private = true }]\n") ==
        "f.toml:2:29: network.allow: unknown key \"private\" (known: host, allow_private)\n");
  CHECK(errors("[network]\nallow = [{ host = \"a.test\", allow_private = \"yes\" }]\n") ==
        "f.toml:2:45: network.allow: allow_private must be true or false\n");
  CHECK(errors("[network]\nallow = [{ host = \"bad host\" }]\n").find("bad network pattern \"bad host\"") !=
        std::string::npos);
  CHECK(errors("[network]\nallow = [1]\n").find("must contain strings or") != std::string::npos);
  CHECK(errors("[network]\ndeny = [{ host = \"a.test\" }]\n").find("must contain only strings") != std::string::npos);
}

TEST_CASE("a project's allow cannot out-specify an operator's deny") {
  Resolved r = resolve_with("[network]\nallow = [\"x.npmjs.org\", \"registry.npmjs.org\"]\n", "",
                            "[network]\ndeny = [\"*.npmjs.org\"]\nallow = [\"y.npmjs.org\"]\n");
  REQUIRE(r.policy);
  REQUIRE(r.refused.size() == 2);
  CHECK(r.refused[0].reason == "an operator's deny covers it");
  CHECK(r.refused[0].limit->str() == "/etc/pi-jail/policy.toml:2:9");
  REQUIRE(r.policy->net_allow().size() == 1);
  CHECK(r.policy->net_allow()[0].pattern.str() == "y.npmjs.org");  // an operator's own exception stands
}

TEST_CASE("a project's deny wins over the operators' allows it covers, even more specific ones") {
  Resolved r =
      resolve_with("[network]\ndeny = [\"*.npmjs.org\"]\n", "[network]\nallow = [\"x.npmjs.org\", \"pypi.org\"]\n");
  REQUIRE(r.policy);
  REQUIRE(r.policy->net_allow().size() == 1);
  CHECK(r.policy->net_allow()[0].pattern.str() == "pypi.org");
}

TEST_CASE("network presets: an operator's become allow rules at the preset's line; a project's are requests") {
  Resolved op = resolve_with("", "[network]\npresets = [\"npm\", \"crates\"]\n");
  REQUIRE(op.errors.empty());
  REQUIRE(op.policy);
  std::set<std::string> allowed;
  for (const auto& r : op.policy->net_allow()) {
    allowed.insert(r.pattern.str());
    if (r.pattern.str() == "index.crates.io") {
      CHECK(r.src.file == "user.toml");
      CHECK(r.src.line == 2);
    }
  }
  for (const char* h :
       {"registry.npmjs.org", "registry.yarnpkg.com", "crates.io", "index.crates.io", "static.crates.io"})
    CHECK(allowed.count(h));
  CHECK_FALSE(allowed.count("pypi.org"));

  // The profile's limit covers *.npmjs.org only: the project gets that
  // host of the preset, and the refusal names the other.
  Resolved proj = resolve_with("[network]\npresets = [\"npm\"]\n");
  REQUIRE(proj.errors.empty());
  REQUIRE(proj.policy);
  bool npmjs = false;
  for (const auto& r : proj.policy->net_allow()) npmjs = npmjs || r.pattern.str() == "registry.npmjs.org";
  CHECK(npmjs);
  REQUIRE(proj.refused.size() == 1);
  CHECK(proj.refused[0].what == "network registry.yarnpkg.com");
  CHECK(proj.refused[0].request.line == 2);

  auto unknown = load_layer("[network]\npresets = [\"npm\", \"maven\"]\n", "user.toml", Authority::user);
  REQUIRE(unknown.errors.size() == 1);
  CHECK(unknown.errors[0].str().find("user.toml:2:") == 0);
  CHECK(unknown.errors[0].message.find("unknown network preset \"maven\" (known: npm, pypi, crates, github)") !=
        std::string::npos);
  for (const auto& p : net_presets()) CHECK_FALSE(p.hosts.empty());
}

TEST_CASE("[home] persist: true by default; an operator may make the home ephemeral") {
  Resolved def = resolve_with("");
  REQUIRE(def.policy);
  CHECK(def.policy->home_persists());
  Resolved off = resolve_with("", "[home]\npersist = false\n");
  REQUIRE(off.policy);
  CHECK_FALSE(off.policy->home_persists());
  CHECK(off.policy->home_persist_src().file == "user.toml");
  auto bad = load_layer("[home]\npersist = \"no\"\n", "user.toml", Authority::user);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].message.find("home.persist must be true or false") != std::string::npos);
}

TEST_CASE("limit values: whole process counts, CPUs to a thousandth; never 0, never ambiguous") {
  std::string why;
  CHECK(parse_count("1", why) == 1u);
  CHECK(parse_count("4096", why) == 4096u);
  CHECK(parse_count("2147483648", why) == 2147483648u);
  for (const char* bad : {"", "0", "-1", "1.5", "12abc", "2147483649", "99999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_count(bad, why).has_value());
  }
  CHECK(parse_cpus("2", why) == 2000u);
  CHECK(parse_cpus("1.5", why) == 1500u);
  CHECK(parse_cpus("0.25", why) == 250u);
  CHECK(parse_cpus("0.01", why) == 10u);
  CHECK(parse_cpus("1.0000", why) == 1000u);
  CHECK(parse_cpus("1024", why) == 1024000u);
  for (const char* bad : {"", "0", "0.001", "0.009", "1.", ".5", "1.0001", "1025", "1,5", "-1", "1e3"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_cpus(bad, why).has_value());
  }
  CHECK(cpus_str(1500) == "1.5");
  CHECK(cpus_str(2000) == "2");
  CHECK(cpus_str(10) == "0.01");
}

TEST_CASE("[limits] memory, pids, cpus and cgroup: schema errors with file:line:column") {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"[limits]\npids = \"64\"\n", "f.toml:2:8: limits.pids must be a whole number"},
      {"[limits]\npids = 0\n", "f.toml:2:8: limits.pids 0: 0 would let nothing run"},
      {"[limits]\ncpus = 0.001\n", "f.toml:2:8: limits.cpus 0.001: at least 0.01 CPU"},
      {"[limits]\ncpus = \"2\"\n", "f.toml:2:8: limits.cpus must be a number"},
      {"[limits]\nmemory = \"lots\"\n", "f.toml:2:10: limits.memory \"lots\": "},
      {"[limits]\ncgroup = \"/sys/fs/cgroup/x\"\n", "f.toml:2:10: limits.cgroup must be an array of strings"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto loaded = load_layer(c.text, "f.toml", Authority::system);
    REQUIRE(loaded.errors.size() == 1);
    CHECK(loaded.errors[0].str().find(c.error) == 0);
  }
  auto ok = load_layer("[limits]\nmemory = \"2G\"\npids = 512\ncpus = 1.5\ncgroup = [\"/sys/fs/cgroup/a\"]\n", "f.toml",
                       Authority::system);
  CHECK(ok.errors.empty());
  REQUIRE(ok.layer.limits);
  CHECK(ok.layer.limits->memory->size.str() == "2G");
  CHECK(ok.layer.limits->pids->value == 512u);
  CHECK(ok.layer.limits->cpus->value == 1500u);
  CHECK(ok.layer.limits->cgroup->at(0).text == "/sys/fs/cgroup/a");
}

TEST_CASE("resource limits: 4096 processes by default; the system file bounds the rest; a project may only lower") {
  Resolved none = resolve_with("");
  REQUIRE(none.policy);
  CHECK(none.policy->pids().value == kDefaultPids);
  CHECK(none.policy->pids().src.str() == "default");
  CHECK_FALSE(none.policy->memory().has_value());
  CHECK_FALSE(none.policy->cpus().has_value());

  const std::string sys = "[limits]\nmemory = \"2G\"\npids = 512\ncpus = 2\ncgroup = [\"/sys/fs/cgroup/pj\"]\n";
  Resolved s = resolve_with("", "", sys);
  REQUIRE(s.policy);
  CHECK(s.policy->memory()->size.str() == "2G");
  CHECK(s.policy->pids().value == 512u);
  CHECK(s.policy->pids().src.str() == "/etc/pi-jail/policy.toml:3:8");
  CHECK(s.policy->cpus()->value == 2000u);
  REQUIRE(s.policy->cgroups().size() == 1);
  CHECK(s.policy->cgroups()[0].path == "/sys/fs/cgroup/pj");

  // The user file within the system file's, not beyond.
  Resolved u = resolve_with("", "[limits]\nmemory = \"4G\"\npids = 256\n", sys);
  CHECK(u.policy->memory()->size.str() == "2G");
  CHECK(u.policy->pids().value == 256u);
  REQUIRE(u.refused.size() == 1);
  CHECK(u.refused[0].str().find("user.toml:2:10: limits.memory 4G: more than the system operator's limit (2G)") == 0);

  // A project lowers; asking for more is refused with its file:line and the limit's.
  Resolved lower = resolve_with("[limits]\nmemory = \"1G\"\npids = 64\ncpus = 0.5\n", "", sys);
  CHECK(lower.refused.empty());
  CHECK(lower.policy->memory()->size.str() == "1G");
  CHECK(lower.policy->pids().value == 64u);
  CHECK(lower.policy->pids().src.str() == ".pi/jail.toml:3:8");
  CHECK(lower.policy->cpus()->value == 500u);
  Resolved more = resolve_with("[limits]\npids = 100000\n");
  CHECK(more.policy->pids().value == kDefaultPids);
  REQUIRE(more.refused.size() == 1);
  CHECK(more.refused[0].request.str() == ".pi/jail.toml:2:8");
  CHECK(more.refused[0].what == "limits.pids 100000");
  CHECK(more.refused[0].reason.find("a project may only lower it") != std::string::npos);
  CHECK(more.refused[0].limit->str() == "default");
  // With no memory limit in force, a project may set one (lower than none).
  Resolved set = resolve_with("[limits]\nmemory = \"256M\"\n");
  CHECK(set.refused.empty());
  CHECK(set.policy->memory()->size.str() == "256M");
  // Bounds and cgroups stay the operators'.
  Resolved cg = resolve_with("[limits]\ncgroup = [\"/sys/fs/cgroup/mine\"]\n", "", sys);
  REQUIRE(cg.refused.size() == 1);
  CHECK(cg.refused[0].what == "[limits]");
  CHECK(cg.policy->cgroups()[0].path == "/sys/fs/cgroup/pj");
  // on_excess = "error" makes the refusal stop the run.
  Resolved strict = resolve_with("[limits]\npids = 100000\n", "", "[policy]\non_excess = \"error\"\n");
  CHECK_FALSE(strict.policy.has_value());
  REQUIRE_FALSE(strict.errors.empty());
  CHECK(strict.errors[0].str().find(".pi/jail.toml:2:8: refused") == 0);
}

TEST_CASE("[limits] cgroup is an absolute path") {
  Resolved r =
      resolve({layer("[limits]\ncgroup = [\"sys/fs/cgroup\"]\n", "op.toml", Authority::system)}, context(host()));
  CHECK_FALSE(r.policy.has_value());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str() == "op.toml:2:11: limits.cgroup \"sys/fs/cgroup\": must be an absolute path");
}

TEST_CASE("explain shows the resource limits and their sources") {
  static FakeFs fs = host();
  Resolved r = resolve({layer("[limits]\npids = 512\nmemory = \"1G\"\ncgroup = [\"/sys/fs/cgroup/pj\"]\n", "op.toml",
                              Authority::system)},
                       context(fs));
  REQUIRE(r.policy);
  ExplainInput ex;
  ex.policy = &*r.policy;
  ex.resolved = &r;
  ex.backend = "linux";
  std::string text = explain_text(ex);
  CAPTURE(text);
  CHECK(text.find("\nresource limits (the whole jail):\n") != std::string::npos);
  CHECK(text.find("  processes       512") != std::string::npos);
  CHECK(text.find("op.toml:2:8") != std::string::npos);
  CHECK(text.find("  memory          1G (needs a delegated cgroup)") != std::string::npos);
  CHECK(text.find("  cpus            no limit") != std::string::npos);
  CHECK(text.find("  cgroup          /sys/fs/cgroup/pj") != std::string::npos);
  std::string json = explain_json(ex);
  std::erase_if(json, [](char c) { return c == ' ' || c == '\n'; });
  CAPTURE(json);
  CHECK(json.find(R"("limits":{"pids":{"value":512,"source":{"file":"op.toml","line":2,"column":8}})") !=
        std::string::npos);
  CHECK(json.find(R"("cpus":null,"cgroup":["/sys/fs/cgroup/pj"]})") != std::string::npos);
}

TEST_CASE("choices are read into their values where they are written, and named back the same way") {
  auto loaded = load_layer("[hardening]\nlandlock = \"if-available\"\n[policy]\non_excess = \"error\"\n", "f.toml",
                           Authority::system);
  for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
  REQUIRE(loaded.layer.landlock);
  CHECK(loaded.layer.landlock->value == LandlockUse::if_available);
  CHECK(loaded.layer.landlock->src.str() == "f.toml:2:12");
  REQUIRE(loaded.layer.on_excess);
  CHECK(loaded.layer.on_excess->value == OnExcess::error);
  CHECK(loaded.layer.on_excess->src.str() == "f.toml:4:13");
  CHECK(std::string(choice_name(LandlockUse::required)) == "required");
  CHECK(std::string(choice_name(LandlockUse::if_available)) == "if-available");
  CHECK(std::string(choice_name(OnExcess::warn)) == "warn");
  CHECK(std::string(choice_name(OnExcess::error)) == "error");
  // A bad value leaves the choice unset (the error stops the run), not a default.
  auto bad = load_layer("[hardening]\nlandlock = \"sometimes\"\n", "f.toml", Authority::system);
  CHECK(!bad.layer.landlock);
  CHECK(bad.errors.size() == 1);
}

TEST_CASE("a network limit that does not parse is an error at its source, not a limit that covers nothing") {
  static FakeFs fs = host();
  Layer system;
  system.authority = Authority::system;
  system.name = "/etc/pi-jail/policy.toml";
  system.limits = Limits{};
  system.limits->network = std::vector<Entry>{{"*.1.2.3", Source{"/etc/pi-jail/policy.toml", 7, 11}}};
  std::vector<Layer> layers{layer(kProfile, "pi.toml", Authority::profile), system,
                            layer("[network]\nallow = [\"pypi.org\"]\n", ".pi/jail.toml", Authority::project)};
  Resolved r = resolve(layers, context(fs));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str().find("/etc/pi-jail/policy.toml:7:11: limits.network bad network pattern \"*.1.2.3\"") == 0);
  CHECK(!r.policy);
}

TEST_CASE("toml++ reads a character past ASCII where it looks for a blank as an error, never as unreachable") {
  // Without the pre-scan: toml++ 3.3.0 reached __builtin_unreachable() on
  // these (the sanitizer build aborts on it); thirdparty/toml.h makes it
  // report them.
  for (const char* text :
       {"\xc3\xa9 = 1\n", "a = 1 \xc3\xa9\n", "a = 1\n\xe3\x81\x82\n", "[a]\xe2\xba\x80\n", "a = [1,\xd0\x96]\n"}) {
    CAPTURE(text);
    const std::string_view name = "f.toml";
    CHECK_THROWS_AS(static_cast<void>(toml::parse(std::string_view(text), name)), toml::parse_error);
  }
}

TEST_CASE("a policy file with a character past ASCII outside strings and comments is refused at its position") {
  auto bad = load_layer("[network]\nallow = [\"a\"]\na\xc3\xa9 = 1\n", "f.toml", Authority::project);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].where.line == 3);
  CHECK(bad.errors[0].where.column == 2);
  CHECK(bad.errors[0].message.find("past ASCII") != std::string::npos);
  // A quote inside a value opens no string for toml++.
  auto quoted = load_layer("[network]\nallow = -\"\xc3\xa9\"\n", "f.toml", Authority::project);
  REQUIRE(quoted.errors.size() == 1);
  CHECK(quoted.errors[0].message.find("past ASCII") != std::string::npos);
  // Nor does a backslash escape one.
  auto escaped = load_layer("[network]\nallow = [\"\"\"\\\xc3\xa9\"\"\"]\n", "f.toml", Authority::project);
  REQUIRE(escaped.errors.size() == 1);
  CHECK(escaped.errors[0].message.find("past ASCII") != std::string::npos);
  auto continued = load_layer("[network]\nallow = [\"\"\"a\\\n \xc3\xa9\"\"\"]\n", "f.toml", Authority::project);
  REQUIRE(continued.errors.size() == 1);
  CHECK(continued.errors[0].where.line == 3);
  // Nor does one inside a bare value (a number, or anything malformed in a
  // value's place): toml++ reads it up to a blank, ',', ']', '}' or '#'.
  for (const char* after_digit : {"ea=1[\"\xc3\xa9\"", "ea=[1[\"\xc3\xa9\"]", "ea=1{\"\xc3\xa9\"", "ea=1.\"\xc3\xa9\"",
                                  "ea=1=\"\xc3\xa9\"", "ea=1x[\"\xc3\xa9\"", "ea=+[\"\xc3\xa9\"", "ea=+=\"\xc3\xa9\"",
                                  "ea=[1,+=\"\xc3\xa9\"]", "ea=1\a\x01[\"\xc3\xa9\""}) {
    auto number = load_layer(after_digit, "f.toml", Authority::project);
    CAPTURE(after_digit);
    REQUIRE(number.errors.size() == 1);
    CHECK(number.errors[0].message.find("past ASCII") != std::string::npos);
  }
  // In strings and comments they are TOML's own.
  auto good = load_layer("# caf\xc3\xa9\n[filesystem]\nread = [\"/home/jos\xc3\xa9\", \'\'\'/\xc3\xa9\'\'\']\n",
                         "f.toml", Authority::project);
  CHECK(good.errors.empty());
  CHECK(good.layer.read.size() == 2);
  // An inline table's next key is no bare value: its string is a string.
  auto inline_table = load_layer("ea = [{a = 1, b = \"\xc3\xa9\"}]\n", "f.toml", Authority::project);
  for (const auto& e : inline_table.errors) CHECK(e.message.find("past ASCII") == std::string::npos);
}

TEST_CASE("[network] upstream_proxy: operators set it, a project is refused at its file:line") {
  Resolved r = resolve_with("[network]\nupstream_proxy = \"http://evil.example:8080\"\n",
                            "[network]\nupstream_proxy = \"http://u:pw@user.proxy:3128\"\n",
                            "[network]\nupstream_proxy = \"http://system.proxy:3128\"\n");
  REQUIRE(r.policy);
  const auto& up = r.policy->upstream_proxy();
  REQUIRE(up);
  CHECK(up->url->host == "user.proxy");  // the last operator's
  CHECK(up->url->user == "u");
  CHECK(up->url->password == "pw");
  CHECK_FALSE(up->from_env);
  CHECK(up->src.str() == "user.toml:2:18");
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].str() ==
        ".pi/jail.toml:2:18: network.upstream_proxy: the upstream proxy is set by operators, not by projects (its "
        "address and credentials are the operator's)");
  Resolved none = resolve_with("");
  REQUIRE(none.policy);
  CHECK_FALSE(none.policy->upstream_proxy());
}

TEST_CASE("[network] upstream_proxy: bad values are errors at their file:line, the password masked") {
  auto errors = [](const std::string& value) {
    std::string all;
    for (const auto& e : load_layer("[network]\nupstream_proxy = " + value + "\n", "f.toml", Authority::system).errors)
      all += e.str() + "\n";
    return all;
  };
  CHECK(errors("\"https://proxy.corp:3128\"")
            .starts_with("f.toml:2:18: network.upstream_proxy "
                         "\"https://proxy.corp:3128\": the scheme must be http://"));
  CHECK(errors("\"http://u:S3cret@proxy.corp\"") ==
        "f.toml:2:18: network.upstream_proxy \"http://u:***@proxy.corp\": no port (write http://HOST:PORT, e.g. "
        "http://proxy.example:3128)\n");
  CHECK(errors("\"http://proxy.corp:70000\"")
            .find("2:18: network.upstream_proxy \"http://proxy.corp:70000\": the "
                  "port must be a number from 1 to 65535") != std::string::npos);
  CHECK(errors("\"garbage\"").find("not a URL") != std::string::npos);
  CHECK(errors("3128") == "f.toml:2:18: network.upstream_proxy must be a string: \"http://HOST:PORT\" or \"env\"\n");
  CHECK(errors("\"ENV\"").find("not a URL") != std::string::npos);  // the spelling is "env"
}

TEST_CASE("[network] upstream_proxy = \"env\": the host's HTTPS_PROXY and NO_PROXY, read at resolution") {
  static FakeFs fs = host();
  std::map<std::string, std::string> env;
  auto ctx = context(fs);
  ctx.getenv = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto run = [&] {
    return resolve({layer(kProfile, "pi.toml", Authority::profile),
                    layer("[network]\nupstream_proxy = \"env\"\n", "op.toml", Authority::system)},
                   ctx);
  };
  Resolved unset = run();
  REQUIRE(unset.policy);
  REQUIRE(unset.policy->upstream_proxy());
  CHECK(unset.policy->upstream_proxy()->from_env);
  CHECK_FALSE(unset.policy->upstream_proxy()->url);  // out directly

  env = {{"https_proxy", "http://lower.proxy:1"},
         {"HTTPS_PROXY", "http://bob:pw@proxy.corp:3128"},
         {"no_proxy", "ignored.example"},
         {"NO_PROXY", "corp.example,10.0.0.0/8"}};
  Resolved r = run();
  REQUIRE(r.policy);
  const auto& up = *r.policy->upstream_proxy();
  CHECK(up.url->host == "proxy.corp");
  CHECK(up.url_var == "HTTPS_PROXY");
  CHECK(up.no_proxy_var == "NO_PROXY");
  CHECK(up.no_proxy.matches("git.corp.example", 443));
  CHECK(up.no_proxy.matches("10.2.3.4", 443));
  CHECK_FALSE(up.no_proxy.matches("ignored.example", 443));
  ExplainInput ex{&*r.policy, &r, {}, "/home/u/proj"};
  const std::string text = explain_text(ex), json = explain_json(ex);
  CHECK(text.find("upstream-proxy  env: HTTPS_PROXY=http://bob:***@proxy.corp:3128 (CONNECT; the proxy resolves the "
                  "names); NO_PROXY=corp.example,10.0.0.0/8 op.toml:2:18\n") != std::string::npos);
  for (const std::string& out : {text, json}) CHECK(out.find("pw") == std::string::npos);
  for (const char* field :
       {"\"upstream_proxy\": {", "\"url\": \"http://bob:***@proxy.corp:3128\"", "\"from_env\": true",
        "\"variable\": \"HTTPS_PROXY\"", "\"no_proxy\": \"corp.example,10.0.0.0/8\""})
    CHECK(json.find(field) != std::string::npos);

  env = {{"https_proxy", "http://bob:Secret9@proxy.corp"}};
  Resolved bad = run();
  CHECK_FALSE(bad.policy);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].str() ==
        "op.toml:2:18: upstream_proxy = \"env\": https_proxy \"http://bob:***@proxy.corp\": no port (write "
        "http://HOST:PORT, e.g. http://proxy.example:3128)");
}

TEST_CASE("explain: the upstream proxy's line, its password masked; absent from the JSON when none is set") {
  FakeFs fs = host();
  Resolved r = resolve({layer(kProfile, "pi.toml", Authority::profile),
                        layer("[network]\nallow = [\"api.anthropic.com\"]\n"
                              "upstream_proxy = \"http://svc-pi:Hunter2%21@proxy.corp.example:3128\"\n",
                              "/etc/pi-jail/policy.toml", Authority::system)},
                       context(fs));
  REQUIRE(r.policy);
  ExplainInput ex{&*r.policy, &r, {{Authority::system, "/etc/pi-jail/policy.toml", true}}, "/home/u/proj"};
  check_golden("explain_upstream_proxy.txt", explain_text(ex));
  check_golden("explain_upstream_proxy.json", explain_json(ex));
  for (const std::string& out : {explain_text(ex), explain_json(ex)}) CHECK(out.find("Hunter2") == std::string::npos);
  Resolved plain = resolve({layer(kProfile, "pi.toml", Authority::profile)}, context(fs));
  ExplainInput without{&*plain.policy, &plain, {}, "/home/u/proj"};
  CHECK(explain_json(without).find("upstream_proxy") == std::string::npos);
  CHECK(explain_text(without).find("upstream-proxy") == std::string::npos);
}
