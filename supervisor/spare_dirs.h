// Empty directories kept in pi-jail's state directory, moved to where a
// run needs a placeholder directory and moved back when it ends, instead
// of being made and removed at each run. Making a directory allocates a
// block for its entries and removing it frees that block; on a filesystem
// mounted with `discard` (ext4 on the CI machine) freeing waits for the
// device to discard it: 0.08 ms for each of a run's placeholders there,
// up to 0.3 ms while Pi's own writes are in the queue (tests/bench). A
// rename allocates and frees nothing.
//
// - Only directories no jail has seen go back: a placeholder is covered
//   by its mask inside.
// - Only empty ones: a directory found holding anything once it has been
//   moved is moved back where it was, so a file a host process writes
//   into a placeholder at that moment stays where it was written; remove
//   then fails with ENOTEMPTY, as rmdir(2) would have.
// - A spare is used only when it is still a directory of pi-jail's user
//   with nothing in it, and is given the mode a new one would have.
// - A directory on another filesystem than the spares (a rename fails
//   with EXDEV), one on a filesystem without RENAME_NOREPLACE, or a full
//   set of spares (kMaxSpares) is made and removed as before.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/unique_fd.h"

namespace pj::supervisor {

class SpareDirs {
public:
  static constexpr const char* kDirName = "spare-dirs";
  static constexpr size_t kMaxSpares = 64;

  // The spares in `<state>/spare-dirs` (made 0700 when missing), `state`
  // being open at `state_fd`. Never fails: when that directory cannot be
  // made or is not pi-jail's user's alone, make() and remove() make and
  // remove directories as mkdirat(2) and rmdir(2) do.
  SpareDirs(int state_fd, std::string state);

  // Make the directory `name` in `parent` with `mode` less the umask, as
  // mkdirat(2) does, from a spare when one is on parent's filesystem.
  // 0, or mkdirat's errno (EEXIST when `name` exists).
  int make(int parent, const char* name, mode_t mode);

  // Remove the directory `name` of `parent`, found empty by the caller:
  // kept as a spare when there is room and it is on the spares'
  // filesystem, else removed. 0, or an errno as unlinkat(AT_REMOVEDIR)
  // gives it (ENOTEMPTY: it holds something, and is where it was).
  // `shown` names it in the warning given when a directory that was
  // written to as it was moved cannot be moved back (its name was taken
  // meanwhile): the warning says where it is.
  int remove(int parent, const char* name, std::string_view shown);

private:
  bool on_our_filesystem(int parent) const;
  std::vector<std::string>& spares();  // listed once, when first needed

  util::UniqueFd dir_;
  std::string path_;
  dev_t dev_ = 0;
  mode_t umask_ = 022;
  bool listed_ = false;
  std::vector<std::string> names_;
};

}  // namespace pj::supervisor
