#include "terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "util/log.h"

namespace pj::supervisor {

using util::Error;

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

util::Status TerminalMode::enter_raw() {
  termios raw = saved_;
  ::cfmakeraw(&raw);
  if (::tcsetattr(fd_, TCSANOW, &raw) != 0) return Error::from_errno("put the terminal in raw mode", errno);
  raw_ = true;
  return {};
}

void TerminalMode::leave() {
  if (!raw_) return;
  ::tcflush(fd_, TCIFLUSH);
  ::tcsetattr(fd_, TCSANOW, &saved_);
  raw_ = false;
}

PtyRelay::PtyRelay(util::UniqueFd master, int in_fd, int out_fd)
    : master_(std::move(master)), in_(in_fd), out_(out_fd) {
  int flags = ::fcntl(master_.get(), F_GETFL);
  ::fcntl(master_.get(), F_SETFL, flags | O_NONBLOCK);
}

void PtyRelay::add_pollfds(std::vector<pollfd>& fds) {
  in_index_ = master_index_ = -1;
  if (!master_open_) return;
  if (in_ >= 0 && to_master_.empty()) {
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
  if (in_index_ >= 0 && (fds[static_cast<size_t>(in_index_)].revents & (POLLIN | POLLHUP | POLLERR))) {
    char buf[4096];
    ssize_t n = ::read(in_, buf, sizeof buf);
    if (n <= 0) {
      in_ = -1;  // the outer terminal closed: nothing more to relay in
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

void take_terminal(std::optional<TerminalMode>& mode, const RelayEnds& ends) {
  if (!mode || ends.in < 0) return;
  if (auto st = mode->enter_raw(); !st) util::warn("{}", st.error().message());
}

void follow_command_stop(std::optional<TerminalMode>& mode) {
  if (!mode) {
    util::note("the command stopped itself; with no terminal pi-jail keeps running: SIGCONT to pi-jail (pid {}) "
               "resumes the command, SIGTERM ends it",
               ::getpid());
    return;
  }
  mode->leave();
  ::raise(SIGSTOP);
}

}  // namespace pj::supervisor
