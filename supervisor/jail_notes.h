// pi-jail's own directory for the jail, shown read-only inside while the
// run lasts (at kJailNotesDir in the Linux jail; at its own host path in
// the macOS jail, which sees host paths): what the jail is told about its
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
inline constexpr std::string_view kRefusalsVariable = "PI_JAIL_REFUSALS";
// The newest destinations listed; older ones are only counted.
inline constexpr size_t kMaxListedRefusals = 100;

// The file's text for `table`: a header saying what it is, then one line
// per refused destination (protocols together, oldest first, the newest
// kMaxListedRefusals), each with the option that would allow it when an
// allow rule would (allow_flag()).
std::string refusals_text(const netproxy::DecisionTable& table, const SummaryHints& hints = {});

// Where the jail sees the notes directory.
enum class NotesSeen {
  mounted,   // the Linux jail: the host directory mounted read-only at kJailNotesDir
  in_place,  // the macOS jail, which sees host paths: the directory itself, granted read-only
};

// The shell script that stands for Pi inside the jail (`pi_path` is the
// real one, as the jail sees it): Pi's package commands (its first
// argument install, remove, uninstall or update, as Pi's own parser reads
// it) exit 125 with pi_package_refusal()'s sentence; anything else execs Pi.
std::string pi_guard_script(const std::string& pi_path);

class JailNotes {
public:
  // A new directory in `state_dir` with the refusals of an empty table.
  // Directories of earlier runs that nobody holds any more (a run killed
  // with SIGKILL leaves its own) are removed first.
  static util::Result<JailNotes> make(const std::string& state_dir, SummaryHints hints,
                                      NotesSeen seen = NotesSeen::mounted);
  JailNotes(JailNotes&& o) noexcept;
  JailNotes& operator=(JailNotes&&) = delete;
  ~JailNotes();  // removes the directory

  // The host directory, and where the jail sees it.
  const std::string& dir() const { return dir_; }
  std::string jail_dir() const { return seen_ == NotesSeen::mounted ? std::string(kJailNotesDir) : dir_; }
  // `r` shows the jail the directory read-only at jail_dir() and names
  // the refusals' file in kRefusalsVariable.
  void show(runtime::Request& r) const;
  // Rewrites the file when `table` has a new entry since the last call
  // (so at most netproxy::kMaxEntries times a run). A failure is said
  // once on stderr; the run goes on (the exit summary still lists
  // everything).
  void update(const netproxy::DecisionTable& table);
  // Writes bin/pi (pi_guard_script()); `r` gets its directory (as the
  // jail sees it) first on PATH.
  util::Status add_pi_guard(const std::string& pi_path, runtime::Request& r);

private:
  JailNotes(std::string dir, util::UniqueFd state, std::string name, util::UniqueFd fd, SummaryHints hints,
            NotesSeen seen)
      : dir_(std::move(dir)),
        state_(std::move(state)),
        name_(std::move(name)),
        fd_(std::move(fd)),
        hints_(hints),
        seen_(seen) {}
  util::Result<void> write(const std::string& text);

  std::string dir_;
  util::UniqueFd state_;  // the state directory that holds it, as name_
  std::string name_;
  util::UniqueFd fd_;  // the directory, locked (flock) for as long as the run lasts
  SummaryHints hints_;
  NotesSeen seen_;
  size_t seen_entries_ = 0;
  bool warned_ = false;
};

}  // namespace pj::supervisor
