// Bytes the jail controls (host names it asked for, paths and values from
// files it can write), made safe to show (DESIGN property 6).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pj::util {

// `bytes` as text that cannot control a terminal: valid UTF-8 other than
// control characters is kept as is; C0 controls and DEL become C-style
// escapes (\t \n \r \xNN), C1 controls (U+0080..U+009F, which include
// the 8-bit CSI) become \uNNNN, and each byte that does not start a valid
// UTF-8 sequence (overlong forms, surrogates, above U+10FFFF, truncated)
// becomes \xNN. A backslash is kept, so the result is its own image:
// printable(printable(s)) == printable(s). That lets util::emit pass every
// line through it once more, whatever the call site did. Use it on each
// jail-controlled piece of a message (so its CR and LF cannot forge a
// line), not on a whole message whose own newlines are meant.
std::string printable(std::string_view bytes);

// One UTF-8 encoded character (RFC 3629): its code point and length.
struct Utf8Char {
  char32_t code;
  size_t length;  // 1..4 bytes
};
// The character starting at s[at]; nullopt when the bytes there are not
// the shortest encoding of a Unicode scalar value (overlong, a surrogate,
// above U+10FFFF, a stray continuation byte, cut short by the end).
// Requires at < s.size().
std::optional<Utf8Char> decode_utf8(std::string_view s, size_t at);

}  // namespace pj::util
