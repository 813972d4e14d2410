#include "runtime/system_dirs.h"

#ifdef __linux__
#include <sys/vfs.h>
#endif

#include <string_view>

#include <fmt/format.h>

#include "util/paths.h"

namespace pj::runtime {

namespace {

// Trees of the system itself: neither a workspace nor Pi's agent dir may
// be one of them or lie inside one (a read-write /etc or host procfs).
constexpr std::string_view kSystemTrees[] = {"/proc", "/sys",  "/dev", "/run",   "/boot",  "/etc",   "/usr",
                                             "/bin",  "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
// Directories that hold everybody's or the system's data: refused as a
// whole (a project below them is fine).
constexpr std::string_view kSharedDirs[] = {"/",    "/var",  "/var/tmp", "/tmp",   "/opt",
                                            "/srv", "/home", "/mnt",     "/media", "/root"};

}  // namespace

std::string system_dir_problem(const std::string& dir) {
  for (auto t : kSystemTrees)
    if (util::path_within(dir, t)) return fmt::format("it is part of the system ({})", t);
  for (auto d : kSharedDirs)
    if (dir == d) return "it is a system directory shared by everyone";
#ifdef __linux__
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) == 0) {
    // Pseudo-filesystems: the kernel's objects, not files.
    constexpr unsigned long kPseudo[] = {
        0x9fa0 /* proc */,     0x62656572 /* sysfs */,      0x1cd1 /* devpts */,       0x63677270 /* cgroup2 */,
        0x27e0eb /* cgroup */, 0x73636673 /* securityfs */, 0x64626720 /* debugfs */,  0x74726163 /* tracefs */,
        0xcafe4a11 /* bpf */,  0x6e736673 /* nsfs */,       0x62656570 /* configfs */, 0x19800202 /* mqueue */};
    for (auto m : kPseudo)
      if (static_cast<unsigned long>(fs.f_type) == m) return "it is on a pseudo-filesystem of the kernel";
  }
#endif
  return "";
}

}  // namespace pj::runtime
