// The identity map of the jail's user namespace. Runs in the cloned
// child: the rules of child_stages.h hold (no allocation, only system
// calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pj::linuxjail::in_child {

namespace {

int write_file(const char* path, const char* data) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t len = std::strlen(data);
  ssize_t n = ::write(fd, data, len);
  int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

}  // namespace

// Identity mapping: the command sees the caller's own uid and gid.
// setgroups must be denied before an unprivileged gid_map is accepted.
void map_identity(const ChildPlan& p) {
  int err = write_file("/proc/self/setgroups", "deny");
  if (err == 0) err = write_file("/proc/self/uid_map", p.uid_map);
  if (err == 0) err = write_file("/proc/self/gid_map", p.gid_map);
  if (err != 0) fail(Stage::user_map, err);
}

}  // namespace pj::linuxjail::in_child
