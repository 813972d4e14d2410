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

// The content of the regular file `rel` beneath `dirfd`, at most `cap`
// bytes; nullopt when it does not exist. A symlink anywhere on the way,
// a FIFO, device, socket or directory, or a file over `cap` bytes (a
// sparse file counts by its size) is an error naming `shown`.
Result<std::optional<std::string>> read_untrusted_file(int dirfd, std::string_view rel, size_t cap,
                                                       std::string_view shown);

// The same for an absolute host path.
Result<std::optional<std::string>> read_untrusted_file(std::string_view absolute, size_t cap);

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

}  // namespace pj::util
