#include "linuxjail/host.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "linuxjail/landlock.h"
#include "linuxjail/cgroup.h"
#include "linuxjail/sys.h"
#include "runtime/request.h"

namespace pj::linuxjail {

namespace {

std::string read_sysctl(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v)) return {};
  return v;
}

// Build a throw-away jail skeleton: the namespaces, the identity map and
// a procfs mount. Returns 0 or the errno of the first refusal, and names
// the step in `step`.
int try_namespaces(std::string& step) {
  // Before clone: inside the new namespace, unmapped ids read as 65534.
  const unsigned uid = ::getuid(), gid = ::getgid();
  int pidfd = -1;
  long pid = sys::clone_process(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                    CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_PIDFD | SIGCHLD,
                                &pidfd);
  if (pid < 0) {
    step = "clone with new namespaces";
    return errno;
  }
  if (pid == 0) {
    // Child: exit code 10+k means step k failed; errno is lost, so the
    // parent reports the step. Async-signal-safe calls only.
    char map[64];
    auto put = [&](const char* path, unsigned id) -> bool {
      int n = 0;
      char digits[16];
      do digits[n++] = static_cast<char>('0' + id % 10);
      while ((id /= 10) != 0);
      int len = 0;
      for (int r = 0; r < 2; ++r) {
        for (int i = n - 1; i >= 0; --i) map[len++] = digits[i];
        map[len++] = ' ';
      }
      map[len++] = '1';
      map[len++] = '\n';
      int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0) return false;
      bool ok = ::write(fd, map, static_cast<size_t>(len)) == len;
      ::close(fd);
      return ok;
    };
    int sg = ::open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (sg < 0 || ::write(sg, "deny", 4) != 4) ::_exit(11);
    ::close(sg);
    if (!put("/proc/self/uid_map", uid) || !put("/proc/self/gid_map", gid)) ::_exit(11);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(12);
    int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) ::_exit(13);
    int mnt = ::fsmount(fs, FSMOUNT_CLOEXEC, 0);
    if (mnt < 0 || ::mkdirat(mnt, "proc", 0755) != 0) ::_exit(13);
    int proc = ::fsopen("proc", FSOPEN_CLOEXEC);
    if (proc < 0 || ::fsconfig(proc, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) ::_exit(14);
    int pm = ::fsmount(proc, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    if (pm < 0) ::_exit(14);
    ::_exit(0);
  }
  siginfo_t si{};
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &si, WEXITED);
  ::close(pidfd);
  if (si.si_code != CLD_EXITED) {
    step = "test jail";
    return EINTR;
  }
  switch (si.si_status) {
    case 0: return 0;
    case 11: step = "write the identity uid/gid map"; return EPERM;
    case 12: step = "make mounts private"; return EPERM;
    case 13: step = "mount a tmpfs with the new mount API"; return EPERM;
    case 14: step = "mount a new procfs"; return EPERM;
    default: step = "test jail"; return EIO;
  }
}

}  // namespace

std::string describe_landlock(int abi) {
  std::string out = fmt::format("filesystem rights 0x{:x}", landlock_handled_fs(abi));
  if (landlock_handled_fs(abi) & ll::kIoctlDev) out += " (incl. device ioctl)";
  if (landlock_scopes(abi)) out += ", scoped: abstract unix sockets, signals";
  out += "; network rights left to the network namespace";
  return out;
}

int landlock_abi() {
  int abi = sys::landlock_abi();
  return abi > 0 ? abi : 0;
}

std::string namespace_fix(int err) {
  std::string restrict_aa = read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  std::string clone_ok = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone");
  std::string max_ns = read_sysctl("/proc/sys/user/max_user_namespaces");
  if (err == ENOSPC || err == EUSERS || max_ns == "0")
    return fmt::format(
        "the user namespace limit is reached (user.max_user_namespaces = {}); raise it: "
        "sudo sysctl -w user.max_user_namespaces=15000 (inside a container, ask its "
        "runtime to allow nested user namespaces)",
        max_ns.empty() ? "?" : max_ns);
  if (err == EPERM && clone_ok == "0")
    return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); enable them: "
           "sudo sysctl -w kernel.unprivileged_userns_clone=1";
  if (err == EPERM && restrict_aa == "1")
    return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, "
           "Ubuntu 24.04+); load pi-jail's profile (installed by the package and by meson install): "
           "sudo apparmor_parser -r /etc/apparmor.d/pi-jail (from a source tree: sudo install -m644 "
           "profiles/apparmor/pi-jail /etc/apparmor.d/pi-jail first)";
  if (err == EPERM)
    return "the kernel or a security module refused to create user namespaces; inside a container, run it "
           "with user namespaces allowed (e.g. a seccomp profile that permits clone/unshare)";
  if (err == EINVAL) return "the kernel lacks a namespace type pi-jail needs (user, mount, pid, net, ipc, uts, cgroup)";
  return "run `pi-jail doctor` for details";
}

