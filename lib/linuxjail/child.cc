// Between clone and exec. Rules for this file: no allocation, no stdio,
// no fmt, no locks, no exceptions; only system calls and the plain data in
// ChildPlan. A failure sends {stage, errno, op} to the supervisor and
// exits 125. See stage.h.
#include "linuxjail/child.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <ctime>

#include "linuxjail/stage.h"
#include "linuxjail/sys.h"

namespace pj::linuxjail {

namespace {

constexpr unsigned kResolveSafe = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// The sync fd and exit code a failure uses; set once per process.
int g_sync_fd = -1;

void report(Stage stage, int err, int op) {
  SyncRecord rec{kSyncMagic, stage, err, op};
  ssize_t n = ::write(g_sync_fd, &rec, sizeof rec);
  (void)n;
}

[[noreturn]] void fail(Stage stage, int err, int op = -1) {
  report(stage, err, op);
  ::_exit(125);
}

int write_file(const char* path, const char* data) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t len = std::strlen(data);
  ssize_t n = ::write(fd, data, len);
  int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

// Identity mapping: the command sees the caller's own uid and gid.
// setgroups must be denied before an unprivileged gid_map is accepted.
void map_identity(const ChildPlan& p) {
  int err = write_file("/proc/self/setgroups", "deny");
  if (err == 0) err = write_file("/proc/self/uid_map", p.uid_map);
  if (err == 0) err = write_file("/proc/self/gid_map", p.gid_map);
  if (err != 0) fail(Stage::user_map, err);
}

// Open `path` (absolute, inside the new root) with no symlink anywhere.
int open_in_root(int root, const char* path, int flags) {
  return sys::openat2(root, path, static_cast<unsigned>(flags) | O_CLOEXEC, RESOLVE_IN_ROOT | kResolveSafe);
}

// Walk `path` from `root` one component at a time, creating what is
// missing (directories; a final empty file when `node` is a file), never
// following a symlink. Returns an O_PATH fd of the destination, or -errno.
int make_mountpoint(int root, const char* path, Node node) {
  int cur = ::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return -errno;
  const char* p = path;
  char name[NAME_MAX + 1];
  while (true) {
    while (*p == '/') ++p;
    if (*p == '\0') break;
    size_t len = 0;
    while (p[len] != '\0' && p[len] != '/') ++len;
    if (len > NAME_MAX) {
      ::close(cur);
      return -ENAMETOOLONG;
    }
    std::memcpy(name, p, len);
    name[len] = '\0';
    p += len;
    const char* rest = p;
    while (*rest == '/') ++rest;
    const bool last = *rest == '\0';

    int fd = sys::openat2(cur, name, O_PATH | O_CLOEXEC, RESOLVE_BENEATH | kResolveSafe);
    if (fd < 0 && errno == ENOENT) {
      int r;
      if (!last || node == Node::directory) {
        r = ::mkdirat(cur, name, 0755);
      } else {
        r = ::openat(cur, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (r >= 0) r = ::close(r);
      }
      if (r < 0 && errno != EEXIST) {
        int err = errno;
        ::close(cur);
        return -err;
      }
      fd = sys::openat2(cur, name, O_PATH | O_CLOEXEC, RESOLVE_BENEATH | kResolveSafe);
    }
    int err = errno;
    ::close(cur);
    if (fd < 0) return -err;
    cur = fd;
  }
  struct stat st;
  if (::fstat(cur, &st) != 0) {
    int err = errno;
    ::close(cur);
    return -err;
  }
  const bool is_dir = S_ISDIR(st.st_mode);
  if (is_dir != (node == Node::directory)) {
    ::close(cur);
    return is_dir ? -EISDIR : -ENOTDIR;
  }
  return cur;
}

// Attach detached mount `tree` at `dest` and check that the object now
// found at `dest` is the root of `tree`.
void attach(int root, int tree, const ChildMount& m, int op) {
  int dest = make_mountpoint(root, m.dest, m.node);
  if (dest < 0) fail(Stage::mountpoint, -dest, op);
  if (::move_mount(tree, "", dest, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(Stage::mount, errno, op);
  ::close(dest);
  struct stat want, got;
  int now = open_in_root(root, m.dest, O_PATH);
  if (now < 0) fail(Stage::mount_verify, errno, op);
  if (::fstat(tree, &want) != 0 || ::fstat(now, &got) != 0) fail(Stage::mount_verify, errno, op);
  if (want.st_dev != got.st_dev || want.st_ino != got.st_ino) fail(Stage::mount_verify, EXDEV, op);
  ::close(now);
  ::close(tree);
}

// fsconfig each "key=value" of a comma-separated option string.
int configure(int fs, const char* options) {
  char buf[256];
  const char* p = options;
  while (*p != '\0') {
    size_t len = 0;
    while (p[len] != '\0' && p[len] != ',') ++len;
    if (len >= sizeof buf) return EINVAL;
    std::memcpy(buf, p, len);
    buf[len] = '\0';
    p += len;
    if (*p == ',') ++p;
    char* eq = std::strchr(buf, '=');
    int r = eq ? (*eq = '\0', ::fsconfig(fs, FSCONFIG_SET_STRING, buf, eq + 1, 0))
               : ::fsconfig(fs, FSCONFIG_SET_FLAG, buf, nullptr, 0);
    if (r != 0) return errno;
  }
  return 0;
}

// A new superblock of `fstype` as a detached mount, or -errno.
int new_fs(const char* fstype, const char* options, unsigned attrs) {
  int fs = ::fsopen(fstype, FSOPEN_CLOEXEC);
  if (fs < 0) return -errno;
  int err = configure(fs, options);
  if (err == 0 && ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) err = errno;
  int mnt = err == 0 ? ::fsmount(fs, FSMOUNT_CLOEXEC, attrs) : -1;
  if (err == 0 && mnt < 0) err = errno;
  ::close(fs);
  return err == 0 ? mnt : -err;
}

void set_attrs(int tree, unsigned attrs, unsigned flags, Stage stage, int op) {
  mount_attr attr{};
  attr.attr_set = attrs;
  if (::mount_setattr(tree, "", AT_EMPTY_PATH | flags, &attr, sizeof attr) != 0) fail(stage, errno, op);
}

void do_bind(int root, const ChildMount& m, int op) {
  int tree = ::open_tree(AT_FDCWD, m.source,
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
  if (tree < 0) fail(Stage::mount_source, errno, op);
  struct stat st;
  if (::fstat(tree, &st) != 0) fail(Stage::mount_source, errno, op);
  if (st.st_dev != m.dev || st.st_ino != m.ino) fail(Stage::source_changed, ESTALE, op);
  // Only ever *set* flags: flags the kernel locked on the source (ro,
  // nosuid, nodev, noexec from a more privileged namespace) stay.
  set_attrs(tree, m.attrs, AT_RECURSIVE, Stage::mount, op);
  attach(root, tree, m, op);
}

void do_new_fs(int root, const char* fstype, const ChildMount& m, int op) {
  int tree = new_fs(fstype, m.options, m.attrs);
  if (tree < 0) fail(Stage::mount, -tree, op);
  attach(root, tree, m, op);
}

void do_mask(int root, const ChildMount& m, int op) {
  const unsigned ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  if (m.node == Node::directory) {
    int tree = new_fs("tmpfs", "size=4k,mode=0555", ro);
    if (tree < 0) fail(Stage::mount, -tree, op);
    attach(root, tree, m, op);
    return;
  }
  // An empty regular file: made on a private tmpfs, then bound alone.
  int scratch = new_fs("tmpfs", "size=4k,mode=0700", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (scratch < 0) fail(Stage::mount, -scratch, op);
  int f = ::openat(scratch, "empty", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  if (f < 0) fail(Stage::mount, errno, op);
  const size_t len = std::strlen(m.options);  // the placeholder's content ("{}" for JSON)
  if (len > 0 && ::write(f, m.options, len) != static_cast<ssize_t>(len)) fail(Stage::mount, errno, op);
  ::close(f);
  int tree = ::open_tree(scratch, "empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) fail(Stage::mount, errno, op);
  ::close(scratch);
  set_attrs(tree, ro, 0, Stage::mount, op);
  attach(root, tree, m, op);
}

void do_symlink(int root, const ChildMount& m, int op) {
  char parent[PATH_MAX];
  size_t len = std::strlen(m.dest);
  if (len >= sizeof parent) fail(Stage::mountpoint, ENAMETOOLONG, op);
  std::memcpy(parent, m.dest, len + 1);
  char* slash = std::strrchr(parent, '/');
  if (!slash || slash[1] == '\0') fail(Stage::mountpoint, EINVAL, op);
  const char* name = m.dest + (slash - parent) + 1;
  *slash = '\0';
  int dir = make_mountpoint(root, parent[0] ? parent : "/", Node::directory);
  if (dir < 0) fail(Stage::mountpoint, -dir, op);
  if (::symlinkat(m.source, dir, name) != 0) fail(Stage::mountpoint, errno, op);
  ::close(dir);
}

// The jail's one scratch file system, while its places are being bound.
// open_tree(OPEN_TREE_CLONE) takes a subtree only of a mount attached in
// the caller's mount namespace (fs/namespace.c __do_loopback() before
// Linux 6.15 refuses a detached one with EINVAL), so the tmpfs is attached
// at kScratchStage in the new root first, and detached again by
// end_scratch() once each place holds its own clone of a directory of it.
// The clones keep the one superblock, and so the one size, alive.
constexpr const char* kScratchStage = "/.pi-jail-scratch";

struct Scratch {
  int stage = -1;  // O_PATH fd of the staged tmpfs root; -1 until first used
};

void do_scratch(int root, Scratch& s, const char* fs_options, const ChildMount& m, int op) {
  if (s.stage < 0) {
    int tree = new_fs("tmpfs", fs_options, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (tree < 0) fail(Stage::mount, -tree, op);
    const ChildMount staged{MountKind::tmpfs, kScratchStage, "", fs_options, 0, Node::directory, false, 0, 0};
    attach(root, tree, staged, op);
    s.stage = open_in_root(root, kScratchStage, O_PATH | O_DIRECTORY);
    if (s.stage < 0) fail(Stage::mount, errno, op);
  }
  // mkdirat's mode is masked by the umask: set it explicitly (1777, or
  // the octal mode in `options`: 0700 for an ephemeral $HOME). Nothing
  // else can reach this private tmpfs, so the name is ours.
  mode_t mode = 01777;
  if (m.options && m.options[0]) {
    mode = 0;
    for (const char* c = m.options; *c >= '0' && *c <= '7'; ++c) mode = mode * 8 + static_cast<mode_t>(*c - '0');
  }
  if (::mkdirat(s.stage, m.source, 0700) != 0) fail(Stage::mount, errno, op);
  if (::fchmodat(s.stage, m.source, mode, 0) != 0) fail(Stage::mount, errno, op);
  int tree = ::open_tree(s.stage, m.source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0) fail(Stage::mount, errno, op);
  set_attrs(tree, m.attrs, 0, Stage::mount, op);
  attach(root, tree, m, op);
}

// Detach the staged scratch tmpfs (its places stay) and remove its
// mountpoint from the root.
void end_scratch(Scratch& s) {
  if (s.stage < 0) return;
  ::close(s.stage);
  s.stage = -1;
  if (::umount2(kScratchStage, MNT_DETACH | UMOUNT_NOFOLLOW) != 0) fail(Stage::mount, errno);
  if (::rmdir(kScratchStage) != 0) fail(Stage::mount, errno);
}

// Make the mount at m.dest read-only: directly when it is a mount root,
// else by binding it onto itself first.
void do_seal(int root, const ChildMount& m, int op) {
  int fd = open_in_root(root, m.dest, O_PATH);
  if (fd < 0) {
    if (m.optional && errno == ENOENT) return;
    fail(Stage::seal, errno, op);
  }
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0) {
    ::close(fd);
    return;
  }
  if (errno != EINVAL) fail(Stage::seal, errno, op);
  int tree = ::open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
  if (tree < 0) fail(Stage::seal, errno, op);
  set_attrs(tree, MOUNT_ATTR_RDONLY, 0, Stage::seal, op);
  if (::move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(Stage::seal, errno, op);
  ::close(tree);
  ::close(fd);
}

// The recipe for the filesystem view: an empty tmpfs becomes the root,
// the host's root is kept at /oldroot only while binds are taken from it,
// then detached; / ends read-only.
void build_filesystem(const ChildPlan& p) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(Stage::private_mounts, errno);

  int newroot = new_fs("tmpfs", "size=4m,mode=0755", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (newroot < 0) fail(Stage::root_tmpfs, -newroot);
  // Attach it somewhere so pivot_root accepts it; /tmp is covered only in
  // this private mount namespace, and uncovered again by the pivot.
  int base = ::open("/tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (base < 0) fail(Stage::root_tmpfs, errno);
  if (::move_mount(newroot, "", base, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(Stage::root_tmpfs, errno);
  ::close(base);
  if (::fchdir(newroot) != 0) fail(Stage::pivot_root, errno);
  ::close(newroot);
  if (::mkdir("oldroot", 0700) != 0) fail(Stage::pivot_root, errno);
  if (sys::pivot_root(".", "oldroot") != 0) fail(Stage::pivot_root, errno);
  if (::chdir("/") != 0) fail(Stage::pivot_root, errno);
  int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail(Stage::pivot_root, errno);

  Scratch scratch;
  for (size_t i = 0; i < p.mount_count; ++i) {
    const ChildMount& m = p.mounts[i];
    const int op = static_cast<int>(i);
    switch (m.kind) {
      case MountKind::bind: do_bind(root, m, op); break;
      case MountKind::tmpfs: do_new_fs(root, "tmpfs", m, op); break;
      case MountKind::scratch: do_scratch(root, scratch, p.scratch_fs, m, op); break;
      case MountKind::proc: do_new_fs(root, "proc", m, op); break;
      case MountKind::devpts: do_new_fs(root, "devpts", m, op); break;
      case MountKind::mask: do_mask(root, m, op); break;
      case MountKind::symlink: do_symlink(root, m, op); break;
      case MountKind::seal: do_seal(root, m, op); break;
    }
  }
  end_scratch(scratch);

  if (::umount2("/oldroot", MNT_DETACH) != 0) fail(Stage::detach_old_root, errno);
  if (::rmdir("/oldroot") != 0) fail(Stage::detach_old_root, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(root, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) fail(Stage::root_read_only, errno);
  ::close(root);
}

void bring_up_loopback() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail(Stage::loopback, errno);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) fail(Stage::loopback, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) fail(Stage::loopback, errno);
  ::close(s);
}

// Landlock, from the rules planned in the supervisor. Every path is
// opened inside the finished root without following symlinks.
void apply_landlock(const ChildPlan& p) {
  if (p.landlock_fs == 0) return;
  struct {
    std::uint64_t handled_access_fs;
    std::uint64_t handled_access_net;
    std::uint64_t scoped;
  } attr{p.landlock_fs, 0, p.landlock_scoped};
  // Network rights stay unhandled: the network namespace and the proxy
  // decide where connections go.
  int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U));
  if (ruleset < 0) fail(Stage::landlock, errno);
  int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail(Stage::landlock, errno);
  for (size_t i = 0; i < p.landlock_rule_count; ++i) {
    const ChildLandlockRule& r = p.landlock_rules[i];
    if (r.access == 0) continue;
    int fd = open_in_root(root, r.path, O_PATH);
    if (fd < 0) fail(Stage::landlock, errno);
    struct __attribute__((packed)) {
      std::uint64_t allowed_access;
      std::int32_t parent_fd;
    } beneath{r.access, fd};
    constexpr int kRulePathBeneath = 1;
    if (::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &beneath, 0U) != 0)
      fail(Stage::landlock, errno, static_cast<int>(i));
    ::close(fd);
  }
  ::close(root);
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0U) != 0) fail(Stage::landlock, errno);
  ::close(ruleset);
}

// The command's last steps: its own process group in init's session (the
// foreground group of the jail's PTY, as a shell runs a job), only fds
// 0-2, no privilege of any kind, Landlock, then the syscall filter and
// execve. Exec failures exit 127 (not found) or 126.
//
// Why a group and not a session of its own: a process group whose
// parents are all outside its session is orphaned, and the kernel drops
// SIGTSTP, SIGTTIN and SIGTTOU sent to it (kernel/signal.c), so Ctrl-Z
// and a program's own `kill(0, SIGTSTP)` would do nothing. Init, the
// parent, is in the same session: the stops take effect.
[[noreturn]] void exec_command(const ChildPlan& p, int slave) {
  if (::setpgid(0, 0) != 0) fail(Stage::new_session, errno);
  if (slave >= 0) {
    // Take the foreground before exec, so the first read of the terminal
    // is not a background read (SIGTTIN). tcsetpgrp from a background
    // group raises SIGTTOU unless it is blocked; the mask is cleared below.
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    if (::sigprocmask(SIG_BLOCK, &ttou, nullptr) != 0) fail(Stage::signal_mask, errno);
    pid_t self = ::getpid();
    if (::ioctl(slave, TIOCSPGRP, &self) != 0) fail(Stage::terminal, errno);
    for (int fd = 0; fd < 3; ++fd)
      if ((p.pty_fds & (1U << fd)) && ::dup2(slave, fd) < 0) fail(Stage::terminal, errno);
    if (slave > 2) ::close(slave);
  }
  if (::chdir(p.cwd) != 0) fail(Stage::workdir, errno);
  if (sys::close_range_cloexec(3) != 0) fail(Stage::close_fds, errno);
  rlimit no_core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0) fail(Stage::resource_limits, errno);
  constexpr unsigned kSecbits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::cap_set_secbits(kSecbits) != 0) fail(Stage::securebits, errno);
  for (cap_value_t c = 0; c < 64; ++c)
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) fail(Stage::capabilities, errno);
  if (::cap_reset_ambient() != 0) fail(Stage::capabilities, errno);
  if (::cap_set_proc(p.empty_caps) != 0) fail(Stage::capabilities, errno);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(Stage::no_new_privs, errno);
  apply_landlock(p);
  // Last: from here on the table in seccomp.cc rules every call.
  if (p.command_filter_enforced &&
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &p.command_filter) != 0)
    fail(Stage::seccomp, errno);
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail(Stage::signal_mask, errno);
  ::execve(p.exec_path, p.argv, p.envp);
  int err = errno;
  report(Stage::exec, err, -1);
  ::_exit(err == ENOENT || err == ENOTDIR || err == ELOOP ? 127 : 126);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

// Send `count` fds (at most kFdBatch) in one message tagged `tag`.
void send_fds(int sock, char tag, const int* fds, size_t count, Stage stage) {
  iovec iov{&tag, 1};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kFdBatch)] = {};
  if (count > kFdBatch) fail(stage, E2BIG);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
  cmsghdr* h = CMSG_FIRSTHDR(&msg);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int) * count);
  std::memcpy(CMSG_DATA(h), fds, sizeof(int) * count);
  if (::sendmsg(sock, &msg, MSG_NOSIGNAL) != 1) fail(stage, errno);
}

