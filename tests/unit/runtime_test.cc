#include <doctest/doctest.h>

#include "runtime/program.h"

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
      {"\x7f" "ELF", "", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    auto [interp, arg] = parse_shebang(c.line);
    CHECK(interp == c.interp);
    CHECK(arg == c.arg);
  }
}
