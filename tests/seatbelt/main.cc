// The Seatbelt backend's wiring tests (see wiring_test.cc): they run on
// any Linux host, as root and as an unprivileged user; nothing to skip.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
