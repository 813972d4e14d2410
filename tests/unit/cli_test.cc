#include <doctest/doctest.h>

#include <vector>

#include "cli.h"

using namespace pj::cli;

namespace {
pj::util::Result<Invocation> parse_args(std::vector<std::string> args) {
  args.insert(args.begin(), "pi-jail");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("the command and its own options are left alone") {
  auto inv = parse_args({"-w", "/ws", "--allow-read=/opt", "pi", "-p", "--deny", "x"});
  REQUIRE(inv.ok());
  CHECK(inv->mode == Mode::run);
  CHECK(*inv->workspace == "/ws");
  CHECK(inv->allow_read == std::vector<std::string>{"/opt"});
  CHECK(inv->command == std::vector<std::string>{"pi", "-p", "--deny", "x"});
  CHECK(inv->deny.empty());
}

TEST_CASE("-- ends pi-jail's options") {
  auto inv = parse_args({"--", "--version"});
  REQUIRE(inv.ok());
  CHECK(inv->mode == Mode::run);
  CHECK(inv->command == std::vector<std::string>{"--version"});
}

TEST_CASE("--unsandboxed is recorded as an explicit choice") {
  auto inv = parse_args({"--unsandboxed", "true"});
  REQUIRE(inv.ok());
  CHECK(inv->isolation == Isolation::unsandboxed);
  auto def = parse_args({"true"});
  REQUIRE(def.ok());
  CHECK(def->isolation == Isolation::jail);
}

TEST_CASE("bad command lines are errors, never defaults") {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{}, "no command"},
      {{"--bogus", "true"}, "unknown option --bogus"},
      {{"-w"}, "needs a value"},
      {{"--unsandboxed=yes", "true"}, "takes no value"},
      {{"shell-init", "tcsh"}, "unknown shell"},
      {{"doctor", "extra"}, "unexpected argument"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    auto inv = parse_args(c.args);
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().message().find(c.message) != std::string::npos);
  }
}

TEST_CASE("subcommands") {
  CHECK(parse_args({"doctor", "--json"})->json);
  CHECK(parse_args({"explain"})->mode == Mode::explain);
  CHECK(parse_args({"shell-init", "fish"})->shell == "fish");
  CHECK(parse_args({"shell-init"})->shell == "bash");
}
