// Bytes that hold a secret (a private key, a password, a credential's
// real value, a token) on their way through a buffer: wiped before their
// memory goes back to the heap, so that a freed block malloc hands to its
// next user holds none of them. The wipe is explicit_bzero(3)
// (memset_s(3) on macOS): a store the compiler may not drop as dead.
//
// What this does not do: the secret's other copies (the object a value
// came from, the kernel's socket buffers, registers and the stack of a
// function that copied it) are their owners' to wipe; and a process that
// can read this one's memory while it runs sees the secret anyway.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace pj::util {

// Overwrites `n` bytes at `p` with zeros.
void wipe(void* p, size_t n);

// Overwrites every byte of `s`'s buffer (its whole capacity, the bytes
// past its size too) and leaves it empty, its buffer kept. For a string
// whose buffer never grew (one made at its size): a buffer it outgrew
// was freed unwiped; a SecretString's never is.
void wipe(std::string& s);

// An allocator that wipes each block before it hands it back to
// `Upstream` (the heap). Stateless. `Upstream` is a parameter so that a
// test can look at each block as it comes back (tests/unit/secret_test.cc).
template <typename T, typename Upstream = std::allocator<T>>
struct WipingAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = WipingAllocator<U, typename std::allocator_traits<Upstream>::template rebind_alloc<U>>;
  };
  WipingAllocator() = default;
  template <typename U, typename V>
  WipingAllocator(const WipingAllocator<U, V>&) noexcept {}

  T* allocate(size_t n) {
    Upstream up;
    return std::allocator_traits<Upstream>::allocate(up, n);
  }
  void deallocate(T* p, size_t n) noexcept {
    wipe(p, n * sizeof(T));
    Upstream up;
    std::allocator_traits<Upstream>::deallocate(up, p, n);
  }
  friend bool operator==(const WipingAllocator&, const WipingAllocator&) { return true; }
};

// A byte string for a secret: every block it ever held is wiped as it is
// freed (when it grows past one, and at its end). Its bytes are always in
// such a block, never in the string object itself (std::string keeps a
// short one inline, where no allocator sees it): it reserves a block when
// it is made, and nothing here gives one back early (no shrink_to_fit).
// A moved-from one is empty: give it a value by assign() only.
template <typename Alloc>
class BasicSecretString : public std::basic_string<char, std::char_traits<char>, Alloc> {
  using Base = std::basic_string<char, std::char_traits<char>, Alloc>;

public:
  BasicSecretString() { Base::reserve(Base::capacity() + 1); }
  explicit BasicSecretString(std::string_view s) : BasicSecretString() { Base::assign(s.data(), s.size()); }
  BasicSecretString(const BasicSecretString& o) : BasicSecretString(std::string_view(o)) {}
  BasicSecretString(BasicSecretString&&) noexcept = default;
  BasicSecretString& operator=(const BasicSecretString& o) {
    Base::assign(o.data(), o.size());  // into this block, or a larger one (this one wiped)
    return *this;
  }
  BasicSecretString& operator=(BasicSecretString&&) noexcept = default;  // this block is freed: wiped
  ~BasicSecretString() = default;                                        // the block is freed: wiped
  void shrink_to_fit() = delete;
};

using SecretString = BasicSecretString<WipingAllocator<char>>;

}  // namespace pj::util
