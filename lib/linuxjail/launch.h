// Jail: the owner of a running jail (its init's pidfd and the sync
// socket). Destroying it kills and reaps whatever is left of the jail.
#pragma once

#include <sys/types.h>

#include <optional>
#include <span>
#include <vector>

#include "linuxjail/cgroup.h"
#include "linuxjail/spec.h"
#include "linuxjail/stage.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::linuxjail {

class Jail {
public:
  // Clone the jail's init into new user, mount, PID, network, IPC, UTS
  // and cgroup namespaces. The caller must be single-threaded (checked):
  // the kernel refuses CLONE_NEWUSER from a multithreaded process.
  // Signals the supervisor wants to handle must already be blocked.
  // `cgroups`: the run's cgroups (the caller keeps the files open). Init
  // joins them before it forks anything (cgroup::JoinFiles says how).
  static util::Result<Jail> launch(const JailSpec& spec, const cgroup::JoinFiles& cgroups = {});

  Jail(Jail&& other) noexcept;
  Jail& operator=(Jail&&) = delete;
  Jail(const Jail&) = delete;
  ~Jail();

  int pidfd() const { return pidfd_.get(); }
  int sync_fd() const { return sync_.get(); }
  pid_t pid() const { return pid_; }

  // Read one record from the sync socket when sync_fd() is readable.
  // nullopt when there was none; at EOF (the command was executed, or the
  // jail is gone) sync_fd() becomes -1.
  util::Result<std::optional<SyncRecord>> read_sync();
  // What init says on the control socket: the PTY master (once, at start)
  // or that the command stopped itself as a whole.
  struct Control {
    char tag = 0;                     // kControlMaster, kControlListeners, kControlStopped
    std::vector<util::UniqueFd> fds;  // the master, or the listeners in spec order
    int stop_signal = 0;              // kControlStopped: the signal that stopped the command
    bool ended = false;               // kControlEnded: nothing of the jail runs any more
  };
  int control_fd() const { return control_.get(); }
  // Read one control message when control_fd() is readable; at EOF
  // control_fd() becomes -1.
  util::Result<std::optional<Control>> read_control();
  // Tell init that the network filter serves the listeners it sent (it
  // waits for this before starting the command).
  util::Status filter_ready();

  // Deliver `sig` to the jail's init.
  util::Status signal(int sig);
  // Reap init once pidfd() is readable: the command's exit code (init
  // exits with it; 128+N for signal N).
  util::Result<int> reap();

private:
  Jail(pid_t pid, util::UniqueFd pidfd, util::UniqueFd sync, util::UniqueFd control)
      : pid_(pid), pidfd_(std::move(pidfd)), sync_(std::move(sync)), control_(std::move(control)) {}
  pid_t pid_;
  util::UniqueFd pidfd_;
  util::UniqueFd sync_;
  util::UniqueFd control_;
  bool reaped_ = false;
};

// Move the jail's init (`pid`) into the run's cgroup v2 directories (v1
// ones init joins itself: child_limits.cc join_cgroups): write its pid to
// each open cgroup.procs file, then send init kControlCgroups and the
// move's errno (0: moved) on `control_fd`. Init builds the jail meanwhile
// and forks nothing before this message (child_limits.cc await_cgroups);
// a refused move ends the jail there, reported as Stage::join_cgroup. An
// error only when the message cannot be sent. Nothing to do, and nothing
// sent, without v2 cgroups.
util::Status move_into_cgroups(pid_t pid, int control_fd, std::span<const int> cgroup_procs);

}  // namespace pj::linuxjail
