#include <doctest/doctest.h>

#include <algorithm>

#include "git_config.h"
#include "git_identity.h"

using namespace pj::supervisor;

namespace {

const char* kHostConfig = R"([user]
	name = Host User
	email = "host@example.test"
[init]
	defaultBranch = trunk
[color "diff"]
	meta = yellow
[credential]
	helper = store
[credential "https://github.com"]
	helper = !gh auth git-credential
[url "https://x-access-token:SECRET-TOKEN@github.com/"]
	insteadOf = https://github.com/
[include]
	path = ~/.gitconfig.secrets
[includeIf "gitdir:~/work/"]
	path = ~/.gitconfig.work
[alias]
	pwn = !touch /tmp/pwned
[core]
	sshCommand = ssh -i ~/.ssh/work_key
	hooksPath = ~/.githooks
	editor = vim
[filter "lfs"]
	clean = git-lfs clean -- %f
[http]
	extraHeader = Authorization: Bearer SECRET-HEADER
[gpg]
	program = /usr/bin/gpg2
[commit]
	gpgSign = true
)";

}  // namespace

TEST_CASE("git identity: the allowlisted settings pass, credentials, rewrites, includes and commands never") {
  std::vector<std::string> left_out;
  const std::string text = git_identity::synthesize({{"~/.gitconfig", kHostConfig}}, left_out);
  CAPTURE(text);
  // It parses as git config, and holds what it should.
  auto parsed = git_config::parse(text);
  REQUIRE(parsed.error_line == 0);
  std::vector<std::string> keys;
  for (const auto& e : parsed.entries) keys.push_back(e.key() + "=" + e.value.value_or(""));
  auto has = [&](const std::string& kv) { return std::find(keys.begin(), keys.end(), kv) != keys.end(); };
  CHECK(has("user.name=Host User"));
  CHECK(has("user.email=host@example.test"));
  CHECK(has("init.defaultbranch=trunk"));
  CHECK(has("color.diff.meta=yellow"));
  CHECK(has("core.editor=vim"));
  std::string settings;  // the text without its comment lines
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text[at] != '#') settings += text.substr(at, end - at) + "\n";
    at = end + 1;
  }
  for (const char* secret : {"SECRET-TOKEN", "SECRET-HEADER", "credential", "gh auth", "insteadof", "include",
                             "gitconfig.secrets", "pwned", "work_key", "githooks", "lfs", "gpg"})
    CHECK(settings.find(secret) == std::string::npos);
  // The one core.sshCommand is pi-jail's hint.
  int ssh = 0;
  for (const auto& e : parsed.entries)
    if (e.key() == "core.sshcommand") {
      ++ssh;
      CHECK(e.value->find("ssh cannot connect from inside the jail") != std::string::npos);
    }
  CHECK(ssh == 1);
  CHECK(std::find(left_out.begin(), left_out.end(), "credential.helper") != left_out.end());
}

TEST_CASE("git identity: values are quoted so they cannot start a section; a broken file passes nothing") {
  std::vector<std::string> left_out;
  const std::string text = git_identity::synthesize(
      {{"a", "[user]\n\tname = \"Evil\\n[credential]\\n\\thelper = store\"\n"}, {"b", "[user\n\tname = x\n"}},
      left_out);
  auto parsed = git_config::parse(text);
  REQUIRE(parsed.error_line == 0);
  int names = 0;
  for (const auto& e : parsed.entries) {
    CHECK(e.section != "credential");
    if (e.key() == "user.name") {
      ++names;
      CHECK(*e.value == "Evil\n[credential]\n\thelper = store");
    }
  }
  CHECK(names == 1);  // b's is not passed
  CHECK(std::any_of(left_out.begin(), left_out.end(), [](const std::string& s) { return s.starts_with("b:"); }));
}
