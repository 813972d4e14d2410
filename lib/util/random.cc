#include "random.h"

#include <sys/random.h>
#include <unistd.h>

#include <cstdlib>

namespace pj::util {

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  if (::getentropy(&v, sizeof v) != 0) std::abort();
  return v;
}

}  // namespace pj::util
