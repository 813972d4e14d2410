#include "linuxjail/stage.h"

#include <cerrno>

namespace pj::linuxjail {

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::parent_died: return "wait for the supervisor";
    case Stage::die_with_parent: return "tie the jail's life to the supervisor (PR_SET_PDEATHSIG)";
    case Stage::user_map: return "map the caller's uid/gid into the user namespace";
    case Stage::private_mounts: return "make mount propagation private";
    case Stage::root_tmpfs: return "create the empty root file system";
    case Stage::pivot_root: return "pivot_root into the new root";
    case Stage::mount_source: return "open bind source";
    case Stage::source_changed: return "verify bind source";
    case Stage::mountpoint: return "create mountpoint";
    case Stage::mount: return "mount";
    case Stage::mount_verify: return "verify mounted inode";
    case Stage::seal: return "make read-only";
    case Stage::detach_old_root: return "detach the host's root";
    case Stage::root_read_only: return "make / read-only";
    case Stage::hostname: return "set the host name";
    case Stage::loopback: return "bring up the loopback interface";
    case Stage::listeners: return "open the network filter's listening sockets inside the jail";
    case Stage::filter_ready: return "wait for the network filter to serve the jail's listening sockets";
    case Stage::terminal: return "allocate the jail's terminal (PTY)";
    case Stage::fork_command: return "start the command under the jail's init";
    case Stage::new_session: return "start a new session";
    case Stage::workdir: return "change to the starting directory";
    case Stage::close_fds: return "close inherited file descriptors";
    case Stage::resource_limits: return "set resource limits";
    case Stage::securebits: return "lock securebits";
    case Stage::capabilities: return "drop all capabilities";
    case Stage::no_new_privs: return "set no_new_privs";
    case Stage::landlock: return "apply the Landlock ruleset";
    case Stage::seccomp: return "load the syscall filter";
    case Stage::init_seccomp: return "load the jail init's syscall filter";
    case Stage::signal_mask: return "reset the signal mask";
    case Stage::exec: return "execute the command";
    case Stage::join_cgroup: return "join the run's cgroups (memory, CPU, process limits)";
    case Stage::process_limit: return "set the process limit (RLIMIT_NPROC)";
  }
  return "unknown step";
}

std::string_view stage_fix(Stage s, int err) {
  switch (s) {
    case Stage::user_map:
      return "the kernel refused the identity map; on Ubuntu 24.04+ AppArmor restricts unprivileged "
             "user namespaces: install profiles/apparmor/pi-jail (see `pi-jail doctor`)";
    case Stage::root_tmpfs:
    case Stage::mount:
      if (err == EPERM || err == EACCES)
        return "the kernel refused a mount in the user namespace; an LSM (AppArmor, SELinux) or a "
               "container runtime may forbid it: run `pi-jail doctor`";
      if (err == ENOSYS) return "the kernel is too old: pi-jail needs Linux 5.12 or newer";
      return "run `pi-jail doctor` to see what this host lacks";
    case Stage::mount_source: return "the path disappeared or is not accessible; check it exists and is readable";
    case Stage::source_changed:
      return "the path was replaced while the jail was being built (possible symlink race); run again";
    case Stage::mountpoint:
      if (err == ELOOP) return "a symlink stands where a mountpoint was expected; remove it";
      return "the destination cannot be created inside the jail's view";
    case Stage::mount_verify:
      return "something else was mounted at the destination; run again and report a bug if it persists";
    case Stage::pivot_root:
    case Stage::detach_old_root: return "the host's mount layout is unusual (is / on a ramfs?); run `pi-jail doctor`";
    case Stage::exec:
      if (err == ENOENT)
        return "the program (or its interpreter) is not visible inside the jail: grant its directory with --allow-read";
      return "check that the program is executable and its interpreter is visible inside the jail";
    case Stage::parent_died: return "pi-jail was killed during setup";
    case Stage::join_cgroup:
      return "the kernel refused to move the jail into the cgroup given by [limits] cgroup: it must be writable by "
             "you, and so must its tasks file (cgroup v1), or its cgroup.procs and the common parent's (cgroup v2); "
             "run `pi-jail doctor`";
    case Stage::landlock:
      return "the kernel refused the Landlock ruleset; run `pi-jail doctor`, and report a bug with its output";
    case Stage::seccomp:
    case Stage::init_seccomp:
      return "the kernel refused the seccomp filter; is seccomp filtering (CONFIG_SECCOMP_FILTER) enabled?";
    default: return "run `pi-jail doctor`; report a bug if it says the host is fine";
  }
}

}  // namespace pj::linuxjail
