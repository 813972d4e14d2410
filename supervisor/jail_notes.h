// pi-jail's own directory for the jail, shown read-only inside at
// kJailNotesDir while the run lasts: what the jail is told about its
// refusals beyond a bare status.
//
// - `refusals` ($PI_JAIL_REFUSALS): the run's network refusals so far.
//   Most clients show a refused request as a bare status, and the agent
//   inside has no other way to learn the host and the option that would
//   allow it. Replaced whole (a new file, then rename(2)) whenever the
//   filter's table gains an entry, so a reader sees one list or the next,
//   never half of one; the directory, not the file, is shown, so that the
//   new inode is what the jail reads. The host names in it are the jail's
//   own text: escaped and cut like the exit summary's.
// - `bin/pi` (the pi profile): first on PATH inside, it refuses Pi's
//   package commands at once, saying how to install outside, and runs Pi
//   for everything else (pi_guard_script()).
//
// The directory lives in pi-jail's state directory, which no jail sees,
// and is removed at the end of the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "netproxy/decisions.h"
#include "run.h"
#include "runtime/request.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

inline constexpr std::string_view kJailNotesDir = "/run/pi-jail";
inline constexpr std::string_view kRefusalsJailFile = "/run/pi-jail/refusals";
inline constexpr std::string_view kPiGuardJailDir = "/run/pi-jail/bin";
inline constexpr std::string_view kRefusalsVariable = "PI_JAIL_REFUSALS";
// The newest destinations listed; older ones are only counted.
inline constexpr size_t kMaxListedRefusals = 100;

// The file's text for `table`: a header saying what it is, then one line
// per refused destination (protocols together, oldest first, the newest
// kMaxListedRefusals), each with the option that would allow it when an
// allow rule would (allow_flag()).
std::string refusals_text(const netproxy::DecisionTable& table, const SummaryHints& hints = {});

// `r` shows the jail the host directory `dir` read-only at
// kJailNotesDir and names the refusals in kRefusalsVariable (the Linux
// jail, which shows files of pi-jail's at other paths).
void show_refusals(const std::string& dir, runtime::Request& r);

// The shell script that stands for Pi inside the jail (`pi_path` is the
// real one, as the jail sees it): Pi's package commands (its first
// argument install, remove, uninstall or update, as Pi's own parser reads
// it) exit 125 with pi_package_refusal()'s sentence; anything else execs Pi.
std::string pi_guard_script(const std::string& pi_path);

class JailNotes {
public:
  // A new directory in `state_dir` with the refusals of an empty table.
  static util::Result<JailNotes> make(const std::string& state_dir, SummaryHints hints);
  JailNotes(JailNotes&& o) noexcept;
  JailNotes& operator=(JailNotes&&) = delete;
  ~JailNotes();  // removes the directory

  // The host directory shown at kJailNotesDir.
  const std::string& dir() const { return dir_; }
  // Rewrites the file when `table` has a new entry since the last call
  // (so at most netproxy::kMaxEntries times a run). A failure is said
  // once on stderr; the run goes on (the exit summary still lists
  // everything).
  void update(const netproxy::DecisionTable& table);
  // Writes bin/pi (pi_guard_script()); `r` gets kPiGuardJailDir first on PATH.
  util::Status add_pi_guard(const std::string& pi_path, runtime::Request& r);

private:
  JailNotes(std::string dir, util::UniqueFd fd, SummaryHints hints)
      : dir_(std::move(dir)), fd_(std::move(fd)), hints_(hints) {}
  util::Result<void> write(const std::string& text);

  std::string dir_;
  util::UniqueFd fd_;  // the directory
  SummaryHints hints_;
  size_t seen_entries_ = 0;
  bool warned_ = false;
};

}  // namespace pj::supervisor
