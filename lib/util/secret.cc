#ifdef __APPLE__
#define __STDC_WANT_LIB_EXT1__ 1  // memset_s
#endif
#include "secret.h"

#include <string.h>

namespace pj::util {

void wipe(void* p, size_t n) {
  if (n == 0) return;
#ifdef __APPLE__
  (void)memset_s(p, n, 0, n);
#else
  explicit_bzero(p, n);
#endif
}

void wipe(std::string& s) {
  // Within [data(), data() + size()] once it is as long as its buffer:
  // resizing up to the capacity never reallocates.
  s.resize(s.capacity());
  wipe(s.data(), s.size());
  s.clear();
}

}  // namespace pj::util
