// A check of TOML text before toml++ reads it. TOML has characters past
// ASCII only in strings and comments, so text with one anywhere else is
// refused at its line:column, with a message that says so. toml++ 3.3.0
// (Debian 12) used to reach __builtin_unreachable() on such a character
// where it looked for a blank; thirdparty/toml.h now makes it report one
// wherever this scan misses it, so the scan is for the message, and no
// longer what keeps a project's .pi/jail.toml from undefined behaviour.
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
