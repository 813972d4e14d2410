// A login made inside the jail, held back from the host's auth.json by
// both paths to it (the token exchange and the write-back of the jail's
// auth.json, private_dirs.h) until one decision at the end of the run
// (credentials/consent.h) settles it.
#pragma once

#include <string>

namespace pj::pi {

// One login the run holds back: the provider entry and, where the tokens
// or the entry say it, the account. Both are chosen by the jail.
struct HeldLogin {
  std::string provider;
  std::string account;
};

enum class Consent {
  given,        // the operator's policy, or the user answered yes
  refused,      // the user answered something else
  no_terminal,  // nobody to ask, and the policy does not say yes
};

// The login as the user is shown it: "provider "x" (account "y")", every
// name escaped (util::printable) and cut at 64 bytes.
std::string login_shown(const HeldLogin& login);

// The note for a login not written back (starting "refused:").
std::string refusal_note(const HeldLogin& login, Consent why);

}  // namespace pj::pi
