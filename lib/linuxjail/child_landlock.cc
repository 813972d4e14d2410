// Landlock, from the rules planned in the supervisor: init builds the
// ruleset while it builds the view, the command enforces it. Runs in the
// cloned child: the rules of child_stages.h hold (no allocation, only
// system calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "linuxjail/sys.h"

namespace pj::linuxjail::in_child {

int landlock_ruleset(const ChildPlan& p) {
  if (p.landlock_fs == 0) return -1;
  struct {
    std::uint64_t handled_access_fs;
    std::uint64_t handled_access_net;
    std::uint64_t scoped;
  } attr{p.landlock_fs, 0, p.landlock_scoped};
  // Network rights stay unhandled: the network namespace and the proxy
  // decide where connections go. The fd is close-on-exec.
  int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U));
  if (ruleset < 0) fail(Stage::landlock, errno);
  return ruleset;
}

// Rights are tied to the inode `fd` refers to (an O_PATH fd opened in
// the new root without following symlinks), not to its path.
void landlock_allow(const ChildPlan& p, int ruleset, int fd, size_t rule) {
  const ChildLandlockRule& r = p.landlock_rules[rule];
  if (r.access == 0) return;
  struct __attribute__((packed)) {
    std::uint64_t allowed_access;
    std::int32_t parent_fd;
  } beneath{r.access, fd};
  constexpr int kRulePathBeneath = 1;
  if (::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &beneath, 0U) != 0)
    fail(Stage::landlock, errno, r.op);
}

void landlock_allow_rest(const ChildPlan& p, int ruleset, int root) {
  if (ruleset < 0) return;
  for (size_t i = 0; i < p.landlock_rule_count; ++i) {
    const ChildLandlockRule& r = p.landlock_rules[i];
    if (r.at_mount || r.access == 0) continue;
    int fd = open_in_root(root, r.path, O_PATH);
    if (fd < 0) fail(Stage::landlock, errno, r.op);
    landlock_allow(p, ruleset, fd, i);
    ::close(fd);
  }
}

void landlock_enforce(int ruleset) {
  if (ruleset < 0) return;
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0U) != 0) fail(Stage::landlock, errno);
}

}  // namespace pj::linuxjail::in_child
