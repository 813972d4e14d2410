// Model credentials never enter the jail (issue 17), seen from inside a
// real jail: the environment, /proc/self/environ and Pi's auth.json hold
// placeholders only; what the jail leaves in auth.json goes back to the
// host with the real values; signed credentials and project binds are
// refused. (The substitution on the wire is the network filter's, tested
// with the TLS stand-in server.)
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>

#include "harness.h"

using namespace pj::test;

namespace {

const std::string kKey = "sk-ant-api03-" + unique_token() + "KEYkeyKEYkeyKEYkeyKEYkey0123456789abcdefghij";
const std::string kAccess = "sk-ant-oat01-" + unique_token() + "ACCESSaccessACCESSaccess0123456789abcdefghij";
const std::string kRefresh = "sk-ant-ort01-" + unique_token() + "REFRESHrefreshREFRESHrefresh0123456789abcdefg";

// pi-jail -w ws [extra] -- /bin/sh -c script, from ws, HOME=home, the
// caller's key in the environment, the user's operator file in home.
Outcome jail_sh(const Sandbox& sb, const std::string& script, const std::vector<std::string>& extra = {},
                std::vector<std::string> env = {}) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  env.push_back("HOME=" + sb.home);
  env.push_back("XDG_CONFIG_HOME=" + sb.home + "/.config");
  env.push_back("ANTHROPIC_API_KEY=" + kKey);
  return run(argv, env);
}

void host_auth(const Sandbox& sb) {
  std::filesystem::create_directories(sb.home + "/.pi/agent");
  write_file(sb.home + "/.pi/agent/auth.json",
             R"({"anthropic":{"type":"oauth","refresh":")" + kRefresh + R"(","access":")" + kAccess +
                 R"(","expires":1767225600000}})");
  std::filesystem::permissions(sb.home + "/.pi/agent/auth.json", std::filesystem::perms::owner_read |
                                                                     std::filesystem::perms::owner_write);
}

