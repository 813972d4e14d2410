// Containment tests: real jails, real refusals. Before any test, ask
// `pi-jail doctor` whether this host can build a jail at all: if not, the
// suite is skipped (exit 77) — except under CI=true, where that is a
// failure.
//
// A few cases need what only tests/run (as root) sets up: a setuid-root
// copy of the probe (PJ_PROBE_SUID) and, for an unprivileged user,
// delegated cgroups (PJ_TEST_MEMORY_CGROUP, PJ_TEST_CPU_CGROUP). Run
// without them (`meson test` from a build directory), those cases are
// left out, each named on stderr; under CI=true nothing is left out, so a
// missing piece fails its case.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness.h"

namespace {

bool given(const char* env) {
  const char* v = std::getenv(env);
  return v && *v;
}

// The cases that need a piece of set-up, and whether this run has it.
struct Needs {
  const char* test_case;
  const char* what;
  bool present;
};

}  // namespace

int main(int argc, char** argv) {
  const char* ci = std::getenv("CI");
  const bool strict = ci && std::strcmp(ci, "true") == 0;
  auto doctor = pj::test::run({pj::test::pi_jail(), "doctor"});
  if (doctor.status != 0) {
    std::fprintf(stderr, "containment: this host cannot build a jail:\n%s\n", doctor.out.c_str());
    if (strict) {
      std::fprintf(stderr, "containment: CI=true, so this is a failure, not a skip\n");
      return 1;
    }
    return 77;
  }
  doctest::Context ctx(argc, argv);
  if (!strict) {
    const bool root = ::geteuid() == 0;
    const Needs needs[] = {
        {"a setuid-root binary gains nothing", "a setuid-root probe (PJ_PROBE_SUID; tests/run stages one)",
         !pj::test::probe_suid().empty()},
        {"a memory limit in a delegated cgroup*", "a memory cgroup (root, or PJ_TEST_MEMORY_CGROUP)",
         root || given("PJ_TEST_MEMORY_CGROUP")},
        {"a run cgroup left by a pi-jail killed with SIGKILL*", "a memory cgroup (root, or PJ_TEST_MEMORY_CGROUP)",
         root || given("PJ_TEST_MEMORY_CGROUP")},
        {"a CPU limit in a delegated cgroup*", "a cpu cgroup (root, or PJ_TEST_CPU_CGROUP)",
         root || given("PJ_TEST_CPU_CGROUP")},
    };
    for (const auto& n : needs) {
      if (n.present) continue;
      ctx.addFilter("test-case-exclude", n.test_case);
      std::fprintf(stderr, "containment: left out \"%s\": it needs %s (tests/run runs it)\n", n.test_case, n.what);
    }
  }
  return ctx.run();
}
