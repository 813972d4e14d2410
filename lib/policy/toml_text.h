// A check of TOML text before toml++ reads it. toml++ 3.3.0 (Debian 12)
// reaches __builtin_unreachable() when it meets a character past ASCII
// where TOML allows only ASCII (a bare key, whitespace, a value): that
// is undefined behaviour on a file the jail can write (a project's
// .pi/jail.toml). TOML has such characters only in strings and comments,
// so text with one anywhere else is refused before it is parsed.
#pragma once

#include <optional>
#include <string_view>

namespace pj::policy {

struct TextPosition {
  int line = 0;    // from 1
  int column = 0;  // characters from 1
};

// Where `text` first has a byte past ASCII outside a string or a comment;
// nullopt when nowhere.
std::optional<TextPosition> non_ascii_outside_strings(std::string_view text);

}  // namespace pj::policy
