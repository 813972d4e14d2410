// Placeholders: the empty read-only objects pi-jail makes on the host to
// cover protected paths that do not exist (`.envrc`, `.git/commondir`, a
// project's `.pi/`), so that the jail cannot create them. They sit in
// places the jail writes (the workspace), are shared by every jail that
// protects the same path, and outlive none of them:
//
// - Every jail holds a shared flock(2) on each protected object it relies
//   on, placeholder or not, from before it starts until it is gone. The
//   kernel drops a lock when its holder dies, even by SIGKILL.
// - A placeholder is removed only under an exclusive flock taken without
//   waiting (no jail relies on it), and only while it is still exactly
//   what pi-jail made: an empty directory, or a file with its content.
// - Each placeholder is written to a registry in pi-jail's state
//   directory (no jail sees it: see profiles/builtin.toml) BEFORE it is
//   made, under the registry's lock; every start and every end sweeps the
//   registry, so what a SIGKILLed run left is removed by the next one.
// - The registry is not fsynced (a start would wait for the journal):
//   what a power failure loses of it, each placeholder's mark (the xattr
//   user.pi-jail) recovers, in part: the next run of that workspace
//   adopts a marked placeholder that is still as made and removes it when
//   it ends. On a filesystem without user xattrs such a leftover stays.
// - Planning happens under the same lock (Registry::lock, then plan, then
//   hold), so a run ending cannot remove a placeholder that a run starting
//   beside it has just planned to rely on.
#pragma once

#include <string>
#include <vector>

#include "linuxjail/spec.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

class Holds;

class Registry {
public:
  // Take the registry's lock in `state_dir` (made 0700 if missing) and
  // sweep it. Blocks while another pi-jail holds the lock (briefly).
  static util::Result<Registry> lock(const std::string& state_dir);

  // Make the placeholders `spec` needs and take a shared hold on every
  // protected object below a writable mount of `spec`. Fails (and makes
  // nothing more) when a path changed since it was planned.
  util::Result<Holds> hold(const linuxjail::JailSpec& spec);

  // Drop the lock (holds taken stay).
  void unlock() { fd_.reset(); }

private:
  explicit Registry(std::string state_dir, util::UniqueFd fd) : dir_(std::move(state_dir)), fd_(std::move(fd)) {}
  std::string dir_;
  util::UniqueFd fd_;
};

// The shared holds of one run. release() (or destruction) drops them and
// sweeps the registry: placeholders no other jail holds are removed.
class Holds {
public:
  Holds(Holds&&) = default;
  Holds& operator=(Holds&&) = default;
  ~Holds() { release(); }
  void release();

private:
  friend class Registry;
  explicit Holds(std::string state_dir) : dir_(std::move(state_dir)) {}
  std::string dir_;
  std::vector<util::UniqueFd> fds_;
};

}  // namespace pj::supervisor
