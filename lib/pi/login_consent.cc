#include "login_consent.h"

#include <string_view>

#include <fmt/format.h>

#include "util/escape.h"

namespace pj::pi {

namespace {

std::string shown(std::string_view s) {
  const bool cut = s.size() > 64;
  return fmt::format("\"{}{}\"", util::printable(s.substr(0, 64)), cut ? "..." : "");
}

}  // namespace

std::string login_shown(const HeldLogin& l) {
  return l.account.empty() ? fmt::format("provider {}", shown(l.provider))
                           : fmt::format("provider {} (account {})", shown(l.provider), shown(l.account));
}

std::string refusal_note(const HeldLogin& login, Consent why) {
  return fmt::format("refused: auth.json: {}: a login made in the jail is not written back: {}", login_shown(login),
                     why == Consent::no_terminal
                         ? "there is no terminal to ask on (an operator may set [credentials] logins = \"write-back\")"
                         : "you did not agree");
}

}  // namespace pj::pi
