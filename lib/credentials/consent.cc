#include "consent.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "util/unique_fd.h"

namespace pj::credentials {

using pi::Consent;
using pi::HeldLogin;

namespace {

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
  for (const auto& l : held) q += fmt::format("  {}\n", pi::login_shown(l));
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

}  // namespace pj::credentials
