// Which outer fds the PTY relay reads, writes and takes settings from,
// for each combination of redirected standard streams.
#include <doctest/doctest.h>

#include "terminal.h"

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
