#include "util/numbers.h"

#include <doctest/doctest.h>

#include <cstdint>

using pj::util::parse_number;
using pj::util::parse_port;

TEST_CASE("numbers: only whole digit strings within the type's range are numbers") {
  CHECK(parse_number<int>("0") == 0);
  CHECK(parse_number<int>("65535") == 65535);
  CHECK(parse_number<std::uint64_t>("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_number<std::uint64_t>("18446744073709551616").has_value());
  CHECK(parse_number<unsigned>("ff", 16) == 255u);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1.5", "\xd9\xa1"})
    CHECK_MESSAGE(!parse_number<int>(bad).has_value(), bad);
}

TEST_CASE("numbers: a port is 1 to 65535, digits only") {
  CHECK(parse_port("1") == 1);
  CHECK(parse_port("443") == 443);
  CHECK(parse_port("65535") == 65535);
  for (const char* bad : {"0", "65536", "000443", "-443", "443 ", "", "99999999999999999999"})
    CHECK_MESSAGE(!parse_port(bad).has_value(), bad);
}
