// util::random_u64: names others must not guess come from the kernel.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>

#include "util/random.h"

TEST_CASE("random_u64 gives 64 bits from the kernel: distinct values, every bit in use") {
  std::set<std::uint64_t> seen;
  std::uint64_t any = 0, all = ~0ULL;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t v = pj::util::random_u64();
    seen.insert(v);
    any |= v;
    all &= v;
  }
  CHECK(seen.size() == 64);
  CHECK(any == ~0ULL);  // each bit set at least once (2^-58 to fail by chance)
  CHECK(all == 0);      // and clear at least once
}
