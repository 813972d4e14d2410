// Operator-only grants that reach past the jail's walls: agent sockets
// ([filesystem] sockets) and published ports ([network] publish,
// --publish). Loading, resolving (a project cannot ask) and explain.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "policy/explain.h"
#include "policy/policy.h"
#include "runtime/request.h"

using namespace pj::policy;

namespace {

Context context(std::map<std::string, std::string> env) {
  Context ctx{"/home/u/proj", "/home/u", "/home/u/proj", {}, [](const std::string& p) { return std::optional(p); },
              std::nullopt};
  ctx.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return ctx;
}

Layer layer(const std::string& text, const std::string& name, Authority a) {
  auto loaded = load_layer(text, name, a);
  for (const auto& e : loaded.errors) FAIL_CHECK(e.str());
  return loaded.layer;
}

std::string all(const std::vector<Diagnostic>& v) {
  std::string s;
  for (const auto& d : v) s += d.str() + "\n";
  return s;
}

}  // namespace

TEST_CASE("publish: PORT, HOSTPORT:JAILPORT and loopback addresses; anything else is refused with the fix") {
  struct Case {
    const char* text;
    const char* want;  // str(), or "" when refused
  } cases[] = {
      {"3000", "127.0.0.1:3000:3000"},
      {"3000:8000", "127.0.0.1:3000:8000"},
      {"127.0.0.1:3000", "127.0.0.1:3000:3000"},
      {"localhost:3000:80", "127.0.0.1:3000:80"},
      {"[::1]:3000", "[::1]:3000:3000"},
      {"[::1]:3000:8080", "[::1]:3000:8080"},
      {"0.0.0.0:3000", ""},
      {"192.168.1.2:3000", ""},
      {"[::]:3000", ""},
      {"0", ""},
      {"65536", ""},
      {"3000:", ""},
      {":3000", ""},
      {"3000:8000:9000", ""},
      {"127.0.0.1", ""},
      {"[::1]3000", ""},
      {"-1", ""},
      {"300000000000000000000", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    std::string why;
    auto p = parse_publish(c.text, why);
    if (*c.want) {
      REQUIRE(p);
      CHECK(p->str() == c.want);
    } else {
      CHECK_FALSE(p);
      CHECK_FALSE(why.empty());
    }
  }
  std::string why;
  CHECK_FALSE(parse_publish("0.0.0.0:3000", why));
  CHECK(why.find("not the host's loopback") != std::string::npos);
  CHECK(why.find("127.0.0.1:3000") != std::string::npos);
}

TEST_CASE("a bad publish entry is an error at its file:line:column") {
  auto loaded = load_layer("[network]\npublish = [\"3000\", \"0.0.0.0:8080\"]\n", "op.toml", Authority::user);
  REQUIRE(loaded.errors.size() == 1);
  CHECK(loaded.errors[0].str().starts_with("op.toml:2:20: bad publish \"0.0.0.0:8080\""));
  REQUIRE(loaded.layer.publish.size() == 1);
  CHECK(loaded.layer.publish[0].text == "127.0.0.1:3000:3000");
}

TEST_CASE(
    "operator sockets: $NAME from pi-jail's environment, set inside; unset is refused, a relative path is an error") {
  auto ctx = context({{"SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"}, {"XDG_RUNTIME_DIR", "/run/user/1000"}});
  auto r = resolve({layer("[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\", \"$XDG_RUNTIME_DIR/gnupg/S.gpg-agent\", "
                          "\"/run/user/1000/gnupg/S.gpg-agent.ssh\", \"$GPG_AGENT_SOCK\"]\n",
                          "op.toml", Authority::user)},
                   ctx);
  INFO(all(r.errors));
  REQUIRE(r.policy);
  const auto& s = r.policy->sockets();
  REQUIRE(s.size() == 3);
  CHECK(s[0].path == "/tmp/ssh-x/agent.1");
  CHECK(s[0].env == "SSH_AUTH_SOCK");
  CHECK(s[0].src.str() == "op.toml:2:12");
  CHECK(s[1].path == "/run/user/1000/gnupg/S.gpg-agent");
  CHECK(s[1].env.empty());  // a path below the variable: the variable keeps its own value
  CHECK(s[2].path == "/run/user/1000/gnupg/S.gpg-agent.ssh");
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].str().find("sockets $GPG_AGENT_SOCK: $GPG_AGENT_SOCK is not set") != std::string::npos);

  pj::runtime::Request req;
  pj::runtime::apply_policy(*r.policy, req);
  REQUIRE(req.sockets.size() == 3);
  CHECK(req.sockets[0].why == "socket grant op.toml:2:12");
  auto env = pj::runtime::jail_env(req, "/tmp", std::nullopt);
  CHECK(std::find(env.begin(), env.end(), "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1") != env.end());

  auto bad = resolve({layer("[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\"]\n", "op.toml", Authority::user)},
                     context({{"SSH_AUTH_SOCK", "agent.sock"}}));
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].str().find("op.toml:2:12: sockets \"$SSH_AUTH_SOCK\" (agent.sock)") == 0);
  auto dollar = resolve({layer("[filesystem]\nsockets = [\"$/x\"]\n", "op.toml", Authority::user)}, ctx);
  REQUIRE(dollar.errors.size() == 1);
}

