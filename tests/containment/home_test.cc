// $HOME inside: the workspace's own jail home, never the real home.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

// The one jail home pi-jail made under the sandbox's home.
std::string the_jail_home(const Sandbox& sb) {
  const std::string homes = sb.home + "/.local/share/pi-jail/homes";
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(homes, ec))
    if (e.is_directory() && !e.is_symlink()) dirs.push_back(e.path().string());
  REQUIRE(dirs.size() == 1);
  return dirs.front();
}

Outcome probe_in(const Sandbox& sb, const std::string& ws, const std::vector<std::string>& args,
                 const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{pi_jail(), "-q", "-w", ws, "--allow-read", probe_dir()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.push_back(probe());
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {"HOME=" + sb.home, "XDG_DATA_HOME="});
}

}  // namespace

TEST_CASE("$HOME inside is the workspace's jail home: writable, kept for the next run, never the real home") {
  Sandbox sb;
  auto w = probe_in(sb, sb.ws, {"write", sb.home + "/.npmrc"});
  CHECK(trim(w.out) == "ok");
  CHECK_FALSE(exists(sb.home + "/.npmrc"));  // the real home is untouched
  const std::string jh = the_jail_home(sb);
  CHECK(read_file(jh + "/.npmrc") == "probe\n");
  struct stat st;
  REQUIRE(::stat(jh.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == ::getuid());
  CHECK(trim(read_file(jh + ".workspace")) == sb.ws);

  // The next run of the same workspace finds it.
  auto r = probe_in(sb, sb.ws, {"read", sb.home + "/.npmrc"});
  CHECK(trim(r.out) == "ok 6");
  // The real home's secrets are not there.
  auto key = probe_in(sb, sb.ws, {"read", sb.home + "/.ssh/id_ed25519"});
  CHECK(trim(key.out) == "ENOENT");
  auto env = probe_in(sb, sb.ws, {"env", "HOME"});
  CHECK(trim(env.out) == sb.home);

  // Another workspace has a home of its own.
  const std::string ws2 = sb.base + "/ws2";
  std::filesystem::create_directories(ws2);
  auto other = probe_in(sb, ws2, {"read", sb.home + "/.npmrc"});
  CHECK(trim(other.out) == "ENOENT");
}

TEST_CASE("--ephemeral-home: the run's own writable $HOME, gone at the end; nothing is kept") {
  Sandbox sb;
  auto w = probe_in(sb, sb.ws, {"write", sb.home + "/.npmrc"}, {"--ephemeral-home"});
  CHECK(trim(w.out) == "ok");
  auto r = probe_in(sb, sb.ws, {"read", sb.home + "/.npmrc"}, {"--ephemeral-home"});
  CHECK(trim(r.out) == "ENOENT");
  CHECK_FALSE(exists(sb.home + "/.local/share/pi-jail/homes"));
  CHECK_FALSE(exists(sb.home + "/.npmrc"));
}

TEST_CASE("a jail home that is a symlink, or recorded for another workspace, stops the run with 125") {
  Sandbox sb;
  CHECK(trim(probe_in(sb, sb.ws, {"write", sb.home + "/x"}).out) == "ok");
  const std::string jh = the_jail_home(sb);
  std::filesystem::remove_all(jh);
  REQUIRE(::symlink(sb.outside.c_str(), jh.c_str()) == 0);
  auto linked = probe_in(sb, sb.ws, {"write", sb.home + "/y"});
  CHECK(linked.status == 125);
  CHECK(linked.err.find("open the jail home " + jh) != std::string::npos);
  CHECK_FALSE(exists(sb.outside + "/y"));

  ::unlink(jh.c_str());
  write_file(jh + ".workspace", "/somewhere/else\n");
  auto taken = probe_in(sb, sb.ws, {"write", sb.home + "/y"});
  CHECK(taken.status == 125);
  CHECK(taken.err.find("belongs to another workspace") != std::string::npos);
}

TEST_CASE("a symlink the jail left in its home where a grant is mounted is removed, never followed") {
  Sandbox sb;
  CHECK(trim(probe_in(sb, sb.ws, {"write", sb.home + "/x"}).out) == "ok");
  const std::string jh = the_jail_home(sb);
  // What a jail could leave: its ~/.aws a link to a directory of the host.
  REQUIRE(::symlink(sb.outside.c_str(), (jh + "/.aws").c_str()) == 0);
  auto r = probe_in(sb, sb.ws, {"read", sb.home + "/.aws/credentials"}, {"--allow-read", sb.home + "/.aws"});
  CHECK(r.status == 0);
  CHECK(trim(r.out) == "ok 11");  // the granted real ~/.aws/credentials
  struct stat st;
  REQUIRE(::lstat((jh + "/.aws").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(exists(sb.outside + "/secret"));
}

namespace {

Outcome git_in(const Sandbox& sb, const std::vector<std::string>& args, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{pi_jail(), "-q", "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.push_back("/usr/bin/git");
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv,
             {"HOME=" + sb.home, "XDG_DATA_HOME=", "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "GIT_CONFIG_NOSYSTEM=1"});
}

}  // namespace

TEST_CASE("git inside commits as the host's identity and never sees its credential helpers, tokens or includes") {
  Sandbox sb;
  write_file(sb.home + "/.gitconfig",
             "[user]\n\tname = Host User\n\temail = host@example.test\n"
             "[credential]\n\thelper = store --file /tmp/pwned-creds\n"
             "[url \"https://x-access-token:SECRET-TOKEN@github.com/\"]\n\tinsteadOf = https://github.com/\n"
             "[include]\n\tpath = ~/.gitconfig.secrets\n"
             "[alias]\n\tpwn = !touch /tmp/pwned\n");
  write_file(sb.home + "/.gitconfig.secrets", "[http]\n\textraHeader = Authorization: Bearer SECRET-HEADER\n");
  REQUIRE(run({"/usr/bin/git", "init", "-q", sb.ws}, {"HOME=" + sb.home}).status == 0);

  auto list = git_in(sb, {"config", "--list", "--show-origin"});
  CAPTURE(list.out);
  CAPTURE(list.err);
  CHECK(list.status == 0);
  CHECK(list.out.find("user.name=Host User") != std::string::npos);
  std::string from_home;  // the host's /etc/gitconfig is the system's, shown as is
  for (size_t at = 0; at < list.out.size();) {
    size_t end = list.out.find('\n', at);
    if (end == std::string::npos) end = list.out.size();
    std::string line = list.out.substr(at, end - at);
    if (!line.starts_with("file:/etc/gitconfig")) from_home += line + "\n";
    at = end + 1;
  }
  for (const char* secret : {"SECRET-TOKEN", "SECRET-HEADER", "credential.", "include.", "alias."})
    CHECK(from_home.find(secret) == std::string::npos);

  auto commit = git_in(sb, {"commit", "-q", "--allow-empty", "-m", "from the jail"});
  CAPTURE(commit.err);
  CHECK(commit.status == 0);
  auto log = run({"/usr/bin/git", "-C", sb.ws, "log", "-1", "--format=%an <%ae>"}, {"HOME=" + sb.home});
  CHECK(trim(log.out) == "Host User <host@example.test>");

  // `git config --global` inside writes the jail home's ~/.gitconfig,
  // which wins over the host's values in the next run; the host's file
  // is untouched.
  CHECK(git_in(sb, {"config", "--global", "user.name", "Jail Name"}).status == 0);
  CHECK(trim(git_in(sb, {"config", "user.name"}).out) == "Jail Name");
  CHECK(read_file(sb.home + "/.gitconfig").find("Jail Name") == std::string::npos);

  // An ssh remote says why it cannot work, not "Could not resolve hostname".
  auto ssh = git_in(sb, {"ls-remote", "ssh://git@example.test/x.git"});
  CHECK(ssh.status != 0);
  CHECK(ssh.err.find("ssh cannot connect from inside the jail") != std::string::npos);
  CHECK(ssh.err.find("pi-jail --allow-ssh example.test") != std::string::npos);
}

TEST_CASE("your own terminfo is shown read-only in the jail home; the rest of the real home is not") {
  Sandbox sb;
  std::filesystem::create_directories(sb.home + "/.terminfo/x");
  write_file(sb.home + "/.terminfo/x/xterm-custom", "terminfo\n");
  auto r = probe_in(sb, sb.ws, {"read", sb.home + "/.terminfo/x/xterm-custom"});
  CHECK(trim(r.out) == "ok 9");
  auto w = probe_in(sb, sb.ws, {"write", sb.home + "/.terminfo/x/evil"});
  CHECK(trim(w.out) == "EROFS");
  CHECK_FALSE(exists(sb.home + "/.terminfo/x/evil"));
  CHECK(trim(probe_in(sb, sb.ws, {"read", sb.home + "/.aws/credentials"}).out) == "ENOENT");
}

TEST_CASE("a symlinked ~/.terminfo is shown run after run: into a dotfiles directory, or into /usr (a link kept)") {
  for (const bool into_usr : {false, true}) {
    CAPTURE(into_usr);
    Sandbox sb;
    std::filesystem::create_directories(sb.home + "/dotfiles/terminfo/x");
    write_file(sb.home + "/dotfiles/terminfo/x/xterm-custom", "terminfo\n");
    const std::string target = into_usr ? "/usr/share/terminfo" : sb.home + "/dotfiles/terminfo";
    if (into_usr && !std::filesystem::is_directory(target)) continue;  // no system terminfo to point at
    REQUIRE(::symlink(target.c_str(), (sb.home + "/.terminfo").c_str()) == 0);
    for (int run = 0; run < 2; ++run) {  // the second run finds what the first left in the jail home
      CAPTURE(run);
      auto o = probe_in(sb, sb.ws, {"ls", sb.home + "/.terminfo/"});
      CAPTURE(o.err);
      CHECK(o.status == 0);
      if (!into_usr) CHECK(o.out.find("x") != std::string::npos);
    }
  }
}