bool holds_secret(const std::string& text) {
  for (const auto& s : {kKey, kAccess, kRefresh})
    if (text.find(s.substr(13, 24)) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("inside the jail only placeholders: env, /proc/self/environ, Pi's auth.json; the report names bindings") {
  Sandbox sb;
  host_auth(sb);
  const std::string report = sb.outside + "/report.json";
  auto o = jail_sh(sb,
                   "env; tr '\\0' '\\n' < /proc/self/environ; cat $HOME/.pi/agent/auth.json; "
                   // The needle split by "": the command line (in the report) must not hold it either.
                   "grep -rl " + kKey.substr(13, 12) + "\"\"" + kKey.substr(25, 12) +
                       " $HOME /tmp /proc/self/environ . 2>/dev/null; echo done",
                   {"--report", report});
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  CHECK_FALSE(holds_secret(o.out));
  CHECK_FALSE(holds_secret(o.err));
  // The placeholders keep the provider's prefix and the real length.
  std::smatch m;
  REQUIRE(std::regex_search(o.out, m, std::regex("ANTHROPIC_API_KEY=(sk-ant-api03-[A-Za-z0-9]+)")));
  CHECK(m[1].str().size() == kKey.size());
  CHECK(std::regex_search(o.out, std::regex("\"access\": \"sk-ant-oat01-[A-Za-z0-9]+\"")));
  CHECK(std::regex_search(o.out, std::regex("\"refresh\": \"sk-ant-ort01-[A-Za-z0-9]+\"")));
  CHECK(o.out.find("\"expires\": 1767225600000") != std::string::npos);
  // The host's file is untouched; the report lists each binding, no secret.
  CHECK(read_file(sb.home + "/.pi/agent/auth.json").find(kRefresh) != std::string::npos);
  const std::string text = read_file(report);
  CHECK_FALSE(holds_secret(text));
  CHECK(text.find("\"name\": \"ANTHROPIC_API_KEY\"") != std::string::npos);
  CHECK(text.find("\"name\": \"auth.json anthropic.refresh\"") != std::string::npos);
  CHECK(text.find("\"platform.claude.com:443\"") != std::string::npos);
  auto v = validate_report(report);
  CAPTURE(v.out);
  CAPTURE(v.err);
  CHECK(v.status == 0);
}

TEST_CASE("what the jail leaves in auth.json goes back with the real values, never a placeholder") {
  Sandbox sb;
  host_auth(sb);
  // Pi rewrites the file (here: a later expiry) with the placeholders it holds.
  auto o = jail_sh(sb, "f=$HOME/.pi/agent/auth.json; grep -o 'sk-ant-o[ar]t01-[A-Za-z0-9]*' $f; "
                       "sed 's/1767225600000/1767229200000/' $f > $f.new && mv $f.new $f && echo rewritten");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.find("rewritten") != std::string::npos);
  const std::string host = read_file(sb.home + "/.pi/agent/auth.json");
  CHECK(host.find("1767229200000") != std::string::npos);  // the jail's data change applied
  CHECK(host.find(kAccess) != std::string::npos);
  CHECK(host.find(kRefresh) != std::string::npos);
  std::smatch m;
  std::string seen = o.out;
  while (std::regex_search(seen, m, std::regex("sk-ant-o[ar]t01-[A-Za-z0-9]+"))) {
    CHECK(host.find(m[0].str()) == std::string::npos);  // no placeholder reached the host
    seen = m.suffix();
  }
}

TEST_CASE("a signed credential an operator passes is refused (125) unless passed through; a project binds nothing") {
  Sandbox sb;
  std::filesystem::create_directories(sb.home + "/.config/pi-jail");
  write_file(sb.home + "/.config/pi-jail/policy.toml", "[env]\npass = [\"AWS_ACCESS_KEY_ID\"]\n");
  auto refused = jail_sh(sb, "echo ran", {}, {"AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CHECK(refused.status == 125);
  CHECK(refused.out.find("ran") == std::string::npos);
  CHECK(refused.err.find("AWS_ACCESS_KEY_ID") != std::string::npos);
  CHECK(refused.err.find("pass_through") != std::string::npos);
  CHECK(refused.err.find("AKIAREALVALUE0001") == std::string::npos);

  write_file(sb.home + "/.config/pi-jail/policy.toml",
             "[env]\npass = [\"AWS_ACCESS_KEY_ID\"]\n[credentials]\npass_through = [\"AWS_ACCESS_KEY_ID\"]\n");
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[credentials]\nbind = { anthropic = [\"evil.example\"] }\n");
  auto passed = jail_sh(sb, "echo $AWS_ACCESS_KEY_ID", {}, {"AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CAPTURE(passed.err);
  CHECK(passed.status == 0);
  CHECK(trim(passed.out) == "AKIAREALVALUE0001");
  CHECK(passed.err.find(".pi/jail.toml:2:23") != std::string::npos);
  CHECK(passed.err.find("credentials are bound to hosts by operators") != std::string::npos);
  auto explain = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "explain"},
                     {"HOME=" + sb.home, "XDG_CONFIG_HOME=" + sb.home + "/.config", "ANTHROPIC_API_KEY=" + kKey,
                      "AWS_ACCESS_KEY_ID=AKIAREALVALUE0001"});
  CHECK(explain.out.find("ANTHROPIC_API_KEY: placeholder sk-ant-api03-<random> -> api.anthropic.com:443 (the "
                         "profile's provider table)") != std::string::npos);
  CHECK(explain.out.find("AWS_ACCESS_KEY_ID: pass-through") != std::string::npos);
  CHECK(explain.out.find("evil.example:443 (") == std::string::npos);
  CHECK_FALSE(holds_secret(explain.out + explain.err));
  CHECK(explain.out.find("AKIAREALVALUE0001") == std::string::npos);
}
