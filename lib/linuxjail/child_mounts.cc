// The jail's filesystem view: a new root of fresh mounts, binds and
// masks, built with the new mount API. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "linuxjail/sys.h"

namespace pj::linuxjail::in_child {

namespace {

constexpr unsigned kResolveSafe = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

}  // namespace

// Open `path` (absolute, inside the new root) with no symlink anywhere.
int open_in_root(int root, const char* path, int flags) {
  return sys::openat2(root, path, static_cast<unsigned>(flags) | O_CLOEXEC, RESOLVE_IN_ROOT | kResolveSafe);
}

namespace {

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
void end_scratch(const ChildPlan& p, Scratch& s) {
  if (s.stage < 0) return;
  send_fds(p.control_fd, kControlScratch, &s.stage, 1, Stage::mount);
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

}  // namespace

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
  end_scratch(p, scratch);

  if (::umount2("/oldroot", MNT_DETACH) != 0) fail(Stage::detach_old_root, errno);
  if (::rmdir("/oldroot") != 0) fail(Stage::detach_old_root, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(root, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) fail(Stage::root_read_only, errno);
  ::close(root);
}

}  // namespace pj::linuxjail::in_child
