// The setup steps done inside the new namespaces, and the fixed record a
// failed step sends to the supervisor over the sync socket.
//
// Between clone and exec only async-signal-safe code runs, so a failure
// is reported as {stage, errno, operation index}; the supervisor turns it
// into words. EOF on the socket at exec (it is close-on-exec) means
// success.
#pragma once

#include <cstdint>
#include <string_view>

namespace pj::linuxjail {

enum class Stage : std::uint32_t {
  parent_died,      // the supervisor was gone before the jail was ready
  die_with_parent,  // prctl(PR_SET_PDEATHSIG)
  user_map,         // setgroups deny, uid_map, gid_map
  private_mounts,   // make every mount private
  root_tmpfs,       // the empty root file system
  pivot_root,       // switch to it
  mount_source,     // open the host source of a bind
  source_changed,   // the source is no longer the inode that was planned
  mountpoint,       // create the mountpoint in the new root
  mount,            // attach the mount
  mount_verify,     // the mounted inode is not the one opened
  seal,             // make a mount read-only
  detach_old_root,  // unmount the host's root from the jail
  root_read_only,   // seal / itself
  hostname,
  loopback,         // bring lo up
  listeners,        // the network filter's sockets inside the jail
  filter_ready,     // wait until the supervisor's network filter serves them
  terminal,         // allocate the PTY in the jail's devpts, pass the master out
  fork_command,     // init forks the command
  new_session,      // setsid for the command
  workdir,          // chdir to the starting directory
  close_fds,        // only 0, 1, 2 reach the command
  resource_limits,  // RLIMIT_CORE 0
  securebits,
  capabilities,  // empty bounding, ambient, inheritable, permitted, effective
  no_new_privs,
  landlock,      // build and apply the Landlock ruleset
  seccomp,       // load the command's syscall filter
  init_seccomp,  // load init's own filter
  signal_mask,
  exec,           // execve of the command itself
  join_cgroup,    // move into the run's cgroups (the supervisor made them)
  process_limit,  // RLIMIT_NPROC inside the jail's user namespace
};

struct SyncRecord {
  std::uint32_t magic;
  Stage stage;
  std::int32_t err;
  std::int32_t op;  // index into JailSpec::mounts, or -1
};
inline constexpr std::uint32_t kSyncMagic = 0x706a6c31;  // "pjl1"

std::string_view stage_name(Stage s);
// One sentence: what to do when this stage fails with `err`.
std::string_view stage_fix(Stage s, int err);

}  // namespace pj::linuxjail
