#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "git/config.h"
#include "git/identity.h"
#include "temp_dir.h"

using namespace pj;

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
  const std::string text = git::identity::synthesize({{"~/.gitconfig", kHostConfig}}, left_out);
  CAPTURE(text);
  // It parses as git config, and holds what it should.
  auto parsed = git::config::parse(text);
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
  const std::string text = git::identity::synthesize(
      {{"a", "[user]\n\tname = \"Evil\\n[credential]\\n\\thelper = store\"\n"}, {"b", "[user\n\tname = x\n"}},
      left_out);
  auto parsed = git::config::parse(text);
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

namespace {

using StateDir = pj::test::TempDir;

ino_t inode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

// Fifty runs starting at once in a fresh $HOME: one saw no copy yet, then
// another published it and its jail planned to bind it (its device and
// inode); the first must not remove and replace that file (the other's
// bind then fails, ESTALE, 125).
TEST_CASE("git identity: a copy another run publishes after this run looked for one is used, never replaced") {
  StateDir state;
  const std::string dir = state.path + "/gitconfig";
  const std::string text = "[user]\n\tname = \"A\"\n";
  std::string theirs;
  int bound = -1;  // open, as their jail's bind holds it (its inode cannot be reused meanwhile)
  auto ours = git::identity::detail::publish(dir, text, [&] {
    auto published = git::identity::detail::publish(dir, text);  // the concurrent run
    REQUIRE(published);
    theirs = *published;
    bound = ::open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(bound >= 0);
  });
  REQUIRE(ours);
  CHECK(*ours == theirs);
  struct stat was {};
  REQUIRE(::fstat(bound, &was) == 0);
  ::close(bound);
  CHECK(was.st_nlink == 1);  // still there
  CHECK(inode_of(*ours) == was.st_ino);
  CHECK(contents(*ours) == text);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    CHECK_MESSAGE(e.path().string() == *ours, "left: " << e.path());
  }
  CHECK(files == 1);
}

TEST_CASE(
    "git identity: a file under the copy's name that holds other bytes is replaced; one that holds them is kept") {
  StateDir state;
  const std::string dir = state.path + "/gitconfig";
  const std::string text = "[user]\n\tname = \"B\"\n";
  auto first = git::identity::detail::publish(dir, text);
  REQUIRE(first);
  const ino_t made = inode_of(*first);
  auto again = git::identity::detail::publish(dir, text);
  REQUIRE(again);
  CHECK(*again == *first);
  CHECK(inode_of(*again) == made);  // used as it is

  std::ofstream(*first, std::ios::trunc) << "[user]\n\tname = \"someone else\"\n";
  auto fixed = git::identity::detail::publish(dir, text);
  REQUIRE(fixed);
  CHECK(*fixed == *first);
  CHECK(contents(*fixed) == text);
}

TEST_CASE("git identity: a temporary file left by a run killed mid-write (its pid now ours) does not stop the next") {
  StateDir state;
  const std::string dir = state.path + "/gitconfig";
  const std::string text = "[user]\n\tname = \"C\"\n";
  auto first = git::identity::detail::publish(dir, text);  // learns the copy's name
  REQUIRE(first);
  REQUIRE(::unlink(first->c_str()) == 0);
  // What a SIGKILL between the write and the rename leaves, under every
  // name a run of this pid could choose by its pid.
  std::ofstream(*first + "." + std::to_string(::getpid())) << "half";
  auto next = git::identity::detail::publish(dir, text);
  REQUIRE_MESSAGE(next, next.error().message());
  CHECK(contents(*next) == text);
}