// The network filter's listening sockets, made here inside the jail's
// network namespace (nothing inside can bind these ports afterwards) and
// handed to the supervisor, which accepts and connects out from the host.
// One listening socket. Where the jail has no IPv6 (the kernel has none:
// EAFNOSUPPORT; lo has no ::1: EADDRNOTAVAIL), nothing inside can bind
// ::1 either: an unbound unix socket stands in for that listener, and the
// supervisor leaves it out (Supervisor::start_proxy).
int open_listener(const ChildListener& l, size_t i) {
  const bool v6 = l.addr.ss_family == AF_INET6;
  int s = ::socket(l.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 && v6 && errno == EAFNOSUPPORT) s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  else if (s >= 0) {
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(s, reinterpret_cast<const sockaddr*>(&l.addr), l.len) != 0) {
      if (!v6 || errno != EADDRNOTAVAIL) fail(Stage::listeners, errno, static_cast<int>(i));
      ::close(s);
      s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    } else if (::listen(s, 128) != 0) {
      fail(Stage::listeners, errno, static_cast<int>(i));
    }
  }
  if (s < 0) fail(Stage::listeners, errno, static_cast<int>(i));
  return s;
}

void open_listeners(const ChildPlan& p) {
  if (p.listener_count == 0) return;
  // SCM_RIGHTS carries at most SCM_MAX_FD (253) fds a message: batches.
  for (size_t first = 0; first < p.listener_count; first += kFdBatch) {
    int fds[kFdBatch];
    size_t n = p.listener_count - first < kFdBatch ? p.listener_count - first : kFdBatch;
    for (size_t i = 0; i < n; ++i) fds[i] = open_listener(p.listeners[first + i], first + i);
    send_fds(p.control_fd, kControlListeners, fds, n, Stage::listeners);
    for (size_t i = 0; i < n; ++i) ::close(fds[i]);
  }
  // Nothing runs before the filter serves them: if it cannot start, the
  // supervisor kills the jail while init waits here.
  char ready = 0;
  ssize_t n;
  do n = ::read(p.control_fd, &ready, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || ready != kControlFilterReady) fail(Stage::filter_ready, n < 0 ? errno : EPROTO);
}

