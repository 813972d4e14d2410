// Reading and checking Seatbelt profile text (SBPL, a small Scheme):
// S-expressions, and a check that a profile uses only the operations,
// filters and parameters pi-jail knows, and allows no network operation
// without its addresses. plan() runs the check on every
// profile it makes, so a malformed profile never reaches sandbox-exec.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace pj::seatbelt {

struct Expr {
  enum class Kind { list, symbol, string, regex, number };
  Kind kind = Kind::symbol;
  std::string text;         // symbol name, string or regex contents (unescaped), number
  std::vector<Expr> items;  // list elements
  int line = 0;
};

// Every top-level form; an error (with the line) when parentheses do not
// balance, a string does not end, or a character is not SBPL.
util::Result<std::vector<Expr>> read_sbpl(std::string_view text);

// The profile's top-level forms are (version 1), then (allow|deny
// OPERATION... FILTER...) with known operations and filters; an allowed
// network operation has filters, each (local ...) for network-bind and
// network-inbound, (remote ...) for network-outbound; every
// (param "NAME") names one of `params`, and every one of `params` is used.
util::Status check_profile(std::string_view text, const std::vector<std::string>& params);

// The known vocabulary, for tests and messages.
const std::vector<std::string_view>& known_operations();
const std::vector<std::string_view>& known_filters();

}  // namespace pj::seatbelt
