// Reading what the jail can write (DESIGN property 6): the workspace, the
// agent dir and anything else writable inside are attacker-controlled.
// These helpers never follow a symlink (not in the last component, not in
// any directory on the way), never block on a FIFO or a device, never
// climb with "..", and never read more than a cap.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "result.h"
#include "unique_fd.h"

namespace pj::util {

// A directory reached from `dirfd` by the relative path `rel` ("a/b"; ""
// or "." is `dirfd` itself), one component at a time with O_NOFOLLOW.
// Fails with ELOOP/ENOTDIR when a component is a symlink or not a
// directory, ENOENT when one is missing.
Result<UniqueFd> open_dir_beneath(int dirfd, std::string_view rel);

// The same from an absolute path, every component checked from "/". For
// host paths the caller already resolved (realpath) and wants to pin.
Result<UniqueFd> open_dir_nofollow(std::string_view absolute);

// pi-jail's own directory at `absolute` (its state directory): each
// missing component made 0700, then opened as open_dir_nofollow does.
Result<UniqueFd> make_private_dir(std::string_view absolute);

// The content of the regular file `rel` beneath `dirfd`, at most `cap`
// bytes; nullopt when it does not exist. A symlink anywhere on the way,
// a FIFO, device, socket or directory, or a file over `cap` bytes (a
// sparse file counts by its size) is an error naming `shown`.
Result<std::optional<std::string>> read_untrusted_file(int dirfd, std::string_view rel, size_t cap,
                                                       std::string_view shown);

// The same for an absolute host path.
Result<std::optional<std::string>> read_untrusted_file(std::string_view absolute, size_t cap);

// The content of the file open at `fd`, from its offset, with the same
// checks: a regular file of at most `cap` bytes (`shown` names it).
Result<std::string> read_open_file(int fd, size_t cap, std::string_view shown);
// read_open_file() in two steps: the checks (the file's size), and the
// reading, which may come later and needs no system call but read(2).
Result<size_t> check_open_file(int fd, size_t cap, std::string_view shown);
Result<std::string> read_checked_file(int fd, size_t size, size_t cap, std::string_view shown);

// What lies at `rel` beneath `dirfd`, without following a final symlink
// (directories on the way are walked as in open_dir_beneath).
enum class NodeType { absent, directory, regular, symlink, other };
struct NodeInfo {
  NodeType type = NodeType::absent;
  dev_t dev = 0;
  ino_t ino = 0;
  uid_t uid = 0;
  off_t size = 0;
};
Result<NodeInfo> stat_beneath(int dirfd, std::string_view rel);

// How open_output_file treats a regular file already at the path.
enum class OutputMode {
  replace_content,  // emptied (a document rewritten whole: --report)
  append,           // written at its end (a log: --net-log)
};

// The regular file at the host path `path`, opened for writing (created
// with `perm` when absent), close-on-exec and blocking again once open.
// Opening never blocks and never follows a final symlink: it is done with
// O_NONBLOCK|O_NOFOLLOW and without O_TRUNC, the type is checked with
// fstat, and only a regular file is kept (and then emptied for
// replace_content). A FIFO (with or without a reader), a device, a
// socket, a directory or a symlink at `path` is an error whose message is
// "PATH is a FIFO" (a device, ...): nothing is written to it and a
// symlink's target is not touched. Directories on the way are the
// caller's (an operator's path, not one the jail can write).
Result<UniqueFd> open_output_file(const std::string& path, OutputMode mode, mode_t perm);

// Remove every entry below the directory `dir` (absolute) that is
// neither a regular file nor a directory (symlinks, FIFOs, sockets,
// devices), never following one. A directory the jail made unreadable or
// unwritable (it owns what it made) is given its owner's rwx back first.
// Entries are judged by the type their directory records (for_each_entry)
// on the local filesystems known to record the inode's own type, so a
// history of thousands of files costs one getdents64 per directory; on
// any other filesystem each entry is lstat'ed.
struct SpecialFiles {
  size_t removed = 0;
  // Entries that could not be removed, and directories that could not be
  // read, or lay beyond the walk's bounds (128 deep, 200,000 entries).
  size_t unchecked = 0;
};
SpecialFiles remove_special_files(const std::string& dir);

// Does the directory open at `dirfd` hold nothing but "." and ".."? Read
// from its start (for_each_name: the fd's offset moves); false when it
// cannot be read.
bool directory_is_empty(int dirfd);

}  // namespace pj::util