// A PTY in the jail's own devpts: the master goes to the supervisor (which
// keeps the real terminal), the slave to the command. Returns the slave.
int open_terminal(const ChildPlan& p) {
  int master = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) fail(Stage::terminal, errno);
  int unlock = 0;
  if (::ioctl(master, TIOCSPTLCK, &unlock) != 0) fail(Stage::terminal, errno);
  int slave = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) fail(Stage::terminal, errno);
  if (::ioctl(slave, TCSETS, &p.pty_mode) != 0) fail(Stage::terminal, errno);
  if (::ioctl(master, TIOCSWINSZ, &p.pty_size) != 0) fail(Stage::terminal, errno);
  send_fds(p.control_fd, kControlMaster, &master, 1, Stage::terminal);
  ::close(master);
  return slave;
}

// PID 1 of the jail: forward signals to the command, reap everything, and
// when the command exits end the rest (TERM, grace, KILL) and exit with
// the command's status. Signals reach a PID-namespace init only when it
// handles them or has them blocked (kernel/signal.c sig_ignored()): the
// set stays blocked and is taken with sigwaitinfo.
[[noreturn]] void run_init(const ChildPlan& p) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP})
    sigaddset(&set, s);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) fail(Stage::signal_mask, errno);
  if (::setsid() < 0) fail(Stage::new_session, errno);

  // Init leads the session and holds the PTY as its controlling terminal;
  // the command's group is the terminal's foreground (exec_command).
  const int slave = p.pty ? open_terminal(p) : -1;
  if (slave >= 0 && ::ioctl(slave, TIOCSCTTY, 0) != 0) fail(Stage::terminal, errno);
  long child = sys::clone_process(SIGCHLD, nullptr);
  if (child < 0) fail(Stage::fork_command, errno);
  if (child == 0) exec_command(p, slave);
  // Both sides set the group (as shells do): whichever runs first, the
  // group exists before init signals it.
  ::setpgid(static_cast<pid_t>(child), static_cast<pid_t>(child));
  if (slave >= 0) ::close(slave);
  // Init's own filter, allowing only what the loop below calls; loaded
  // while the sync fd is still open, so a failure is reported (init's exit
  // takes the command with it: the PID namespace ends).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(Stage::init_seccomp, errno);
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &p.init_filter) != 0) fail(Stage::init_seccomp, errno);
  ::close(p.sync_fd);

  int code = -1;
  while (code < 0) {
    siginfo_t si;
    int sig = ::sigwaitinfo(&set, &si);
    if (sig < 0) continue;
    if (sig == SIGCONT || sig == SIGTSTP) {
      // Resume, or stop, the command's whole process group, as a terminal
      // does (SIGTSTP reaches pi-jail when its own terminal is not raw).
      ::kill(-static_cast<pid_t>(child), sig);
      ::kill(static_cast<pid_t>(child), sig);  // it may have left its group
      continue;
    }
    if (sig != SIGCHLD) {
      ::kill(static_cast<pid_t>(child), sig);
      continue;
    }
    int status;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
      if (pid != child) continue;
      if (WIFSTOPPED(status)) {
        // The command stopped: tell the supervisor which signal stopped
        // it; on a terminal it gives the terminal back and stops the same way.
        char note[2] = {kControlStopped, static_cast<char>(WSTOPSIG(status))};
        ssize_t n = ::write(p.control_fd, note, sizeof note);
        (void)n;
      } else {
        code = exit_code(status);
      }
    }
  }

  // The command is gone: everything else in the namespace goes too.
  ::kill(-1, SIGTERM);
  ::kill(-1, SIGCONT);
  timespec deadline;
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += p.grace_ms / 1000;
  deadline.tv_nsec += (p.grace_ms % 1000) * 1000000L;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  while (true) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (errno == ECHILD) break;
    timespec now;
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    long left_ns = (deadline.tv_sec - now.tv_sec) * 1000000000L + (deadline.tv_nsec - now.tv_nsec);
    if (left_ns <= 0) {
      ::kill(-1, SIGKILL);
      while (::waitpid(-1, nullptr, 0) > 0) {
      }
      break;
    }
    timespec wait{left_ns / 1000000000L, left_ns % 1000000000L};
    ::sigtimedwait(&chld, nullptr, &wait);
  }
  ::_exit(code);
}

}  // namespace

[[noreturn]] void jail_main(const ChildPlan& p) {
  g_sync_fd = p.sync_fd;
  ::close(p.parent_sync_fd);
  ::close(p.parent_control_fd);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(Stage::die_with_parent, errno);
  // The supervisor may have died before PDEATHSIG was armed: its end of
  // the sync socket is then closed.
  pollfd pf{p.sync_fd, 0, 0};
  if (::poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR))) ::_exit(125);

  map_identity(p);
  build_filesystem(p);
  if (::sethostname(p.hostname, std::strlen(p.hostname)) != 0) fail(Stage::hostname, errno);
  bring_up_loopback();
  open_listeners(p);
  run_init(p);
}

}  // namespace pj::linuxjail
