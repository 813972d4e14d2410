// The jail's filesystem view: a new root of fresh mounts, binds and
// masks, built with the new mount API. Runs in the cloned child: the rules
// of child_stages.h hold (no allocation, only system calls).
#include "linuxjail/child_stages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
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

// One directory of the new root, kept open while consecutive mounts are
// made in it (the /etc files, the /dev nodes, the workspace's protected
// paths): each then costs one lookup of its own name instead of a walk
// from the root. The fd proves nothing about the path later: attach()
// still checks from the root where every mount ended up. Dropped when a
// mount lands at the directory or above it, which would hide it.
struct ParentDir {
  char path[PATH_MAX];
  size_t len = 0;  // 0: nothing kept
  int fd = -1;

  void drop() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    len = 0;
  }
  // A mount now covers `dest`: forget the directory if it is at or below it.
  void covered(const char* dest) {
    if (len == 0) return;
    const size_t dlen = std::strlen(dest);
    const bool root = dlen == 1 && dest[0] == '/';
    if (root || (dlen <= len && std::memcmp(path, dest, dlen) == 0 && (path[dlen] == '/' || path[dlen] == '\0')))
      drop();
  }
};

// Walk `path` (`len` bytes of it) from `root` one component at a time,
// creating missing directories, never following a symlink. Returns an
// O_PATH fd of the directory, or -errno.
int walk_dirs(int root, const char* path, size_t len) {
  int cur = ::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return -errno;
  const char* p = path;
  const char* end = path + len;
  char name[NAME_MAX + 1];
  while (true) {
    while (p < end && *p == '/') ++p;
    if (p == end) break;
    size_t n = 0;
    while (p + n < end && p[n] != '/') ++n;
    if (n > NAME_MAX) {
      ::close(cur);
      return -ENAMETOOLONG;
    }
    std::memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    int fd = sys::openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_BENEATH | kResolveSafe);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(cur, name, 0755) != 0 && errno != EEXIST) {
        int err = errno;
        ::close(cur);
        return -err;
      }
      fd = sys::openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_BENEATH | kResolveSafe);
    }
    int err = errno;
    ::close(cur);
    if (fd < 0) return -err;
    cur = fd;
  }
  return cur;
}

// The last component of `dir`/`name`, made when missing: a directory, or
// an empty file when `node` is a file; never a symlink followed. The
// creation is tried first (in the new root almost nothing exists yet);
// when it fails the name is looked up, and an existing object is used if
// it is of the right kind, exactly as a lookup-then-create would decide:
// ENOENT from the lookup reports the creation's error. Returns an fd to
// attach onto, or -errno.
int make_last(int dir, const char* name, Node node) {
  constexpr std::uint64_t kPath = O_PATH | O_CLOEXEC;
  int made_err;
  if (node == Node::directory) {
    made_err = ::mkdirat(dir, name, 0755) == 0 ? 0 : errno;
  } else {
    // O_EXCL: a new regular file of ours, so no fstat is needed. The fd
    // only serves as the target of move_mount and is closed after it.
    int f = ::openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (f >= 0) return f;
    made_err = errno;
  }
  // O_DIRECTORY proves a directory without an fstat (ENOTDIR otherwise).
  const std::uint64_t flags = node == Node::directory ? kPath | O_DIRECTORY : kPath;
  int fd = sys::openat2(dir, name, flags, RESOLVE_BENEATH | kResolveSafe);
  if (fd < 0) {
    int err = errno;
    return -(err == ENOENT && made_err != 0 && made_err != EEXIST ? made_err : err);
  }
  if (node == Node::directory) return fd;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return -EISDIR;
  }
  return fd;
}

// Split `path` into its parent (kept open in `parent` across calls) and
// its last name, copied to `last`. Returns the parent's fd (owned by
// `parent`) or -errno.
int open_parent(int root, ParentDir& parent, const char* path, char (&last)[NAME_MAX + 1]) {
  size_t len = std::strlen(path);
  while (len > 1 && path[len - 1] == '/') --len;
  size_t slash = len;
  while (slash > 0 && path[slash - 1] != '/') --slash;
  if (slash == len) return -EINVAL;  // "/" or "": no last name
  if (len - slash > NAME_MAX) return -ENAMETOOLONG;
  std::memcpy(last, path + slash, len - slash);
  last[len - slash] = '\0';
  size_t plen = slash;
  while (plen > 1 && path[plen - 1] == '/') --plen;
  if (plen >= sizeof parent.path) return -ENAMETOOLONG;
  if (parent.len != 0 && parent.len == plen && std::memcmp(parent.path, path, plen) == 0) return parent.fd;
  int fd = walk_dirs(root, path, plen);
  if (fd < 0) return fd;
  parent.drop();
  std::memcpy(parent.path, path, plen);
  parent.path[plen] = '\0';
  parent.len = plen;
  parent.fd = fd;
  return fd;
}

