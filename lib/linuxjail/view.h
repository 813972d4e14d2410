// The default filesystem view and environment allowlist: one table of
// data, each row with its reason. The policy module will replace it with
// profiles/; until then this is the whole built-in view.
#pragma once

#include <span>
#include <string_view>

namespace pj::linuxjail::view {

struct Entry {
  std::string_view path;
  std::string_view why;
};

struct TmpfsEntry {
  std::string_view path;
  std::string_view options;
  std::string_view why;
};

struct LinkEntry {
  std::string_view path;
  std::string_view target;
  std::string_view why;
};

// System directories, bound read-only when they are directories on the
// host and recreated as the same symlink when they are symlinks (merged
// /usr), skipped when absent.
std::span<const Entry> system_roots();
// /etc entries every program may read; absent ones are skipped. Nothing
// only root may read (shadow, gshadow, sudoers, ssh host keys) is listed.
std::span<const Entry> etc_entries();
// Paths inside the entries above that are masked anyway.
std::span<const Entry> secret_masks();
// Private scratch file systems.
std::span<const TmpfsEntry> scratch();
// Host device nodes bound into the jail's /dev.
std::span<const Entry> devices();
std::span<const LinkEntry> dev_links();
// procfs paths made read-only.
std::span<const Entry> proc_read_only();
// Environment variables passed through from the caller (exact names), and
// name prefixes passed through.
std::span<const std::string_view> env_pass();
std::span<const std::string_view> env_pass_prefixes();

}  // namespace pj::linuxjail::view
