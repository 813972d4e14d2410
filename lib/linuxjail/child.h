// The code that runs between clone and exec, and the flat, pre-built data
// it reads. Everything the child needs is allocated and formatted by the
// supervisor before clone (ChildPlanStorage); the child only reads it and
// makes system calls, so it stays async-signal-safe.
#pragma once

#include <linux/filter.h>
#include <sys/capability.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "linuxjail/cgroup.h"
#include "linuxjail/spec.h"
#include "util/fd_passing.h"

namespace pj::linuxjail {

struct ChildMount {
  MountKind kind;
  const char* dest;
  const char* source;   // bind: "/oldroot" + host path; symlink: target; scratch: its directory
  const char* options;  // tmpfs, devpts: "k=v,k=v"; scratch: octal mode; mask: file content
  unsigned attrs;       // MOUNT_ATTR_* to set
  Node node;
  bool optional;
  dev_t dev;
  ino_t ino;
  // The Landlock rule init adds from the fd that verified this mount, or -1.
  int landlock_rule = -1;
};

struct ChildLandlockRule {
  const char* path;
  std::uint64_t access;  // already narrowed to what the kernel handles
  // Added right after mount `op` (its verified fd) when that mount is what
  // the finished view shows at `path`; else opened by path once the view
  // is complete. `op` is also the mount failures name (-1: none).
  bool at_mount;
  int op;
};

struct ChildListener {
  sockaddr_storage addr;
  socklen_t len;
};

// pi-jail's own argument and environment areas (/proc/self/stat's
// arg_start..arg_end, env_start..env_end): init, a clone of pi-jail,
// blanks its copies of them.
struct OwnAreas {
  char* args = nullptr;
  size_t args_len = 0;
  char* env = nullptr;
  size_t env_len = 0;
};

struct ChildPlan {
  const ChildMount* mounts;
  size_t mount_count;
  const char* scratch_fs;  // tmpfs options of the one scratch file system
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  const char* hostname;
  const char* uid_map;  // "uid uid 1\n"
  const char* gid_map;
  cap_t empty_caps;    // allocated before clone; cap_set_proc does not allocate
  int sync_fd;         // the child's end of the sync socket
  int parent_sync_fd;  // the supervisor's end, closed first thing
  int control_fd;      // init -> supervisor: the PTY master, "stopped" notes
  int parent_control_fd;
  bool pty;
  unsigned pty_fds;
  termios pty_mode;
  winsize pty_size;
  int grace_ms;  // TERM -> KILL when the command has exited
  sock_fprog command_filter;
  bool command_filter_enforced;
  sock_fprog init_filter;
  std::uint64_t landlock_fs;  // handled fs rights; 0: no Landlock
  std::uint64_t landlock_scoped;
  const ChildLandlockRule* landlock_rules;
  size_t landlock_rule_count;
  const ChildListener* listeners;  // created by init, sent on control_fd
  size_t listener_count;
  std::uint64_t nproc;          // RLIMIT_NPROC inside the user namespace; 0: none
  const int* cgroup_tasks_fds;  // tasks of each cgroup v1 run cgroup (init writes "0", then closes them)
  size_t cgroup_tasks_count;
  const int* cgroup_procs_fds;  // cgroup.procs of each v2 run cgroup (the supervisor writes them; init closes them)
  size_t cgroup_procs_count;
  OwnAreas own;  // blanked by init before the command starts
};

// Owns the strings and arrays a ChildPlan points into.
class ChildPlanStorage {
public:
  // The filters are compiled by the caller (compiling allocates).
  struct Fds {
    int sync, parent_sync, control, parent_control;
  };
  ChildPlanStorage(const JailSpec& spec, BpfProgram command_filter, BpfProgram init_filter, Fds fds,
                   const cgroup::JoinFiles& cgroups = {});
  ~ChildPlanStorage();
  ChildPlanStorage(const ChildPlanStorage&) = delete;
  ChildPlanStorage& operator=(const ChildPlanStorage&) = delete;
  const ChildPlan& plan() const { return plan_; }
  void set_own_areas(OwnAreas own) { plan_.own = own; }

private:
  std::vector<std::string> sources_;
  std::vector<ChildMount> mounts_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  std::string uid_map_, gid_map_;
  BpfProgram command_filter_, init_filter_;
  std::vector<ChildLandlockRule> landlock_;
  std::vector<ChildListener> listeners_;
  std::vector<int> cgroup_tasks_fds_, cgroup_procs_fds_;
  ChildPlan plan_{};
};

// The byte init sends on the control socket when the command stopped
// (Ctrl-Z, a shell's `suspend`, Pi's own SIGTSTP), followed by a byte
// with the signal that stopped it.
inline constexpr char kControlStopped = 'S';
// The tags of the messages that carry fds: the PTY master, the listeners.
inline constexpr char kControlMaster = 'M';
inline constexpr char kControlListeners = 'L';
// The most fds one control message carries (the listeners come in as many
// messages as it takes, in spec order).
inline constexpr size_t kFdBatch = util::kMaxPassedFds;
// The byte the supervisor sends back once its network filter serves the
// listeners: init starts the command only after it.
inline constexpr char kControlFilterReady = 'R';
// The tag of the message carrying an O_PATH fd of the scratch tmpfs, which
// the supervisor keeps to measure what the run left in scratch (fstatfs).
inline constexpr char kControlScratch = 'T';
// The message the supervisor sends once it moved init into the run's
// cgroups (only when there are any): this tag, then the move's errno as
// an int (0: moved). Init forks nothing before it.
inline constexpr char kControlCgroups = 'C';
inline constexpr size_t kControlCgroupsSize = 1 + sizeof(int);

// The byte init sends when the command has ended and every other process
// of the jail is gone (the exit code comes with init's reap). Init has
// closed every other fd by then (the holds on placeholders and the run's
// staging lock it shared with pi-jail since the clone): the supervisor
// may tear down what does not need init gone while the kernel ends init
// (its mount namespace's teardown takes a while).
inline constexpr char kControlEnded = 'E';

// Runs in the cloned child: builds the jail, becomes its init, starts the
// command. Never returns. Async-signal-safe.
[[noreturn]] void jail_main(const ChildPlan& plan);

}  // namespace pj::linuxjail
