#include "terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "util/log.h"

namespace pj::supervisor {

using util::Error;

namespace {

// Whether `a` and `b` are the same terminal device (a terminal's file
// descriptors opened apart differ in everything but the device).
bool same_terminal(int a, int b) {
  struct stat sa, sb;
  return ::isatty(b) && ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && S_ISCHR(sa.st_mode) && sa.st_rdev == sb.st_rdev;
}

}  // namespace

unsigned terminal_fds() {
  unsigned fds = 0;
  for (int fd = 0; fd < 3; ++fd)
    if (::isatty(fd)) fds |= 1U << fd;
  return fds;
}

RelayEnds relay_ends(unsigned pty_fds) {
  RelayEnds e;
  for (int fd = 2; fd >= 0; --fd)
    if (pty_fds & (1U << fd)) e.tty = fd;
  if (pty_fds & 1U) e.in = 0;
  e.out = (pty_fds & 2U) ? 1 : 2;
  return e;
}

util::Result<TerminalMode> TerminalMode::capture(int fd) {
  termios t;
  if (::tcgetattr(fd, &t) != 0) return Error::from_errno("read the terminal's settings", errno);
  return TerminalMode(fd, t);
}

bool TerminalMode::in_foreground() const {
  pid_t fg = ::tcgetpgrp(fd_);
  return fg < 0 || fg == ::getpgrp();
}

termios relay_settings(const termios& t, bool raw_input, bool pass_output) {
  termios out = t;
  if (raw_input) {
    out.c_iflag &= ~static_cast<tcflag_t>(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
    out.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
    out.c_cflag &= ~static_cast<tcflag_t>(CSIZE | PARENB);
    out.c_cflag |= CS8;
    out.c_cc[VMIN] = 1;
    out.c_cc[VTIME] = 0;
  }
  if (pass_output) out.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  return out;
}

util::Status TerminalMode::apply(const termios& t) {
  if (::tcsetattr(fd_, TCSANOW, &t) != 0)
    return Error::from_errno("set the terminal up for the jail's PTY (tcsetattr)", errno);
  current_ = t;
  changed_ = true;
  util::set_stderr_raw(!(t.c_oflag & OPOST) && same_terminal(fd_, STDERR_FILENO));
  return {};
}

util::Status TerminalMode::enter(bool raw_input, bool pass_output) {
  if (!changed_) {
    termios now;
    if (::tcgetattr(fd_, &now) != 0) return Error::from_errno("read the terminal's settings", errno);
    saved_ = current_ = now;
  }
  termios base = saved_;
  base.c_oflag = current_.c_oflag;
  termios t = relay_settings(base, raw_input, pass_output);
  if (std::memcmp(&t, &current_, sizeof t) == 0) return {};
  return apply(t);
}

void TerminalMode::follow_output(tcflag_t oflag) {
  tcflag_t want = (current_.c_oflag & ~kFollowedOutputFlags) | (oflag & kFollowedOutputFlags);
  if (want == current_.c_oflag) return;
  termios t = current_;
  t.c_oflag = want;
  (void)apply(t);  // a terminal that refuses keeps its own: output still flows
}

void TerminalMode::leave() {
  if (!changed_) return;
  changed_ = false;
  util::set_stderr_raw(false);
  current_ = saved_;
  if (!in_foreground()) return;  // the shell owns the terminal now; writing would stop pi-jail
  ::tcflush(fd_, TCIFLUSH);
  ::tcsetattr(fd_, TCSANOW, &saved_);
}

PtyRelay::PtyRelay(util::UniqueFd master, int in_fd, int out_fd)
    : master_(std::move(master)), in_(in_fd), out_(out_fd) {
  int flags = ::fcntl(master_.get(), F_GETFL);
  ::fcntl(master_.get(), F_SETFL, flags | O_NONBLOCK);
}

void PtyRelay::add_pollfds(std::vector<pollfd>& fds) {
  in_index_ = master_index_ = -1;
  if (!master_open_) return;
  if (reading_ && in_ >= 0 && to_master_.empty()) {
    in_index_ = static_cast<int>(fds.size());
    fds.push_back({in_, POLLIN, 0});
  }
  master_index_ = static_cast<int>(fds.size());
  fds.push_back({master_.get(), static_cast<short>(POLLIN | (to_master_.empty() ? 0 : POLLOUT)), 0});
}

namespace {

// Write all of `data` to a blocking fd (the outer terminal or a pipe).
void write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the terminal is gone: output has nowhere to go
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

void PtyRelay::pump_output() {
  char buf[16384];
  while (true) {
    ssize_t n = ::read(master_.get(), buf, sizeof buf);
    if (n > 0) {
      if (follow_) {
        // On a PTY master the settings read are the PTY's own (the
        // program's side); the outer terminal takes its output flags.
        termios t;
        if (::tcgetattr(master_.get(), &t) == 0) follow_->follow_output(t.c_oflag);
      }
      write_all(out_, buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno != EAGAIN)) master_open_ = false;  // EIO: no slave left
    return;
  }
}

void PtyRelay::on_poll(const std::vector<pollfd>& fds) {
  if (master_index_ >= 0) {
    short re = fds[static_cast<size_t>(master_index_)].revents;
    if (re & (POLLIN | POLLHUP | POLLERR)) pump_output();
    if ((re & POLLOUT) && !to_master_.empty()) {
      ssize_t n = ::write(master_.get(), to_master_.data(), to_master_.size());
      if (n > 0) to_master_.erase(0, static_cast<size_t>(n));
    }
  }
  // reading_ again: the command may have stopped since add_pollfds (the
  // loop reads the control socket first); typed input is then the shell's.
  if (reading_ && in_index_ >= 0 && (fds[static_cast<size_t>(in_index_)].revents & (POLLIN | POLLHUP | POLLERR))) {
    char buf[4096];
    ssize_t n = ::read(in_, buf, sizeof buf);
    if (n <= 0) {
      in_ = -1;  // the outer terminal closed: nothing more to relay in
      reading_ = false;
      return;
    }
    ssize_t w = ::write(master_.get(), buf, static_cast<size_t>(n));
    if (w < 0) w = 0;
    to_master_.append(buf + w, static_cast<size_t>(n - w));
  }
}

void PtyRelay::drain() {
  if (master_open_) pump_output();
}

void PtyRelay::sync_size(int tty_fd) {
  winsize ws;
  if (::ioctl(tty_fd, TIOCGWINSZ, &ws) == 0) ::ioctl(master_.get(), TIOCSWINSZ, &ws);
}

void PtyRelay::redraw() {
#if defined(TIOCSIG) && !defined(__linux__)
  ::ioctl(master_.get(), TIOCSIG, SIGWINCH);
#endif
}

termios cooked(const termios& t) {
  termios c = t;
  c.c_iflag = (c.c_iflag & ~static_cast<tcflag_t>(INLCR | IGNCR)) | ICRNL;
  c.c_lflag |= ICANON | ECHO | ECHOE | ECHOK | ISIG | IEXTEN;
  c.c_oflag |= OPOST | ONLCR;
  return c;
}

termios pty_settings(int tty) {
  termios t{};
  ::tcgetattr(tty, &t);
  pid_t fg = ::tcgetpgrp(tty);
  return fg >= 0 && fg != ::getpgrp() ? cooked(t) : t;
}

void take_terminal(std::optional<TerminalMode>& mode, const RelayEnds& ends, PtyRelay& relay) {
  if (!mode) return;
  const bool foreground = mode->in_foreground();
  const bool raw_input = ends.in >= 0;
  const bool pass_output = raw_input && ends.out == 1;  // interactive, and everything comes through the PTY
  mode->set_waiting(!foreground);
  relay.read_input(foreground);
  relay.follow(foreground && raw_input && !pass_output ? &*mode : nullptr);
  if (!foreground) return;
  if (raw_input)
    if (auto st = mode->enter(true, pass_output); !st) util::warn("{}", st.error().message());
  relay.sync_size(ends.tty);
}

namespace {

// Stop pi-jail by `sig` as the kernel would stop a program: the default
// action, even for a signal pi-jail takes through its signal fd. Returns
// whether it stopped: SIGCONT is then pending (it is taken through the
// signal fd, which resumes the command). A stop signal other than
// SIGSTOP is dropped by the kernel for an orphaned process group.
bool stop_self(int sig) {
  // SIGCONT stays pending while this runs (blocked), whatever pi-jail
  // does with it otherwise (a signal fd, or a handler on macOS).
  sigset_t cont, prev;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  ::sigprocmask(SIG_BLOCK, &cont, &prev);
  struct sigaction dfl {
  }, old{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, &old);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);  // stops here until SIGCONT
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool stopped = sig == SIGSTOP || sigismember(&pending, SIGCONT) == 1;
  ::sigaction(sig, &old, nullptr);
  ::sigprocmask(SIG_SETMASK, &prev, nullptr);
  return stopped;
}

}  // namespace

bool follow_command_stop(std::optional<TerminalMode>& mode, PtyRelay* relay, int sig) {
  if (!mode) {
    util::note(
        "the command stopped itself; with no terminal pi-jail keeps running: SIGCONT to pi-jail (pid {}) "
        "resumes the command, SIGTERM ends it",
        ::getpid());
    return false;
  }
  if (relay) {
    relay->drain();  // what the command wrote before it stopped shows before the shell's prompt
    // Until SIGCONT says where pi-jail is (fg or bg), the terminal is not read.
    relay->read_input(false);
    relay->follow(nullptr);
  }
  mode->leave();
  mode->set_waiting(false);  // SIGCONT says what comes next
  if (stop_self(sig)) return false;
  return true;  // nothing does job control for pi-jail: the stop is dropped, as for any program here
}

}  // namespace pj::supervisor
