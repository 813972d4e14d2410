// Files replaced whole: written beside their target under a name of their
// own, then renamed over it. rename(2) is atomic, so a reader sees the old
// or the new file, never a part. The one place pi-jail replaces a file or
// publishes a directory it made under a temporary name.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "result.h"
#include "unique_fd.h"

namespace pj::util {

// How far fill() makes sure the content got: the page cache (survives the
// process, enough where losing the file to a power failure is harmless)
// or the disk.
enum class Durability { page_cache, disk };

// All of `data` written to `fd` (a file or a pipe: write(2) until done,
// EINTR retried); an error names `shown`. The one write loop for a whole
// buffer that is not a socket's (bounded_io.h sends on those).
Status write_all(int fd, std::string_view data, std::string_view shown);

class TempFile {
public:
  // A new file BASE.<16 hex digits>.tmp (0600, never an existing one) in
  // the directory `dirfd`, which must outlive it.
  static Result<TempFile> create(int dirfd, std::string_view base);

  TempFile(TempFile&& o) noexcept;
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile();  // removes the file unless it was renamed into place

  const std::string& name() const { return name_; }

  // Removes the files create(dirfd, base) made that are still there: what
  // a writer killed before it could rename or remove its file left. Only
  // for a caller that holds the lock every writer of `base` takes (none of
  // them can be writing now); an unrelated name is never touched.
  static void remove_abandoned(int dirfd, std::string_view base);

  // Writes `content` (with `mode`, 0600 unless said, whatever the umask)
  // and closes the file.
  Status fill(std::string_view content, Durability durability = Durability::disk, mode_t mode = 0600);

  // Renamed over `target`, replacing whatever has that name; the file is
  // then no longer ours.
  Status rename_over(std::string_view target);

  // Renamed to `target` only if nothing has that name (renameat2's
  // RENAME_NOREPLACE): true when placed; false when something has it, and
  // the file stays ours.
  Result<bool> publish(std::string_view target);

private:
  TempFile(int dirfd, std::string name, UniqueFd fd);
  int dirfd_;
  std::string name_;
  UniqueFd fd_;
};

// Renames `from` over `to` within `dirfd` (a file or a directory; a
// directory `to` must be empty), replacing `to`.
Status replace_entry(int dirfd, std::string_view from, std::string_view to);

}  // namespace pj::util
