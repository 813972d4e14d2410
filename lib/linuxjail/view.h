// The structural part of every jail's view, one table of data with a
// reason per row: scratch file systems, devices, /proc. What is policy
// (system paths, /etc, masks, environment) lives in profiles/pi.toml.
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

struct ScratchPlace {
  std::string_view path;  // where it is bound in the jail
  std::string_view dir;   // its directory in the one scratch tmpfs
  std::string_view why;
};

// Private structural file systems (/run, /dev), each its own small tmpfs.
std::span<const TmpfsEntry> private_tmpfs();
// The places of the one scratch tmpfs: what is written in any of them
// counts against the same size ([limits] scratch).
std::span<const ScratchPlace> scratch_places();
// Host device nodes bound into the jail's /dev.
std::span<const Entry> devices();
std::span<const LinkEntry> dev_links();
// procfs paths made read-only.
std::span<const Entry> proc_read_only();

}  // namespace pj::linuxjail::view
