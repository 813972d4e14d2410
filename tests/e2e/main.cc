// End-to-end tests with the real Pi. Skipped (exit 77) when the host
// cannot build a jail or Pi is not installed, except under CI=true.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness.h"

int main(int argc, char** argv) {
  const char* ci = std::getenv("CI");
  const bool strict = ci && std::strcmp(ci, "true") == 0;
  auto doctor = pj::test::run({pj::test::pi_jail(), "doctor"});
  const char* prefix = std::getenv("PJ_PI_PREFIX");
  if (doctor.status != 0 || !prefix || !pj::test::exists(std::string(prefix) + "/node_modules/.bin/pi")) {
    std::fprintf(stderr, "e2e: %s\n", doctor.status != 0 ? "this host cannot build a jail" : "Pi is not installed");
    return strict ? 1 : 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
