// Numbers read from text: the one reader (std::from_chars), for every
// number that comes from a command line, a policy file, the jail or the
// network.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace pj::util {

// The whole of `text` as a number of type T in `base`: digits only (no
// sign, space, "0x" or "+"), within T's range; nullopt for anything else.
template <typename T>
std::optional<T> parse_number(std::string_view text, int base = 10) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (text.empty() || text.front() == '-') return std::nullopt;
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A TCP port: 1 to 65535, digits only.
inline std::optional<int> parse_port(std::string_view text) {
  auto port = text.size() <= 5 ? parse_number<int>(text) : std::nullopt;
  if (!port || *port < 1 || *port > 65535) return std::nullopt;
  return port;
}

}  // namespace pj::util
