// Every tested Pi release against the pi profile: the hosts its provider
// tables and OAuth modules send requests to, and the credential variables
// it reads, are extracted from the installed package (pinned and newest,
// tests/e2e/install-pi) and each must be allowed / passed by the profile
// (as `pi-jail explain` shows it), or be on a short list below that says
// why it is left out.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"
#include "pi_world.h"

using namespace pj::test;
namespace fs = std::filesystem;

namespace {

// Hosts in Pi's sources that the profile leaves out on purpose.
const std::map<std::string, std::string> kHostsLeftOut = {
    {"claude.ai", "Anthropic's authorize page: opened in the user's browser, never requested by Pi"},
    {"github.com", "Copilot's device login and every repository besides: log in outside the jail or allow it"},
    {"docs.aws.amazon.com", "a documentation link in an error message"},
    {"cloud.google.com", "a documentation link in an error message"},
    {"vercel.com", "a documentation link in a schema description"},
    {"localhost", "OAuth callback servers Pi runs itself"},
    {"127.0.0.1", "OAuth callback servers Pi runs itself"},
};
// Variables Pi reads that the profile does not pass (its [env] comment
// says so): general cloud credentials or paths to credential files, far
// wider than a model.
const std::set<std::string> kVarsLeftOut = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
};

bool host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'; }

// The literal a variable `name` defaults to in `js`: from
// `const name = ... || "literal"` (Pi's `const domain = enterpriseDomain ||
// "github.com"`) or `name || "literal"`; empty when there is none.
std::string literal_default(const std::string& js, const std::string& name) {
  size_t at = js.find("const " + name + " = ");
  size_t from = at == std::string::npos ? js.find(name + " || \"") : js.find("|| \"", at);
  if (from == std::string::npos || (at != std::string::npos && js.find('\n', at) < from)) return "";
  size_t s = js.find('"', from) + 1;
  return js.substr(s, js.find('"', s) - s);
}

// The host names after "https://" (and "http://") in `js`: literal ones,
// and templated ones whose `${name}` has a literal default in the same
// file (literal_default). Templates without one are skipped.
std::set<std::string> hosts_in(const std::string& js) {
  std::set<std::string> out;
  for (const std::string scheme : {"https://", "http://"}) {
    for (size_t at = js.find(scheme); at != std::string::npos; at = js.find(scheme, at + 1)) {
      std::string host;
      size_t i = at + scheme.size();
      while (i < js.size()) {
        if (host_char(js[i])) {
          host += js[i++];
        } else if (js.compare(i, 2, "${") == 0) {
          size_t close = js.find('}', i);
          if (close == std::string::npos) break;
          std::string def = literal_default(js, js.substr(i + 2, close - i - 2));
          if (def.empty()) {
            host.clear();
            break;
          }
          host += def;
          i = close + 1;
        } else {
          break;
        }
      }
      while (!host.empty() && host.back() == '.') host.pop_back();
      if (host.find('.') != std::string::npos || host == "localhost") out.insert(host);
    }
  }
  return out;
}

// The string literals in `js` that look like environment variable names
// ("ABC_DEF").
std::set<std::string> env_names_in(const std::string& js) {
  std::set<std::string> out;
  for (size_t at = js.find('"'); at != std::string::npos;) {
    size_t end = js.find('"', at + 1);
    if (end == std::string::npos) break;
    std::string s = js.substr(at + 1, end - at - 1);
    bool ok =
        s.size() > 3 && s.find('_') != std::string::npos && std::isupper(static_cast<unsigned char>(s[0])) &&
        std::all_of(s.begin(), s.end(), [](char c) {
          return std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
        });
    if (ok) out.insert(s);
    at = js.find('"', end + 1);
  }
  return out;
}

// hosts_in() of every .js file in `dir` (each file on its own, so that a
// template's default comes from its own file).
std::set<std::string> hosts_under(const std::string& dir) {
  std::set<std::string> all;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".js") continue;
    auto hosts = hosts_in(read_file(e.path().string()));
    all.insert(hosts.begin(), hosts.end());
  }
  return all;
}

// The "pi" profile's rules of `kind` ("allow", "pass") as `pi-jail
// explain` lists them (only those from the profile itself).
std::vector<std::string> profile_rules(const std::string& kind) {
  Sandbox sb;
  Outcome o = run({pi_jail(), "-w", sb.ws, "explain"}, {"HOME=" + sb.home});
  REQUIRE_MESSAGE(o.status == 0, o.err);
  std::vector<std::string> out;
  std::istringstream lines(o.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string k, value;
    words >> k >> value;
    if (k == kind && line.find("profile pi (built in)") != std::string::npos) out.push_back(value);
  }
  return out;
}

bool covered(const std::string& name, const std::vector<std::string>& rules) {
  for (const auto& r : rules) {
    if (r == name) return true;
    if (r.size() > 1 && r.back() == '*' && name.compare(0, r.size() - 1, r, 0, r.size() - 1) == 0) return true;
    if (r.size() > 2 && r.compare(0, 2, "*.") == 0 && name.size() > r.size() - 1 &&
        name.compare(name.size() - (r.size() - 1), r.size() - 1, r, 1) == 0)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("every tested Pi release: its provider, OAuth login and refresh hosts are allowed by the pi profile") {
  auto allow = profile_rules("allow");
  REQUIRE(allow.size() > 10);
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    std::string ai = prefix + "/node_modules/@earendil-works/pi-ai/dist";
    std::set<std::string> hosts = hosts_under(ai + "/providers");
    std::set<std::string> oauth = hosts_under(ai + "/auth/oauth");
    hosts.insert(oauth.begin(), oauth.end());
    // The extraction itself found what is known to be there.
    REQUIRE(hosts.count("api.anthropic.com"));
    REQUIRE(hosts.count("platform.claude.com"));
    REQUIRE(hosts.count("api.github.com"));
    std::string missing;
    for (const auto& h : hosts)
      if (!kHostsLeftOut.count(h) && !covered(h, allow)) missing += " " + h;
    CHECK_MESSAGE(missing.empty(), "hosts Pi " << label << " requests that the pi profile does not allow:" << missing);
  }
}

TEST_CASE("every tested Pi release: the credential variables it reads are passed by the pi profile") {
  auto pass = profile_rules("pass");
  REQUIRE(pass.size() > 10);
  for (const auto& [label, prefix] : pi_versions()) {
    CAPTURE(label);
    std::set<std::string> vars =
        env_names_in(read_file(prefix + "/node_modules/@earendil-works/pi-ai/dist/env-api-keys.js"));
    REQUIRE(vars.count("ANTHROPIC_API_KEY"));
    REQUIRE(vars.count("OPENAI_API_KEY"));
    std::string missing;
    for (const auto& v : vars)
      if (!kVarsLeftOut.count(v) && !covered(v, pass)) missing += " " + v;
    CHECK_MESSAGE(missing.empty(), "variables Pi " << label << " reads that the pi profile does not pass:" << missing);
  }
}
