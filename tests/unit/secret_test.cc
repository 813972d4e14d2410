// util/secret.h: a SecretString's blocks are wiped before they go back
// to the heap. Seen through the allocator's upstream: a stand-in for the
// heap that copies each block's bytes as it is handed back, before it
// frees it, so nothing here reads freed memory. What this shows is the
// wiping allocator at work for every block a string gives back (as it
// grows, and at its end) and that a short secret is in such a block, not
// inline; it cannot show that nothing else copied the bytes (that is
// each caller's, e.g. filterlink's wipe_secrets, tested with the codec).
#include "util/secret.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace pj;

namespace {

// Blocks given out and the bytes of each one handed back.
struct Seen {
  std::vector<std::pair<const char*, size_t>> live;
  std::vector<std::string> returned;
};
Seen& seen() {
  static Seen s;
  return s;
}

template <typename T>
struct Recording {
  using value_type = T;
  Recording() = default;
  template <typename U>
  Recording(const Recording<U>&) noexcept {}
  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    seen().live.emplace_back(reinterpret_cast<const char*>(p), n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) noexcept {
    seen().returned.emplace_back(reinterpret_cast<const char*>(p), n * sizeof(T));
    auto& live = seen().live;
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const auto& b) { return b.first == reinterpret_cast<const char*>(p); }),
               live.end());
    std::allocator<T>().deallocate(p, n);
  }
  friend bool operator==(const Recording&, const Recording&) { return true; }
};

using Recorded = util::BasicSecretString<util::WipingAllocator<char, Recording<char>>>;
using Unwiped = std::basic_string<char, std::char_traits<char>, Recording<char>>;

bool all_zero(const std::string& block) {
  return std::all_of(block.begin(), block.end(), [](char c) { return c == '\0'; });
}

// Whether `p` lies in a block the upstream gave out and has not had back.
bool in_live_block(const char* p) {
  std::less_equal<const char*> le;
  std::less<const char*> lt;
  return std::any_of(seen().live.begin(), seen().live.end(),
                     [&](const auto& b) { return le(b.first, p) && lt(p, b.first + b.second); });
}

}  // namespace

TEST_CASE("secret string: every block it outgrows and its last one are wiped before they are freed") {
  seen() = {};
  const std::string secret = "-----BEGIN PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
  {
    Recorded s;
    for (int i = 0; i < 20; ++i) s.append(secret);  // grows through several blocks
    CHECK(seen().returned.size() >= 3);
    Recorded moved(std::move(s));
    Recorded copy(moved);
    copy.assign(std::string(4096, 'k'));  // a larger block: the old one goes back
  }
  CHECK(seen().live.empty());
  REQUIRE(seen().returned.size() >= 6);
  for (const auto& block : seen().returned) CHECK(all_zero(block));
  // The same with std::string's own way (the control: the upstream does
  // see what a block held).
  seen() = {};
  {
    Unwiped plain;
    for (int i = 0; i < 20; ++i) plain.append(secret);
  }
  REQUIRE_FALSE(seen().returned.empty());
  CHECK(std::any_of(seen().returned.begin(), seen().returned.end(),
                    [&](const std::string& b) { return b.find(secret) != std::string::npos; }));
}

TEST_CASE("secret string: a short secret is in a block (wiped when freed), never inline in the object") {
  seen() = {};
  {
    Recorded empty;
    CHECK(in_live_block(empty.data()));
    Recorded s(std::string_view("pw"));
    CHECK(in_live_block(s.data()));
    Recorded copy(s);
    CHECK(in_live_block(copy.data()));
    copy = s;
    CHECK(in_live_block(copy.data()));
    CHECK(copy == s);
    Recorded assigned;
    assigned = std::move(copy);
    CHECK(in_live_block(assigned.data()));
    CHECK(assigned == std::string_view("pw"));
  }
  REQUIRE_FALSE(seen().returned.empty());
  for (const auto& block : seen().returned) CHECK(all_zero(block));
}

TEST_CASE("wipe: a std::string is left empty with its buffer, which it overwrote") {
  std::string s(100, 'x');
  const char* buffer = s.data();
  const size_t capacity = s.capacity();
  util::wipe(s);
  CHECK(s.empty());
  CHECK(s.data() == buffer);
  CHECK(s.capacity() == capacity);
  unsigned char bytes[64];
  std::fill(std::begin(bytes), std::end(bytes), 0xa5);
  util::wipe(bytes, sizeof bytes);
  CHECK(std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char c) { return c == 0; }));
}
