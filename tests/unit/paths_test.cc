#include <doctest/doctest.h>

#include "util/paths.h"

using pj::util::normalize_path;
using pj::util::path_within;

TEST_CASE("normalize_path folds ., .., and repeated slashes") {
  struct Case {
    const char* in;
    const char* base;
    const char* want;
  } cases[] = {
      {"/", "/", "/"},
      {"/a/b/../c", "/", "/a/c"},
      {"//a///b/./", "/", "/a/b"},
      {"x/y", "/home/u", "/home/u/x/y"},
      {"../z", "/home/u", "/home/z"},
      {".", "/w", "/w"},
      {"/a/..", "/", "/"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto r = normalize_path(c.in, c.base);
    REQUIRE(r.ok());
    CHECK(*r == c.want);
  }
}

TEST_CASE("normalize_path refuses what it cannot make safe") {
  CHECK_FALSE(normalize_path("/..").ok());
  CHECK_FALSE(normalize_path("/a/../../b").ok());
  CHECK_FALSE(normalize_path("").ok());
  CHECK_FALSE(normalize_path(std::string("/a\0b", 4)).ok());
  CHECK_FALSE(normalize_path("rel", "also-relative").ok());
}

TEST_CASE("path_within compares whole components") {
  CHECK(path_within("/home/u", "/home/u"));
  CHECK(path_within("/home/u/x", "/home/u"));
  CHECK_FALSE(path_within("/home/user", "/home/u"));
  CHECK_FALSE(path_within("/home", "/home/u"));
  CHECK(path_within("/anything", "/"));
}

TEST_CASE("mode_grants_write: the mode bits alone, as inside a jail without capabilities") {
  using pj::util::mode_grants_write;
  CHECK(mode_grants_write(1000, 1000, 0755, 1000, {1000}));
  CHECK_FALSE(mode_grants_write(1000, 1000, 0555, 1000, {1000}));
  // Root on another user's checkout: no override inside the jail.
  CHECK_FALSE(mode_grants_write(1000, 1000, 0755, 0, {0}));
  CHECK(mode_grants_write(1000, 1000, 0775, 0, {0, 1000}));
  CHECK(mode_grants_write(1000, 1000, 0757, 0, {0}));
  // The owner's bits decide for the owner, even when group bits would allow.
  CHECK_FALSE(mode_grants_write(1000, 1000, 0575, 1000, {1000}));
  CHECK_FALSE(mode_grants_write(0, 0, 0755, 65534, {65534}));
}
