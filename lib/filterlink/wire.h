// The field encoding under messages.h: a writer that appends integers
// (little-endian) and length-prefixed byte strings, and a reader that
// takes them back and fails, never reads past the end, on a short or
// oversized field. Internal to lib/filterlink. The writer's buffer is a
// util::SecretString: what a message carries (a key, a password, a
// credential's value) is wiped from every block it outgrows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/secret.h"

namespace pj::filterlink::wire {

class Writer {
public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { uint(v, 2); }
  void u32(std::uint32_t v) { uint(v, 4); }
  void u64(std::uint64_t v) { uint(v, 8); }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(std::string_view s) { out_.append(s); }
  util::SecretString& str() { return out_; }

private:
  void uint(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  util::SecretString out_;
};

// Every getter returns nullopt once a field did not fit (and every later
// one too): a decoder checks once per field and stops at the first.
class Reader {
public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::optional<std::uint8_t> u8() { return uint<std::uint8_t>(1); }
  std::optional<std::uint16_t> u16() { return uint<std::uint16_t>(2); }
  std::optional<std::uint32_t> u32() { return uint<std::uint32_t>(4); }
  std::optional<std::uint64_t> u64() { return uint<std::uint64_t>(8); }
  std::optional<std::int64_t> i64() {
    auto v = u64();
    if (!v) return std::nullopt;
    return static_cast<std::int64_t>(*v);
  }
  // A length-prefixed string of at most `max` bytes.
  std::optional<std::string> bytes(size_t max) {
    auto n = u32();
    if (!n || *n > max || *n > in_.size() - pos_) return fail<std::string>();
    std::string s(in_.substr(pos_, *n));
    pos_ += *n;
    return s;
  }
  // Exactly `n` bytes.
  std::optional<std::string_view> raw(size_t n) {
    if (failed_ || n > in_.size() - pos_) return fail<std::string_view>();
    auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool at_end() const { return !failed_ && pos_ == in_.size(); }

private:
  template <typename T>
  std::optional<T> fail() {
    failed_ = true;
    return std::nullopt;
  }
  template <typename T>
  std::optional<T> uint(size_t n) {
    if (failed_ || n > in_.size() - pos_) return fail<T>();
    std::uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= std::uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    pos_ += n;
    return static_cast<T>(v);
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace pj::filterlink::wire