TEST_CASE("a project asking for a socket or a published port is refused and reported, never applied") {
  auto ctx = context({{"SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"}});
  auto r = resolve({layer("[network]\npublish = [\"3000\"]\n", "op.toml", Authority::user),
                    layer("[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\", \"/run/user/1000/gnupg/S.gpg-agent\"]\n"
                          "[network]\npublish = [\"8080\"]\n",
                          ".pi/jail.toml", Authority::project)},
                   ctx);
  REQUIRE(r.policy);
  CHECK(r.policy->sockets().empty());
  REQUIRE(r.policy->publish().size() == 1);
  CHECK(r.policy->publish()[0].spec.host_port == 3000);
  std::string refused;
  for (const auto& x : r.refused) refused += x.str() + "\n";
  CHECK(refused.find(".pi/jail.toml:2:12: sockets $SSH_AUTH_SOCK: socket grants are set by operators") !=
        std::string::npos);
  CHECK(refused.find(".pi/jail.toml:2:30: sockets /run/user/1000/gnupg/S.gpg-agent") != std::string::npos);
  CHECK(refused.find(".pi/jail.toml:4:12: publish 127.0.0.1:8080:8080: published ports are set by operators") !=
        std::string::npos);
  // The same with on_excess = "error": the run stops.
  auto strict = resolve({layer("[policy]\non_excess = \"error\"\n", "op.toml", Authority::user),
                         layer("[network]\npublish = [\"8080\"]\n", ".pi/jail.toml", Authority::project)},
                        ctx);
  CHECK_FALSE(strict.policy);
}

TEST_CASE("a host port published twice is an error naming the first") {
  Layer cli;
  cli.authority = Authority::command_line;
  cli.name = "command line";
  cli.publish.push_back({"127.0.0.1:3000:3000", {"--publish", 0, 0}});
  auto r = resolve({layer("[network]\npublish = [\"3000:8000\", \"[::1]:3000\"]\n", "op.toml", Authority::user), cli},
                   context({}));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].str() ==
        "--publish: publish \"127.0.0.1:3000:3000\": host port 3000 is already published by "
        "op.toml:2:12");
}

TEST_CASE("explain shows sockets, the variable set inside, and published ports with their sources") {
  auto r = resolve({layer("[filesystem]\nsockets = [\"$SSH_AUTH_SOCK\"]\n[network]\npublish = [\"3000:8000\"]\n",
                          "op.toml", Authority::user)},
                   context({{"SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"}}));
  REQUIRE(r.policy);
  ExplainInput ex{&*r.policy, &r, {{Authority::user, "op.toml", true}}, "/home/u/proj"};
  std::string text = explain_text(ex);
  CHECK(text.find("socket          /tmp/ssh-x/agent.1") != std::string::npos);
  CHECK(text.find("publish         host 127.0.0.1:3000 -> jail 127.0.0.1:8000") != std::string::npos);
  CHECK(text.find("set             SSH_AUTH_SOCK=/tmp/ssh-x/agent.1") != std::string::npos);
  std::string json = explain_json(ex);
  CHECK(json.find("\"kind\": \"socket\"") != std::string::npos);
  CHECK(json.find("\"jail_port\": 8000") != std::string::npos);
}
