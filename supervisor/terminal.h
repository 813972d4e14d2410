// The outer terminal while a jailed command runs on a PTY: its settings,
// job control (Ctrl-Z, fg, bg), the byte relay, window size. The jail never holds the outer terminal, so
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

// Owns the outer terminal's settings while a jailed command runs on a
// PTY. Only what needs changing changes, and only while pi-jail reads the
// terminal (stdin is one, and pi-jail is in the foreground): the input
// side goes raw; when stdout is the terminal too, all of the command's
// output comes through the PTY, which processes it as the program asked,
// and the terminal passes it on as it is (-opost). When stdout is a pipe,
// something else writes to the terminal too (`pi-jail -- seq 3 | cat`),
// so the terminal keeps processing output (no staircase), with the
// newline flags the program set on its PTY (follow_output()). When
// stdin is not the terminal, its settings are left alone. The saved
// settings come back on leave(), on destruction, and so on every way
// out; pending input is flushed when leaving so nothing typed lands in the
// shell. A job in the background never touches the terminal's settings
// (that would stop it: SIGTTOU).
class TerminalMode {
public:
  // Remember `fd`'s settings (fd must be a terminal).
  static util::Result<TerminalMode> capture(int fd);
  TerminalMode(TerminalMode&& o) noexcept
      : fd_(o.fd_), saved_(o.saved_), current_(o.current_), changed_(o.changed_), waiting_(o.waiting_) {
    o.changed_ = false;
  }
  TerminalMode& operator=(TerminalMode&&) = delete;
  TerminalMode(const TerminalMode&) = delete;
  ~TerminalMode() { leave(); }

  // Whether pi-jail is in the terminal's foreground process group (or the
  // terminal is not its controlling terminal: no job control applies).
  bool in_foreground() const;
  // Input raw (no echo, line editing, keys that signal, flow control or
  // CR translation: each byte goes to the PTY, whose own settings act on
  // it) when `raw_input`; output passed as it is when `pass_output`, else
  // processed with the flags last followed. The settings to restore are
  // read again first when nothing is changed (the shell may have set them
  // since: `fg` after `pi-jail ... &`).
  util::Status enter(bool raw_input, bool pass_output);
  // Give the terminal the newline flags (kFollowedOutputFlags) the jailed
  // program set on its PTY's output flags `oflag`; the others stay.
  void follow_output(tcflag_t oflag);
  void leave();
  bool changed() const { return changed_; }
  // pi-jail runs in the background and waits for the terminal: `fg` of a
  // running job sends no SIGCONT, so the supervisor looks again every
  // kForegroundPoll (take_terminal()).
  bool waiting() const { return waiting_; }
  void set_waiting(bool w) { waiting_ = w; }
  const termios& saved() const { return saved_; }

private:
  TerminalMode(int fd, const termios& t) : fd_(fd), saved_(t), current_(t) {}
  util::Status apply(const termios& t);
  int fd_;
  termios saved_;
  termios current_;
  bool changed_ = false;
  bool waiting_ = false;
};

inline constexpr int kForegroundPoll = 250;  // ms

// The output flags copied from the PTY when stdout is a pipe: those that
// place a newline. The rest (e.g. OLCUC) would change how everything
// else on the terminal shows.
inline constexpr tcflag_t kFollowedOutputFlags = OPOST | ONLCR | OCRNL | ONOCR | ONLRET;

// The settings enter() gives from `t`: pure, for the unit tests.
termios relay_settings(const termios& t, bool raw_input, bool pass_output);

// The settings the jail's PTY starts with: the outer terminal's, or, when
// pi-jail starts in the background (`pi-jail ... &`, where the shell's
// line editor holds the terminal in its own mode), those made cooked:
// line editing, echo, keys that signal, CR to NL, output processing.
termios pty_settings(int tty);
termios cooked(const termios& t);

class PtyRelay;

// At start, whenever pi-jail continues (SIGCONT), and every
// kForegroundPoll while it waits in the background: in the foreground,
// the terminal is set up (TerminalMode), input is relayed, and the PTY
// gets the terminal's size; in the background (`bg`, `pi-jail ... &`) the
// terminal is left alone: no settings changed and no input read, output
// still shown (as for any background job; with `stty tostop` writing
// stops pi-jail, as it would the program).
void take_terminal(std::optional<TerminalMode>& mode, const RelayEnds& ends, PtyRelay& relay);

// The command stopped, by `sig` (SIGTSTP, SIGTTIN, SIGTTOU or SIGSTOP).
// On a terminal (`mode` set): give the terminal back and stop pi-jail by
// the same signal, so the user's shell shows the job stopped as it would
// without pi-jail; `fg` or `bg` sends SIGCONT. Returns true when the
// caller must resume the command itself: pi-jail's own process group is
// orphaned (nothing does job control for it), and the kernel dropped the
// stop, as it would have dropped the command's. With no terminal there
// is no shell to give control to: pi-jail never stops itself (--timeout
// and the network filter run on), and the command stays stopped until
// pi-jail gets SIGCONT (resumes it) or a termination signal (ends it).
// The same on every backend.
bool follow_command_stop(std::optional<TerminalMode>& mode, PtyRelay* relay, int sig);

// Bytes between the outer terminal and the PTY master. Input is buffered
// when the jail does not read (back-pressure: no more is read from the
// terminal until it drains); output is written out as it comes.
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
  // Ask the PTY's foreground group to redraw (SIGWINCH), after `fg`. On
  // macOS only: Linux's TIOCSIG takes only SIGINT, SIGQUIT and SIGTSTP
  // (drivers/tty/pty.c pty_signal()). A program redraws on the SIGCONT
  // anyway, as without pi-jail.
  void redraw();
  // Relay the terminal's input (stdin) or not (in the background).
  void read_input(bool on) { reading_ = on && in_ >= 0; }
  // Copy the PTY's output flags to `mode` before each write (nullptr: not).
  void follow(TerminalMode* mode) { follow_ = mode; }

private:
  void pump_output();
  util::UniqueFd master_;
  int in_;
  int out_;
  bool reading_ = false;
  TerminalMode* follow_ = nullptr;
  std::string to_master_;
  bool master_open_ = true;
  int in_index_ = -1, master_index_ = -1;
};

}  // namespace pj::supervisor
