// What the host's git runs, wherever the repository's config points: the
// hooks directory core.hooksPath names, a config file included from the
// worktree, a nested repository's hooks and config, and a bare remote
// granted for `git push` are read-only in the jail (the kernel says
// EROFS), and the host's next git command runs only what was there. A
// protected path that is a symlink stops the run, wherever it points.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "text.h"

using namespace pj::test;

namespace {

// pi-jail -q -w ws [extra] -- /bin/sh -c SCRIPT from ws, under a guard
// of 120 s (status 124 when the supervisor hangs).
Outcome jail_sh(const Sandbox& sb, const std::string& script, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{"/usr/bin/timeout", "120", "/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  return run(argv, {"HOME=" + sb.home});
}

// The host's git, in `dir`.
Outcome git_in(const Sandbox& sb, const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/git", "-c", "user.name=t", "-c", "user.email=t@e", "-C", dir});
  return run(args, {"HOME=" + sb.home});
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// An executable hook that appends `word` to `log`.
void hook(const std::string& path, const std::string& log, const std::string& word) {
  write_file(path, "#!/bin/sh\necho " + word + " >> " + log + "\n");
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
}

// The same hook, as a shell line the jail runs: it tries to plant one.
std::string plant(const std::string& path, const std::string& log) {
  return "printf '#!/bin/sh\\necho planted >> " + log + "\\n' > " + path + " && chmod +x " + path;
}

}  // namespace

TEST_CASE(
    "with core.hooksPath = .githooks the jail can neither rewrite nor add a hook; the host's commit runs the "
    "original") {
  Sandbox sb;
  const std::string log = sb.outside + "/hooks.log";
  REQUIRE(git_in(sb, sb.ws, {"init", "-q"}).status == 0);
  REQUIRE(::mkdir((sb.ws + "/.githooks").c_str(), 0755) == 0);
  hook(sb.ws + "/.githooks/pre-commit", log, "original");
  REQUIRE(git_in(sb, sb.ws, {"config", "core.hooksPath", ".githooks"}).status == 0);

  auto o = jail_sh(sb, plant(".githooks/pre-commit", log) + "; " + plant(".githooks/post-commit", log) +
                           "; echo x > file && echo wrote");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "wrote"));  // the rest of the workspace stays writable
  CHECK(count(o.err, "Read-only file system") == 2);
  CHECK_FALSE(exists(sb.ws + "/.githooks/post-commit"));

  REQUIRE(git_in(sb, sb.ws, {"commit", "-q", "--allow-empty", "-m", "host"}).status == 0);
  CHECK(read_file(log) == "original\n");
}

TEST_CASE("a config the repository includes from its worktree is read-only, and so are the hooks it names") {
  Sandbox sb;
  const std::string log = sb.outside + "/hooks.log";
  REQUIRE(git_in(sb, sb.ws, {"init", "-q"}).status == 0);
  write_file(sb.ws + "/team.gitconfig", "[core]\n\thooksPath = team-hooks\n");
  REQUIRE(git_in(sb, sb.ws, {"config", "include.path", "../team.gitconfig"}).status == 0);
  REQUIRE(::mkdir((sb.ws + "/team-hooks").c_str(), 0755) == 0);
  hook(sb.ws + "/team-hooks/pre-commit", log, "original");

  auto o = jail_sh(sb, "printf '[core]\\n\\tfsmonitor = touch " + sb.outside + "/pwned\\n' >> team.gitconfig; " +
                           plant("team-hooks/pre-commit", log) + "; " + plant("team-hooks/post-commit", log) +
                           "; echo done");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "done"));
  CHECK(count(o.err, "Read-only file system") == 3);
  CHECK(read_file(sb.ws + "/team.gitconfig") == "[core]\n\thooksPath = team-hooks\n");

  REQUIRE(git_in(sb, sb.ws, {"commit", "-q", "--allow-empty", "-m", "host"}).status == 0);
  CHECK(read_file(log) == "original\n");
  CHECK_FALSE(exists(sb.outside + "/pwned"));
}

TEST_CASE("an .envrc that is a symlink into $HOME stops the run with 125 (hooks and rc files are never links)") {
  Sandbox sb;
  write_file(sb.home + "/envrc", "export A=1\n");
  REQUIRE(::symlink((sb.home + "/envrc").c_str(), (sb.ws + "/.envrc").c_str()) == 0);
  auto o = jail_sh(sb, "echo ran");
  CAPTURE(o.err);
  CHECK(o.status == 125);
  CHECK_FALSE(has(o.out, "ran"));
  CHECK(has(o.err, sb.ws + "/.envrc is a symlink"));
  CHECK(read_file(sb.home + "/envrc") == "export A=1\n");
}

TEST_CASE("an existing nested repository's hooks and config are read-only in the jail") {
  Sandbox sb;
  const std::string log = sb.outside + "/hooks.log";
  const std::string nested = sb.ws + "/vendor/lib";
  REQUIRE(git_in(sb, sb.ws, {"init", "-q"}).status == 0);
  REQUIRE(run({"/bin/mkdir", "-p", nested}).status == 0);
  REQUIRE(git_in(sb, nested, {"init", "-q"}).status == 0);

  auto o = jail_sh(sb, plant("vendor/lib/.git/hooks/post-checkout", log) +
                           "; printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> vendor/lib/.git/config; "
                           "echo x > vendor/lib/file && echo wrote");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "wrote"));
  CHECK(count(o.err, "Read-only file system") == 2);
  CHECK_FALSE(exists(nested + "/.git/hooks/post-checkout"));
  CHECK_FALSE(has(read_file(nested + "/.git/config"), "fsmonitor"));
}

TEST_CASE("a bare remote granted with --allow-write: its hooks are read-only, and git push to it still works") {
  Sandbox sb;
  const std::string log = sb.outside + "/hooks.log";
  const std::string remote = sb.outside + "/remote.git";
  REQUIRE(run({"/usr/bin/git", "init", "-q", "--bare", remote}, {"HOME=" + sb.home}).status == 0);
  REQUIRE(git_in(sb, sb.ws, {"init", "-q"}).status == 0);
  REQUIRE(git_in(sb, sb.ws, {"commit", "-q", "--allow-empty", "-m", "first"}).status == 0);
  REQUIRE(git_in(sb, sb.ws, {"remote", "add", "origin", remote}).status == 0);

  auto o = jail_sh(sb,
                   plant(remote + "/hooks/post-receive", log) +
                       "; git push -q origin HEAD:refs/heads/main && "
                       "echo pushed",
                   {"--allow-write", remote});
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "pushed"));
  CHECK(count(o.err, "Read-only file system") == 1);
  CHECK_FALSE(exists(remote + "/hooks/post-receive"));
  auto here = git_in(sb, sb.ws, {"rev-parse", "HEAD"});
  auto there = run({"/usr/bin/git", "--git-dir", remote, "rev-parse", "main"}, {"HOME=" + sb.home});
  CHECK(trim(here.out) == trim(there.out));

  // The host's next push runs no hook the jail wrote.
  REQUIRE(git_in(sb, sb.ws, {"commit", "-q", "--allow-empty", "-m", "second"}).status == 0);
  REQUIRE(git_in(sb, sb.ws, {"push", "-q", "origin", "HEAD:refs/heads/main"}).status == 0);
  CHECK_FALSE(exists(log));
}
