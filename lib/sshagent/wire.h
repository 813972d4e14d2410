// Reading the SSH wire format (RFC 4251 section 5) from bytes a peer sent:
// every length is checked against what is left, nothing is read past the
// end, and a failed read leaves the reader failed for good, so a caller
// checks once at the end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pj::sshagent {

class WireReader {
public:
  explicit WireReader(std::string_view in) : in_(in) {}

  std::uint8_t byte() {
    if (!ok_ || in_.empty()) return fail(), 0;
    auto b = static_cast<std::uint8_t>(in_.front());
    in_.remove_prefix(1);
    return b;
  }
  std::uint32_t u32() {
    if (!ok_ || in_.size() < 4) return fail(), 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<std::uint8_t>(in_[static_cast<size_t>(i)]);
    in_.remove_prefix(4);
    return v;
  }
  // A string: uint32 length, then that many bytes (a view into the input).
  std::string_view string() {
    std::uint32_t n = u32();
    if (!ok_ || n > in_.size()) return fail(), std::string_view{};
    std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  // A boolean: one byte, 0 or 1 (anything else is malformed here).
  bool boolean() {
    std::uint8_t b = byte();
    if (b > 1) fail();
    return b == 1;
  }
  // Everything was read and every read succeeded.
  bool done() const { return ok_ && in_.empty(); }
  bool ok() const { return ok_; }

private:
  void fail() { ok_ = false; }
  std::string_view in_;
  bool ok_ = true;
};

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}
inline void put_string(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

}  // namespace pj::sshagent
