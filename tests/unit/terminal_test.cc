// Which outer fds the PTY relay reads, writes and takes settings from,
// for each combination of redirected standard streams.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "terminal.h"
#include "util/unique_fd.h"

using pj::supervisor::relay_ends;

TEST_CASE("the relay reads only a terminal on stdin, writes to stdout's terminal or else stderr's") {
  struct Case {
    unsigned pty_fds;
    int tty, in, out;
  } cases[] = {
      {0b111, 0, 0, 1},   // all three on the terminal
      {0b011, 0, 0, 1},   // 2>file
      {0b001, 0, 0, 2},   // >file 2>file: only the echo of input goes out
      {0b110, 1, -1, 1},  // </dev/null
      {0b010, 1, -1, 1},  // </dev/null 2>file
      {0b100, 2, -1, 2},  // </dev/null >file: stderr alone still gets the PTY
      {0b101, 0, 0, 2},   // >file
  };
  for (const auto& c : cases) {
    CAPTURE(c.pty_fds);
    auto e = relay_ends(c.pty_fds);
    CHECK(e.tty == c.tty);
    CHECK(e.in == c.in);
    CHECK(e.out == c.out);
  }
}

TEST_CASE("the outer terminal: input raw only when the relay reads it, output passed as is only when stdout is it") {
  using pj::supervisor::relay_settings;
  termios cooked{};
  cooked.c_iflag = ICRNL | IXON | BRKINT;
  cooked.c_oflag = OPOST | ONLCR;
  cooked.c_lflag = ICANON | ECHO | ISIG | IEXTEN | ECHOE;
  cooked.c_cflag = CS7 | PARENB | CREAD;
  cooked.c_cc[VMIN] = 0;

  termios both = relay_settings(cooked, true, true);
  CHECK((both.c_lflag & (ICANON | ECHO | ISIG | IEXTEN)) == 0);  // each key goes to the PTY, Ctrl-Z included
  CHECK((both.c_iflag & (ICRNL | IXON | BRKINT)) == 0);
  CHECK((both.c_cflag & CSIZE) == CS8);
  CHECK((both.c_cflag & CREAD) != 0);
  CHECK(both.c_cc[VMIN] == 1);
  CHECK((both.c_oflag & OPOST) == 0);  // the PTY processed it already

  // `pi-jail -- seq 3 | cat`: stdin and stderr on the terminal, stdout a
  // pipe whose reader writes to the same terminal: output keeps its
  // processing (ONLCR: no staircase), input still raw.
  auto piped = pj::supervisor::relay_ends(0b101);
  termios pipe_mode = relay_settings(cooked, piped.in >= 0, piped.out == 1);
  CHECK(pipe_mode.c_oflag == (OPOST | ONLCR));
  CHECK((pipe_mode.c_lflag & (ICANON | ECHO | ISIG)) == 0);

  // stdin not a terminal: input untouched.
  termios out_only = relay_settings(cooked, false, true);
  CHECK(out_only.c_lflag == cooked.c_lflag);
  CHECK(out_only.c_iflag == cooked.c_iflag);
  CHECK(out_only.c_cflag == cooked.c_cflag);
  CHECK(out_only.c_oflag == ONLCR);

  termios none = relay_settings(cooked, false, false);
  CHECK(std::memcmp(&none, &cooked, sizeof none) == 0);
}

// The command stops between poll() and the relay's turn (the loop reads
// the control socket first): what was typed then is for the user's shell,
// and stays in the terminal, as it would without pi-jail.
TEST_CASE("input the relay was told not to read, after poll() found it, stays where it is") {
  using pj::util::UniqueFd;
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY));
  REQUIRE(master.valid());
  REQUIRE(::grantpt(master.get()) == 0);
  REQUIRE(::unlockpt(master.get()) == 0);
  UniqueFd slave(::open(::ptsname(master.get()), O_RDWR | O_NOCTTY));
  REQUIRE(slave.valid());
  int in_fds[2], out_fds[2];
  REQUIRE(::pipe(in_fds) == 0);
  UniqueFd in_read(in_fds[0]), in_write(in_fds[1]);
  REQUIRE(::pipe(out_fds) == 0);
  UniqueFd out_read(out_fds[0]), out_write(out_fds[1]);

  pj::supervisor::PtyRelay relay(std::move(master), in_read.get(), out_write.get());
  relay.read_input(true);
  std::vector<pollfd> fds;
  relay.add_pollfds(fds);
  REQUIRE(fds.size() == 2);
  const std::string typed = "fg\n";
  REQUIRE(::write(in_write.get(), typed.data(), typed.size()) == static_cast<ssize_t>(typed.size()));
  REQUIRE(::poll(fds.data(), fds.size(), 1000) > 0);
  relay.read_input(false);
  relay.on_poll(fds);
  char buf[16];
  REQUIRE(::fcntl(in_read.get(), F_SETFL, O_NONBLOCK) == 0);  // not read by the relay: no wait
  CHECK(::read(in_read.get(), buf, sizeof buf) == static_cast<ssize_t>(typed.size()));
  // And nothing reached the PTY.
  int queued = -1;
  REQUIRE(::ioctl(slave.get(), FIONREAD, &queued) == 0);
  CHECK(queued == 0);
}
