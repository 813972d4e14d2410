// A directory of a test's own under /tmp, removed with all it holds when
// the test ends.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace pj::test {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/pj-unit-test.XXXXXX";
    REQUIRE(::mkdtemp(t));
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace pj::test