// The mountpoint for `path` (absolute, in the new root): every missing
// component made, no symlink followed. Returns an fd of the destination,
// or -errno.
int make_mountpoint(int root, ParentDir& parent, const char* path, Node node) {
  char last[NAME_MAX + 1];
  int dir = open_parent(root, parent, path, last);
  if (dir < 0) return dir;
  return make_last(dir, last, node);
}

// What every step of build_filesystem() uses.
struct Builder {
  const ChildPlan& p;
  int root;     // O_PATH fd of the new root
  int ruleset;  // the command's Landlock ruleset, or -1
  ParentDir parent;
  int dir_mask = -1;    // O_PATH fd of the first directory mask, which the others clone
  int file_masks = -1;  // the staged tmpfs the file masks' files are made in (kMaskStage)
  unsigned file_mask_count = 0;
};

// The file masks' own tmpfs, attached here while they are made: cloned
// from where it is attached, as the scratch is (kScratchStage below).
constexpr const char* kMaskStage = "/.pi-jail-masks";

// Attach detached mount `tree`, whose root is the inode `want`, at
// `dest` and check that the object now found at `dest` is that inode.
void attach(Builder& b, int tree, const struct stat& want, const ChildMount& m, int op) {
  int dest = make_mountpoint(b.root, b.parent, m.dest, m.node);
  if (dest < 0) fail(Stage::mountpoint, -dest, op);
  if (::move_mount(tree, "", dest, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    fail(Stage::mount, errno, op);
  ::close(dest);
  b.parent.covered(m.dest);
  struct stat got;
  int now = open_in_root(b.root, m.dest, O_PATH);
  if (now < 0) fail(Stage::mount_verify, errno, op);
  if (::fstat(now, &got) != 0) fail(Stage::mount_verify, errno, op);
  if (want.st_dev != got.st_dev || want.st_ino != got.st_ino) fail(Stage::mount_verify, EXDEV, op);
  // The verified fd is the object the finished view shows at m.dest (the
  // plan gives a rule to a mount only then: launch.cc).
  if (b.ruleset >= 0 && m.landlock_rule >= 0) landlock_allow(b.p, b.ruleset, now, static_cast<size_t>(m.landlock_rule));
  ::close(now);
  ::close(tree);
}

// attach() for a tree whose root has not been looked at yet.
void attach_new(Builder& b, int tree, const ChildMount& m, int op) {
  struct stat want;
  if (::fstat(tree, &want) != 0) fail(Stage::mount_verify, errno, op);
  attach(b, tree, want, m, op);
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

void do_bind(Builder& b, const ChildMount& m, int op) {
  int tree = ::open_tree(AT_FDCWD, m.source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
  if (tree < 0) fail(Stage::mount_source, errno, op);
  struct stat st;
  if (::fstat(tree, &st) != 0) fail(Stage::mount_source, errno, op);
  if (st.st_dev != m.dev || st.st_ino != m.ino) fail(Stage::source_changed, ESTALE, op);
  // Only ever *set* flags: flags the kernel locked on the source (ro,
  // nosuid, nodev, noexec from a more privileged namespace) stay.
  set_attrs(tree, m.attrs, AT_RECURSIVE, Stage::mount, op);
  attach(b, tree, st, m, op);  // mount_setattr keeps the root inode
}

void do_new_fs(Builder& b, const char* fstype, const ChildMount& m, int op) {
  int tree = new_fs(fstype, m.options, m.attrs);
  if (tree < 0) fail(Stage::mount, -tree, op);
  attach_new(b, tree, m, op);
}

void do_mask(Builder& b, const ChildMount& m, int op) {
  const unsigned ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  if (m.node == Node::directory) {
    // One empty read-only tmpfs for every directory mask: the first is
    // made, the others are clones of its mount (fewer superblocks to make,
    // and to tear down when the jail ends). Cloned from where it is
    // attached: open_tree(OPEN_TREE_CLONE) of a detached mount needs Linux
    // 6.15.
    int tree = b.dir_mask < 0 ? new_fs("tmpfs", "size=4k,mode=0555", ro)
                              : ::open_tree(b.dir_mask, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0) fail(Stage::mount, b.dir_mask < 0 ? -tree : errno, op);
    if (b.dir_mask >= 0) set_attrs(tree, ro, 0, Stage::mount, op);
    attach_new(b, tree, m, op);
    if (b.dir_mask < 0) {
      b.dir_mask = open_in_root(b.root, m.dest, O_PATH | O_DIRECTORY);
      if (b.dir_mask < 0) fail(Stage::mount, errno, op);
    }
    return;
  }
  // A regular file (empty, or a placeholder's content): made on the file
  // masks' one private tmpfs, then bound alone.
  if (b.file_masks < 0) {
    int tree = new_fs("tmpfs", "size=64k,mode=0700", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (tree < 0) fail(Stage::mount, -tree, op);
    const ChildMount staged{MountKind::tmpfs, kMaskStage, "", "", 0, Node::directory, false, 0, 0};
    attach_new(b, tree, staged, op);
    b.file_masks = open_in_root(b.root, kMaskStage, O_RDONLY | O_DIRECTORY);
    if (b.file_masks < 0) fail(Stage::mount, errno, op);
  }
  // "m0", "m1", ...: nothing else reaches this tmpfs, so the names are ours.
  char name[16] = "m";
  char digits[12];
  size_t nd = 0;
  for (unsigned n = b.file_mask_count++; nd == 0 || n > 0; n /= 10) digits[nd++] = static_cast<char>('0' + n % 10);
  for (size_t i = 0; i < nd; ++i) name[1 + i] = digits[nd - 1 - i];
  name[1 + nd] = '\0';
  int f = ::openat(b.file_masks, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  if (f < 0) fail(Stage::mount, errno, op);
  const size_t len = std::strlen(m.options);  // the placeholder's content ("{}" for JSON)
  if (len > 0 && ::write(f, m.options, len) != static_cast<ssize_t>(len)) fail(Stage::mount, errno, op);
  ::close(f);
  int tree = ::open_tree(b.file_masks, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) fail(Stage::mount, errno, op);
  set_attrs(tree, ro, 0, Stage::mount, op);
  attach_new(b, tree, m, op);
}

// Detach the file masks' staged tmpfs (the masks stay) and remove its
// mountpoint from the root.
void end_file_masks(Builder& b) {
  if (b.file_masks < 0) return;
  ::close(b.file_masks);
  b.file_masks = -1;
  if (::umount2(kMaskStage, MNT_DETACH | UMOUNT_NOFOLLOW) != 0) fail(Stage::mount, errno);
  if (::rmdir(kMaskStage) != 0) fail(Stage::mount, errno);
}

// The link is made in its parent directory (made when missing, reached
// without following a symlink); the next links in the same directory
// reuse it (/bin, /lib, ... in the root; /dev/fd, /dev/stdin, ...).
void do_symlink(Builder& b, const ChildMount& m, int op) {
  const size_t len = std::strlen(m.dest);
  if (len == 0 || m.dest[0] != '/' || m.dest[len - 1] == '/') fail(Stage::mountpoint, EINVAL, op);
  char name[NAME_MAX + 1];
  int dir = open_parent(b.root, b.parent, m.dest, name);
  if (dir < 0) fail(Stage::mountpoint, -dir, op);
  if (::symlinkat(m.source, dir, name) != 0) fail(Stage::mountpoint, errno, op);
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

void do_scratch(Builder& b, Scratch& s, const char* fs_options, const ChildMount& m, int op) {
  if (s.stage < 0) {
    int tree = new_fs("tmpfs", fs_options, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (tree < 0) fail(Stage::mount, -tree, op);
    const ChildMount staged{MountKind::tmpfs, kScratchStage, "", fs_options, 0, Node::directory, false, 0, 0};
    attach_new(b, tree, staged, op);
    s.stage = open_in_root(b.root, kScratchStage, O_PATH | O_DIRECTORY);
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
  attach_new(b, tree, m, op);
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
void do_seal(Builder& b, const ChildMount& m, int op) {
  int fd = open_in_root(b.root, m.dest, O_PATH);
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
  b.parent.covered(m.dest);
  ::close(tree);
  ::close(fd);
}

}  // namespace

// The recipe for the filesystem view: an empty tmpfs becomes the root,
// the host's root is kept at /oldroot only while binds are taken from it,
// then detached; / ends read-only.
void build_filesystem(const ChildPlan& p, int ruleset) {
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
  Builder b{p, root, ruleset, {}};
  for (size_t i = 0; i < p.mount_count; ++i) {
    const ChildMount& m = p.mounts[i];
    const int op = static_cast<int>(i);
    switch (m.kind) {
      case MountKind::bind: do_bind(b, m, op); break;
      case MountKind::tmpfs: do_new_fs(b, "tmpfs", m, op); break;
      case MountKind::scratch: do_scratch(b, scratch, p.scratch_fs, m, op); break;
      case MountKind::proc: do_new_fs(b, "proc", m, op); break;
      case MountKind::devpts: do_new_fs(b, "devpts", m, op); break;
      case MountKind::mask: do_mask(b, m, op); break;
      case MountKind::symlink: do_symlink(b, m, op); break;
      case MountKind::seal: do_seal(b, m, op); break;
    }
  }
  b.parent.drop();
  if (b.dir_mask >= 0) ::close(b.dir_mask);
  end_file_masks(b);
  end_scratch(p, scratch);

  if (::umount2("/oldroot", MNT_DETACH) != 0) fail(Stage::detach_old_root, errno);
  if (::rmdir("/oldroot") != 0) fail(Stage::detach_old_root, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(root, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) fail(Stage::root_read_only, errno);
  landlock_allow_rest(p, ruleset, root);
  ::close(root);
}

}  // namespace pj::linuxjail::in_child
