// Golden files: tests/unit/golden/NAME holds the expected text;
// PJ_UPDATE_GOLDEN=1 rewrites it from the actual output (review the diff).
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

inline void check_golden(const std::string& name, const std::string& actual) {
  std::string path = std::string(PJ_GOLDEN_DIR) + "/" + name;
  if (std::getenv("PJ_UPDATE_GOLDEN")) {
    std::ofstream(path) << actual;
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << path << " (PJ_UPDATE_GOLDEN=1 writes it)");
  std::stringstream want;
  want << in.rdbuf();
  CHECK(actual == want.str());
}
