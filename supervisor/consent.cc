#include "consent.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "util/escape.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

namespace {

std::string shown(std::string_view s) {
  const bool cut = s.size() > 64;
  return fmt::format("\"{}{}\"", util::printable(s.substr(0, 64)), cut ? "..." : "");
}

std::string describe(const HeldLogin& l) {
  return l.account.empty() ? fmt::format("provider {}", shown(l.provider))
                           : fmt::format("provider {} (account {})", shown(l.provider), shown(l.account));
}

bool any_terminal() { return ::isatty(0) || ::isatty(1) || ::isatty(2); }

// Owns the terminal's settings while the question is asked.
class Cooked {
public:
  explicit Cooked(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) != 0) return;
    termios t = saved_;
    t.c_lflag |= ICANON | ECHO | ISIG;
    t.c_iflag |= ICRNL;
    restore_ = ::tcsetattr(fd_, TCSANOW, &t) == 0;
  }
  ~Cooked() {
    if (restore_) ::tcsetattr(fd_, TCSANOW, &saved_);
  }
  Cooked(const Cooked&) = delete;
  Cooked& operator=(const Cooked&) = delete;

private:
  int fd_;
  termios saved_{};
  bool restore_ = false;
};

}  // namespace

std::string consent_question(const std::vector<HeldLogin>& held) {
  std::string q = "pi-jail: a login was made inside the jail; your own Pi still uses its old credentials:\n";
  for (const auto& l : held) q += fmt::format("  {}\n", describe(l));
  q += "Write these logins to your auth.json, replacing what is there? [y/N] ";
  return q;
}

Consent parse_answer(std::string_view line) {
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  std::string lower(line);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return lower == "y" || lower == "yes" ? Consent::given : Consent::refused;
}

Consent ask_on_terminal(const std::vector<HeldLogin>& held) {
  if (!any_terminal()) return Consent::no_terminal;
  util::UniqueFd tty(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!tty.valid()) return Consent::no_terminal;
  // In the background, reading would stop pi-jail (SIGTTIN): not asked.
  if (::tcgetpgrp(tty.get()) != ::getpgrp()) return Consent::no_terminal;
  Cooked cooked(tty.get());
  ::tcflush(tty.get(), TCIFLUSH);  // keys typed before the question do not answer it
  const std::string q = consent_question(held);
  if (::write(tty.get(), q.data(), q.size()) != static_cast<ssize_t>(q.size())) return Consent::no_terminal;
  std::string line;
  char c;
  while (line.size() < 256) {
    ssize_t n = ::read(tty.get(), &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Consent::refused;
    if (c == '\n') break;
    line.push_back(c);
  }
  return parse_answer(line);
}

Consent decide(policy::LoginWriteBack mode, const std::vector<HeldLogin>& held) {
  if (held.empty()) return Consent::refused;
  if (mode == policy::LoginWriteBack::write_back) return Consent::given;
  return ask_on_terminal(held);
}

std::string refusal_note(const HeldLogin& login, Consent why) {
  return fmt::format("refused: auth.json: {}: a login made in the jail is not written back: {}", describe(login),
                     why == Consent::no_terminal
                         ? "there is no terminal to ask on (an operator may set [credentials] logins = \"write-back\")"
                         : "you did not agree");
}

}  // namespace pj::supervisor
