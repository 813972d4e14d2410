// The end-of-run repository audit: what a jail leaves in a repository
// for the host's git to run is listed on stderr (even with -q) and in the
// report, escaped; nothing it plants hangs or fools the audit.
#include <doctest/doctest.h>

#include <cstdlib>

#include "harness.h"

using namespace pj::test;

namespace {

// pi-jail -q --report REPORT -w ws -- /bin/sh -c SCRIPT, under a guard
// of 120 s (status 124 when the supervisor hangs).
Outcome jail_sh(const Sandbox& sb, const std::string& report, const std::string& script) {
  return run({"/usr/bin/timeout", "120", "/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--report", report,
              "--", "/bin/sh", "-c", script},
             {"HOME=" + sb.home});
}

void check_valid(const std::string& report) {
  auto v = validate_report(report);
  CHECK_MESSAGE(v.status == 0, v.out << v.err);
}

Outcome git(const Sandbox& sb, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/git", "-c", "user.name=t", "-c", "user.email=t@e", "-C", sb.ws});
  return run(args, {"HOME=" + sb.home});
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("a repository the jail creates: its hook, core.fsmonitor and a ! alias are listed, also with -q") {
  Sandbox sb;
  std::string report = sb.outside + "/r.json";
  auto o = jail_sh(sb, report,
                   "git init -q . && printf '#!/bin/sh\\nid\\n' > .git/hooks/post-checkout && "
                   "chmod +x .git/hooks/post-checkout && git config core.fsmonitor 'touch pwned' && "
                   "git config alias.x '!id' && echo made");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "made"));
  CHECK(has(o.err, "WARNING"));
  CHECK(has(o.err, "Review them before running git"));
  CHECK(has(o.err, ".git/hooks/post-checkout: a hook, new"));
  CHECK(has(o.err, "core.fsmonitor = \"touch pwned\""));
  CHECK(has(o.err, "alias.x = \"!id\""));
  std::string text = read_file(report);
  CAPTURE(text);
  CHECK(has(text, "\"repository_audit\": ["));
  CHECK(has(text, "\"path\": \".git/hooks/post-checkout\""));
  CHECK(has(text, "\"key\": \"core.fsmonitor\""));
  CHECK(has(text, "\"key\": \"alias.x\""));
  check_valid(report);
}

TEST_CASE("an existing repository where the jail only commits: no findings") {
  Sandbox sb;
  REQUIRE(git(sb, {"init", "-q"}).status == 0);
  REQUIRE(git(sb, {"commit", "-q", "--allow-empty", "-m", "first"}).status == 0);
  std::string report = sb.outside + "/r.json";
  auto o = jail_sh(sb, report,
                   "echo x > f && git add f && git -c user.name=t -c user.email=t@e commit -qm jailed && "
                   "echo committed");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "committed"));
  CHECK_FALSE(has(o.err, "WARNING"));
  std::string text = read_file(report);
  CHECK(has(text, "\"repository_audit\": []"));
  check_valid(report);
}

TEST_CASE("a submodule git dir the jail creates in an existing repository: its hook and core.fsmonitor") {
  Sandbox sb;
  REQUIRE(git(sb, {"init", "-q"}).status == 0);
  std::string report = sb.outside + "/r.json";
  auto o = jail_sh(sb, report,
                   "mkdir -p .git/modules/sub/hooks && echo 'ref: refs/heads/main' > .git/modules/sub/HEAD && "
                   "printf '#!/bin/sh\\nid\\n' > .git/modules/sub/hooks/pre-commit && "
                   "chmod +x .git/modules/sub/hooks/pre-commit && "
                   "printf '[core]\\n\\tfsmonitor = touch pwned\\n' > .git/modules/sub/config && echo made");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "made"));
  CHECK(has(o.err, ".git/modules/sub/hooks/pre-commit: a hook, new"));
  CHECK(has(o.err, ".git/modules/sub/config:2: core.fsmonitor = \"touch pwned\""));
  std::string text = read_file(report);
  CHECK(has(text, "\"path\": \".git/modules/sub/config\""));
  CHECK(has(text, "\"line\": 2"));
  check_valid(report);
}

TEST_CASE("a FIFO planted as a submodule's config neither hangs the audit nor is opened; it is listed") {
  Sandbox sb;
  REQUIRE(git(sb, {"init", "-q"}).status == 0);
  std::string report = sb.outside + "/r.json";
  auto o = jail_sh(sb, report, "mkdir -p .git/modules/x && mkfifo .git/modules/x/config && echo planted");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);  // not 124: the supervisor did not wait on the FIFO
  CHECK(has(o.out, "planted"));
  CHECK(has(o.err, ".git/modules/x/config: a FIFO, new, where git reads config (not opened)"));
  std::string text = read_file(report);
  CHECK(has(text, "\"path\": \".git/modules/x/config\""));
  check_valid(report);
}

TEST_CASE("a config value with ESC and CR bytes is printed escaped, never raw") {
  Sandbox sb;
  std::string report = sb.outside + "/r.json";
  auto o = jail_sh(sb, report,
                   "git init -q . && printf '[alias]\\n\\tx = \"!echo \\033]0;owned\\007\\033[2J\\r done\"\\n' "
                   ">> .git/config && echo written");
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(has(o.out, "written"));
  CHECK(has(o.err, "alias.x = \"!echo \\x1b]0;owned\\x07\\x1b[2J\\x0d done\""));
  CHECK_FALSE(has(o.err, "\x1b"));
  CHECK_FALSE(has(o.err, "\r"));
  CHECK_FALSE(has(o.err, "\x07"));
  std::string text = read_file(report);
  CHECK(has(text, "\\\\x1b]0;owned"));
  CHECK_FALSE(has(text, "\x1b"));
  check_valid(report);
}
