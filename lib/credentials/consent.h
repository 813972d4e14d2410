// Whether a login made inside the jail may replace the host's credential
// (DESIGN property 8: nothing the jail writes changes which account the
// host's Pi uses without the user's consent).
//
// A login is held back by both paths to the host's auth.json (the token
// exchange, token_exchange.h, and the write-back of the jail's auth.json,
// pi/private_dirs.h; the login itself: pi/login_consent.h) and settled
// once at the end of the run: written back when the operator's policy
// says so ([credentials] logins = "write-back"), else when the user
// answers "y" on the real terminal; with neither, it is not written back
// and the refusal is reported.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pi/login_consent.h"
#include "policy/layer.h"

namespace pj::credentials {

// The question shown on the terminal: one line per login, every name
// escaped (util::printable), ending with "[y/N] ".
std::string consent_question(const std::vector<pi::HeldLogin>& held);

// Whether a typed line consents: "y" or "yes", in any case, blanks around.
pi::Consent parse_answer(std::string_view line);

// Ask on the controlling terminal (/dev/tty) when one of fds 0-2 is a
// terminal and pi-jail is in its foreground; else Consent::no_terminal.
// The terminal is put in cooked mode with echo for the question and its
// settings restored after; input typed before the question is flushed
// (tcflush TCIFLUSH) so that it cannot answer. Blocks until a line is
// typed (or the terminal closes: refused).
pi::Consent ask_on_terminal(const std::vector<pi::HeldLogin>& held);

// The decision for `held` under the operator's `mode`: given for
// write_back; else what ask_on_terminal() says.
pi::Consent decide(policy::LoginWriteBack mode, const std::vector<pi::HeldLogin>& held);

}  // namespace pj::credentials