// Which resource limits this host lets the caller enforce (informational:
// a limit that is asked for and cannot be enforced stops that run).
void add_limit_checks(HostReport& r) {
  using State = Check::State;
  const bool root = ::geteuid() == 0;
  auto own = cgroup::own_dirs();
  std::vector<std::string> listed;
  const cgroup::Dir* own_pids = nullptr;
  for (const auto& d : own) {
    std::vector<std::string> c;
    if (d.controllers.memory) c.push_back("memory");
    if (d.controllers.cpu) c.push_back("cpu");
    if (d.controllers.pids) c.push_back("pids");
    if (d.controllers.pids && !own_pids) own_pids = &d;
    if (!c.empty()) listed.push_back(fmt::format("{} (v{}: {})", d.path, d.version, fmt::join(c, ", ")));
  }
  if (!root)
    r.checks.push_back({"limit: processes (--pids, default 4096)", State::ok,
                        "RLIMIT_NPROC in the jail's user namespace (counts the jail's tasks only)", ""});
  else
    r.checks.push_back(
        {"limit: processes (--pids, default 4096)", own_pids ? State::ok : State::info,
         own_pids ? fmt::format("a pids cgroup in {} (root is exempt from RLIMIT_NPROC)", own_pids->path)
                  : "no writable pids cgroup: root is exempt from RLIMIT_NPROC, so the default is not enforced",
         own_pids ? "" : "give [limits] cgroup a cgroup directory with the pids controller"});
  r.checks.push_back(
      {"limit: memory and CPU (--memory, --cpus)", State::info,
       listed.empty() ? "only through [limits] cgroup: none of this process's own cgroups is writable with a controller"
                      : fmt::format("writable cgroups of this process: {}; pi-jail uses only those [limits] cgroup "
                                    "names",
                                    fmt::join(listed, "; ")),
       "delegate a cgroup (cgroup v2: `systemd-run --user --scope -p Delegate=yes`, or a directory chowned to you) "
       "and name it in [limits] cgroup (pi-jail.toml(5))"});
  r.checks.push_back({"limit: scratch (/tmp, /var/tmp, /dev/shm together)", State::ok,
                      "one tmpfs of [limits] scratch (default 50% of RAM)", ""});
}

HostReport probe_host() {
  HostReport r;
  using State = Check::State;
  utsname u{};
  ::uname(&u);
  r.checks.push_back({"kernel", State::info, fmt::format("{} {}", u.sysname, u.release), ""});

  bool required_ok = true;
  auto need = [&](std::string name, bool ok, std::string detail, std::string fix) {
    r.checks.push_back({std::move(name), ok ? State::ok : State::missing, std::move(detail), ok ? "" : std::move(fix)});
    if (!ok) required_ok = false;
  };

  std::string max_ns = read_sysctl("/proc/sys/user/max_user_namespaces");
  need("user.max_user_namespaces", max_ns != "0", max_ns.empty() ? "unknown" : max_ns, namespace_fix(ENOSPC));
  std::string clone_ok = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone");
  if (!clone_ok.empty()) need("kernel.unprivileged_userns_clone", clone_ok != "0", clone_ok, namespace_fix(EPERM));
  std::string aa = read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  if (!aa.empty())
    r.checks.push_back({"kernel.apparmor_restrict_unprivileged_userns", aa == "0" ? State::ok : State::info, aa,
                        aa == "0" ? "" : "restricted: pi-jail needs its AppArmor profile (see the jail test below)"});

  int fd = ::open_tree(AT_FDCWD, "/", OPEN_TREE_CLOEXEC);
  need("new mount API (open_tree, move_mount, mount_setattr)", fd >= 0 || errno != ENOSYS,
       fd >= 0 || errno != ENOSYS ? "present" : "missing", "upgrade to Linux 5.12 or newer");
  if (fd >= 0) ::close(fd);
  int o2 = sys::openat2(AT_FDCWD, "/", O_PATH | O_CLOEXEC, RESOLVE_NO_SYMLINKS);
  need("openat2 (RESOLVE_IN_ROOT)", o2 >= 0 || errno != ENOSYS, o2 >= 0 || errno != ENOSYS ? "present" : "missing",
       "upgrade to Linux 5.6 or newer");
  if (o2 >= 0) ::close(o2);

  std::string step;
  int err = try_namespaces(step);
  need("a test jail (user, mount, pid, net, ipc, uts, cgroup namespaces; uid map; tmpfs; procfs)", err == 0,
       err == 0 ? "built and torn down" : fmt::format("{} failed: {}", step, std::strerror(err)),
       err == 0 ? "" : namespace_fix(err));

  std::string actions;
  {
    std::ifstream in("/proc/sys/kernel/seccomp/actions_avail");
    std::getline(in, actions);
  }
  bool seccomp = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 && actions.find("kill_process") != std::string::npos &&
                 actions.find("errno") != std::string::npos;
  need("seccomp filter (required: the syscall table is always loaded)", seccomp,
       seccomp ? fmt::format("available (actions: {})", actions) : "missing or without kill_process/errno",
       "use a kernel built with CONFIG_SECCOMP_FILTER (Linux 4.14 or newer)");
  int abi = landlock_abi();
  r.checks.push_back({"Landlock (second filesystem layer, used when available)", abi > 0 ? State::ok : State::info,
                      abi > 0 ? fmt::format("ABI {}: {}", abi, describe_landlock(abi))
                              : "unavailable: jails run with the mount view as the only filesystem layer",
                      abi > 0 ? "" : "boot with Landlock enabled (lsm=...,landlock) to add the second layer"});
  // A run of the pi profile adds its CA to the system's bundle for the
  // jail, and its filter checks servers against it: without one the run
  // stops (125).
  std::string bundle;
  for (auto p : runtime::kCaBundlePaths) {
    struct stat st {};
    if (::stat(std::string(p).c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      bundle = p;
      break;
    }
  }
  need("the system's CA certificates (a pi profile run adds its CA to them)", !bundle.empty(),
       bundle.empty() ? fmt::format("none of {}", fmt::join(runtime::kCaBundlePaths, ", ")) : bundle,
       "install ca-certificates (Debian/Ubuntu: apt-get install ca-certificates)");
  add_limit_checks(r);
  r.jail_possible = required_ok;
  return r;
}

}  // namespace pj::linuxjail
