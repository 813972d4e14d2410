// The outer terminal while a jailed command runs on a PTY: raw mode, the
// byte relay, window size. The jail never holds the outer terminal, so
// nothing inside can push input into the user's shell (TIOCSTI).
#pragma once

#include <poll.h>
#include <termios.h>

#include <optional>
#include <string>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

// Which of fds 0-2 are terminals (bit N: fd N). Each of them gets the
// jail's PTY: the command never holds the real terminal on any fd.
unsigned terminal_fds();

// The outer ends of the PTY relay for `pty_fds` (from terminal_fds(),
// not 0): pure, so each combination of redirections is one answer.
struct RelayEnds {
  int tty = -1;  // the outer terminal the PTY takes settings and size from: the first of 0-2 in pty_fds
  int in = -1;   // read and sent to the PTY: fd 0 when it is a terminal, else -1 (the relay then
                 // never reads the terminal, and never puts it in raw mode)
  int out = 2;   // where the PTY's output goes: fd 1 when it is a terminal, else fd 2
};
RelayEnds relay_ends(unsigned pty_fds);

// Owns the outer terminal's mode: raw while relaying; the saved settings
// come back on leave(), on destruction, and so on every way out. Pending
// input is flushed when leaving so nothing typed lands in the shell.
class TerminalMode {
public:
  // Remember `fd`'s settings (fd must be a terminal).
  static util::Result<TerminalMode> capture(int fd);
  TerminalMode(TerminalMode&& o) noexcept : fd_(o.fd_), saved_(o.saved_), raw_(o.raw_) { o.raw_ = false; }
  TerminalMode& operator=(TerminalMode&&) = delete;
  TerminalMode(const TerminalMode&) = delete;
  ~TerminalMode() { leave(); }

  util::Status enter_raw();
  void leave();
  const termios& saved() const { return saved_; }

private:
  TerminalMode(int fd, const termios& t) : fd_(fd), saved_(t) {}
  int fd_;
  termios saved_;
  bool raw_ = false;
};

// Bytes between the outer terminal and the PTY master. Input is buffered
// when the jail does not read (back-pressure: no more is read from the
// terminal until it drains); output is written out as it comes.
// Raw mode on the outer terminal, only while the relay reads it (stdin is
// a terminal): a terminal that is only output keeps its settings.
void take_terminal(std::optional<TerminalMode>& mode, const RelayEnds& ends);

// The command stopped itself as a whole. On a terminal (`mode` set): give
// it back and stop pi-jail too, so the user's shell regains control; `fg`
// sends SIGCONT. With no terminal there is no shell to give control to:
// pi-jail never stops itself (--timeout and the network filter run on),
// and the command stays stopped until pi-jail gets SIGCONT (resumes it) or
// a termination signal (ends it). The same on every backend.
void follow_command_stop(std::optional<TerminalMode>& mode);

class PtyRelay {
public:
  PtyRelay(util::UniqueFd master, int in_fd, int out_fd);

  // Add this relay's fds to `fds`; remembers where they went.
  void add_pollfds(std::vector<pollfd>& fds);
  // Move bytes after poll() returned.
  void on_poll(const std::vector<pollfd>& fds);
  // Read what the jail still wrote before it ended.
  void drain();
  // Copy the outer terminal's window size to the PTY.
  void sync_size(int tty_fd);

private:
  void pump_output();
  util::UniqueFd master_;
  int in_;
  int out_;
  std::string to_master_;
  bool master_open_ = true;
  int in_index_ = -1, master_index_ = -1;
};

}  // namespace pj::supervisor
