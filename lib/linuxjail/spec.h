// JailSpec: everything the launcher needs, decided in advance as plain
// data. Built by plan() (pure, golden-tested); consumed by launch().
#pragma once

#include <sys/ioctl.h>
#include <sys/types.h>
#include <termios.h>

#include <cstdint>
#include <string>
#include <vector>

#include "linuxjail/syscall_filter.h"
#include "runtime/request.h"

namespace pj::linuxjail {

using runtime::Access;

// What happens at one path of the new root, in order. What each kind
// needs is in MountOp's field of that kind's name.
enum class MountKind {
  bind,     // the host object `bind_source` (already resolved) at `dest`
  tmpfs,    // a fresh tmpfs at `dest` (`fs_options`: size, mode)
  scratch,  // directory `scratch_dir` of the jail's one scratch tmpfs
            // (JailSpec::scratch_fs), mode `scratch_mode`, bound at `dest`
  proc,     // a new procfs for the jail's PID namespace
  devpts,   // a new devpts instance (`fs_options`: newinstance, ...)
  mask,     // an empty read-only directory or file over `dest`
            // (a file placeholder holds `mask_content`)
  symlink,  // `dest` -> `link_target`, created in the tmpfs root
  seal,     // make the mount at `dest` read-only (after everything else)
};

// Device nodes on a mount: denied everywhere except the few /dev binds.
enum class Devices { denied, allowed };

using runtime::Node;  // which kind of object the destination is

struct MountOp {
  MountKind kind = MountKind::bind;
  std::string dest;  // absolute path inside the jail
  // Each set for its kind only (see MountKind):
  std::string bind_source;   // bind: the host path, resolved
  std::string link_target;   // symlink
  std::string scratch_dir;   // scratch: its directory in the scratch tmpfs
  std::string scratch_mode;  // scratch: octal mode; "" is 1777
  std::string fs_options;    // tmpfs, devpts: mount options
  std::string mask_content;  // mask: a file placeholder's content
  Access access = Access::read_only;
  Devices devices = Devices::denied;
  Node node = Node::directory;
  dev_t dev = 0;  // bind: the inode the planner saw, verified at mount time
  ino_t ino = 0;
  bool optional = false;     // seal of a path the kernel may not have (/proc/bus)
  bool placeholder = false;  // mask over a path that did not exist: made on the host (placeholders.h)
  bool held = false;         // a protected object inside a writable mount: held while the jail runs
  // The jail home bound at $HOME: below it the jail sees its own files,
  // not the host's at the same paths, so nothing there is masked,
  // protected or pinned from the host.
  bool jail_home = false;
  std::string why;  // where this entry comes from, for messages and explain
};

// One Landlock rule: `access` beneath the jail path `path`.
struct LandlockRule {
  std::string path;
  std::uint64_t access = 0;
  Node node = Node::directory;
};

// Whether a run may go on without Landlock: the policy's own setting.
using policy::LandlockUse;

struct LandlockSpec {
  LandlockUse use = LandlockUse::if_available;
  int abi = 0;                   // the host kernel's; 0 when unavailable
  std::uint64_t handled_fs = 0;  // 0: Landlock not applied
  std::uint64_t scoped = 0;
  std::vector<LandlockRule> rules;
};

// How the command's standard streams are connected.
enum class Streams {
  inherit,  // straight through: pi-jail's own fds 0-2 (pipes, files)
  pty,      // a PTY of the jail's own devpts, relayed by the supervisor
};

struct TerminalSpec {
  Streams streams = Streams::inherit;
  unsigned pty_fds = 0;  // bit i: fd i gets the PTY (the others pass through)
  termios mode{};        // the outer terminal's settings, for the inner one
  winsize size{};
};

// A listening socket the jail's init creates inside the jail's network
// namespace and hands to the supervisor (the network filter).
struct ListenSpec {
  // ssh: an allowed SSH host (runtime::Request::SshForward), connected
  // to under the filter's rules as `target_host`:`target_port`.
  enum class Kind { http_proxy, socks_proxy, forward, ssh } kind;
  runtime::Loopback address = runtime::Loopback::v4;
  int port = 0;
  std::string target_host = {};
  int target_port = 0;
};

struct JailSpec {
  std::vector<MountOp> mounts;  // parents before children; seals last
  // The tmpfs options ("size=...,mode=...") of the one scratch file system
  // every MountKind::scratch op takes a directory of: its size is the
  // budget /tmp, /var/tmp and /dev/shm share. Never attached whole.
  std::string scratch_fs;
  // RLIMIT_NPROC (soft and hard) set by the jail's init inside its own
  // user namespace, where the kernel counts the tasks of (that namespace,
  // uid) only (kernel/ucount.c); 0: none. Has no effect when the jail's
  // uid is the host's root (kernel/fork.c exempts INIT_USER): a pids
  // cgroup enforces it there.
  std::uint64_t nproc = 0;
  std::string exec_path;          // absolute host path of the program
  std::vector<std::string> argv;  // argv[0] as the user typed it
  std::vector<std::string> env;   // "NAME=value", already filtered
  std::string cwd;                // where the command starts
  std::string hostname = "pi-jail";
  uid_t uid = 0;  // mapped to itself
  gid_t gid = 0;
  SeccompOptions seccomp;
  LandlockSpec landlock;
  TerminalSpec terminal;
  std::vector<ListenSpec> listeners;
};

// One line per operation, for `--verbose`, messages and golden tests.
std::string describe(const MountOp& op);

}  // namespace pj::linuxjail
