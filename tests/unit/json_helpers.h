// JSON in unit tests: a document parsed (failing the test when it is not
// JSON), and the text Pi would write for it.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "util/json_value.h"

namespace pj::test {

inline util::json::Value parsed(const std::string& s) {
  auto v = util::json::parse(s);
  REQUIRE_MESSAGE(v.ok(), s);
  return std::move(*v);
}

// JSON.stringify(JSON.parse(s), null, 2), as Pi writes its files.
inline std::string pi_form(const std::string& s) { return util::json::stringify(parsed(s)); }

}  // namespace pj::test
