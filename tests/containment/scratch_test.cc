// At the end of a run, one line says what the jail wrote into its scratch
// places (/tmp, /var/tmp, /dev/shm), which end with it.
#include <doctest/doctest.h>

#include <string>

#include "harness.h"

using namespace pj::test;

namespace {

// pi-jail (not quiet: the line is a note) -w ws -- sh -c `script`.
Outcome jail_sh(const Sandbox& sb, const std::string& script) {
  return run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c", script}, {"HOME=" + sb.home});
}

}  // namespace

TEST_CASE("writes to the jail's /tmp, /var/tmp and /dev/shm are named in one line at the end; the workspace is not") {
  Sandbox sb;
  // The workspace lies under /tmp (a mount inside the jail's /tmp): what
  // is written there is kept and not counted.
  auto o = jail_sh(sb,
                   "echo hi > /tmp/note.txt; mkdir -p /var/tmp/wt/x && head -c 5000 /dev/zero > /var/tmp/wt/x/big;"
                   "echo s > /dev/shm/s; echo kept > " +
                       sb.ws + "/kept; ln -s /etc /tmp/link");
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(read_file(sb.ws + "/kept") == "kept\n");
  CHECK(o.err.find("pi-jail: the jail wrote 4 files (4.9 KiB) outside the workspace, in places discarded now: "
                   "/var/tmp/wt (4.9 KiB), /tmp/link (4 B), /tmp/note.txt (3 B) and 1 more\n") != std::string::npos);
  // Said once: one line.
  CHECK(o.err.find("the jail wrote") == o.err.rfind("the jail wrote"));
}

TEST_CASE("a run that writes only in its workspace gets no line about scratch places") {
  Sandbox sb;
  auto o = jail_sh(sb, "echo kept > " + sb.ws + "/kept");
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(read_file(sb.ws + "/kept") == "kept\n");
  CHECK(o.err.find("the jail wrote") == std::string::npos);
}
