#include "linuxjail/launch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "linuxjail/child.h"
#include "linuxjail/sys.h"
#include "util/fd_passing.h"
#include "util/numbers.h"
#include "util/paths.h"

namespace pj::linuxjail {

using util::Error;
using util::UniqueFd;

namespace {

constexpr int kGraceMs = 1000;

unsigned attrs_for(const MountOp& op) {
  unsigned a = MOUNT_ATTR_NOSUID;
  if (op.devices == Devices::denied) a |= MOUNT_ATTR_NODEV;
  if (op.access == Access::read_only) a |= MOUNT_ATTR_RDONLY;
  if (op.kind == MountKind::proc || op.kind == MountKind::devpts) a |= MOUNT_ATTR_NOEXEC;
  if (op.kind == MountKind::devpts) a &= ~static_cast<unsigned>(MOUNT_ATTR_NODEV);
  return a;
}

util::Status require_single_thread() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return Error::from_errno("count threads (/proc/self/task)", errno);
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  if (n != 1)
    return Error::invalid(
        fmt::format("pi-jail has {} threads; the jail must be cloned from a "
                    "single-threaded process (this is a bug in pi-jail)",
                    n));
  return {};
}

// Where this process's argument and environment strings lie: fields 48-51
// of /proc/self/stat (proc(5)), counted after the ")" that ends the name.
util::Result<OwnAreas> own_areas() {
  auto bad = [] { return Error::invalid("read where pi-jail's arguments lie (/proc/self/stat): unexpected format"); };
  FILE* f = std::fopen("/proc/self/stat", "re");
  if (!f) return Error::from_errno("read where pi-jail's arguments lie (/proc/self/stat)", errno);
  char buf[2048];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p) return bad();
  unsigned long long v[4] = {};
  // After ")": field 3 is the first; 48 is the 46th from there.
  for (int field = 3; field <= 51 && p; ++field) {
    p = std::strchr(p + 1, ' ');
    if (p && field >= 48) {
      std::string_view text(p + 1);
      auto number = util::parse_number<unsigned long long>(text.substr(0, text.find_first_of(" \n")));
      if (!number) return bad();
      v[field - 48] = *number;
    }
  }
  if (!p || v[0] == 0 || v[1] < v[0] || v[2] == 0 || v[3] < v[2]) return bad();
  return OwnAreas{reinterpret_cast<char*>(v[0]), static_cast<size_t>(v[1] - v[0]), reinterpret_cast<char*>(v[2]),
                  static_cast<size_t>(v[3] - v[2])};
}

}  // namespace

ChildPlanStorage::ChildPlanStorage(const JailSpec& spec, BpfProgram command_filter, BpfProgram init_filter, Fds fds,
                                   const cgroup::JoinFiles& cgroups)
    : command_filter_(std::move(command_filter)),
      init_filter_(std::move(init_filter)),
      cgroup_tasks_fds_(cgroups.tasks),
      cgroup_procs_fds_(cgroups.procs) {
  // The child's flat record: `source` and `options` mean what the kind says
  // (child.h); the plan's typed fields are read here, once.
  static const std::string kNone;
  auto source_of = [](const MountOp& op) -> std::string {
    switch (op.kind) {
      case MountKind::bind: return "/oldroot" + op.bind_source;
      case MountKind::symlink: return op.link_target;
      case MountKind::scratch: return op.scratch_dir;
      default: return {};
    }
  };
  auto options_of = [](const MountOp& op) -> const std::string& {
    switch (op.kind) {
      case MountKind::tmpfs:
      case MountKind::devpts: return op.fs_options;
      case MountKind::scratch: return op.scratch_mode;
      case MountKind::mask: return op.mask_content;
      default: return kNone;
    }
  };
  sources_.reserve(spec.mounts.size());
  for (const auto& op : spec.mounts) sources_.push_back(source_of(op));
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const MountOp& op = spec.mounts[i];
    mounts_.push_back(ChildMount{op.kind, op.dest.c_str(), sources_[i].c_str(), options_of(op).c_str(), attrs_for(op),
                                 op.node, op.optional, op.dev, op.ino});
  }
  for (const auto& a : spec.argv) argv_.push_back(const_cast<char*>(a.c_str()));
  argv_.push_back(nullptr);
  for (const auto& e : spec.env) envp_.push_back(const_cast<char*>(e.c_str()));
  envp_.push_back(nullptr);
  uid_map_ = fmt::format("{0} {0} 1\n", spec.uid);
  gid_map_ = fmt::format("{0} {0} 1\n", spec.gid);
  // A rule whose path is a mount's destination is added by init from the
  // fd that verified that mount, when no later operation puts another
  // object at the path (a seal keeps the inode; a mount at the path or
  // above it would not): the object the finished view shows there, which
  // is what opening the path at the end would give.
  for (size_t j = 0; j < spec.landlock.rules.size(); ++j) {
    const LandlockRule& r = spec.landlock.rules[j];
    int last = -1;
    for (size_t i = 0; i < spec.mounts.size(); ++i)
      if (spec.mounts[i].kind != MountKind::seal && spec.mounts[i].dest == r.path) last = static_cast<int>(i);
    bool at_mount = last >= 0 && spec.mounts[static_cast<size_t>(last)].kind != MountKind::symlink &&
                    mounts_[static_cast<size_t>(last)].landlock_rule < 0;
    for (size_t i = static_cast<size_t>(last) + 1; at_mount && i < spec.mounts.size(); ++i)
      if (spec.mounts[i].kind != MountKind::seal && util::path_within(r.path, spec.mounts[i].dest)) at_mount = false;
    if (at_mount) mounts_[static_cast<size_t>(last)].landlock_rule = static_cast<int>(j);
    landlock_.push_back(ChildLandlockRule{r.path.c_str(), r.access & spec.landlock.handled_fs, at_mount, last});
  }
  for (const auto& l : spec.listeners) {
    ChildListener cl{};
    if (l.address == runtime::Loopback::v6) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&cl.addr);
      s6->sin6_family = AF_INET6;
      s6->sin6_addr = in6addr_loopback;
      s6->sin6_port = htons(static_cast<uint16_t>(l.port));
      cl.len = sizeof *s6;
    } else {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&cl.addr);
      s4->sin_family = AF_INET;
      s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      s4->sin_port = htons(static_cast<uint16_t>(l.port));
      cl.len = sizeof *s4;
    }
    listeners_.push_back(cl);
  }
  cap_max_bits();  // libcap reads the kernel's cap count lazily: do it here
  plan_ = ChildPlan{mounts_.data(),
                    mounts_.size(),
                    spec.scratch_fs.c_str(),
                    spec.exec_path.c_str(),
                    argv_.data(),
                    envp_.data(),
                    spec.cwd.c_str(),
                    spec.hostname.c_str(),
                    uid_map_.c_str(),
                    gid_map_.c_str(),
                    cap_init(),
                    fds.sync,
                    fds.parent_sync,
                    fds.control,
                    fds.parent_control,
                    spec.terminal.streams == Streams::pty,
                    spec.terminal.pty_fds,
                    spec.terminal.mode,
                    spec.terminal.size,
                    kGraceMs,
                    sock_fprog{static_cast<unsigned short>(command_filter_.size()), command_filter_.data()},
                    spec.seccomp.use == FilterUse::enforced,
                    sock_fprog{static_cast<unsigned short>(init_filter_.size()), init_filter_.data()},
                    spec.landlock.handled_fs,
                    spec.landlock.scoped,
                    landlock_.data(),
                    landlock_.size(),
                    listeners_.data(),
                    listeners_.size(),
                    spec.nproc,
                    cgroup_tasks_fds_.data(),
                    cgroup_tasks_fds_.size(),
                    cgroup_procs_fds_.data(),
                    cgroup_procs_fds_.size(),
                    OwnAreas{}};
}

ChildPlanStorage::~ChildPlanStorage() { cap_free(plan_.empty_caps); }

util::Result<Jail> Jail::launch(const JailSpec& spec, const cgroup::JoinFiles& cgroups) {
  if (auto st = require_single_thread(); !st) return st.take_error();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Error::from_errno("create the sync socket", errno);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  auto command_filter = command_filter_program(spec.seccomp);
  if (!command_filter) return std::move(command_filter.take_error()).context("prepare the syscall filter");
  auto init_filter = init_filter_program();
  if (!init_filter) return std::move(init_filter.take_error()).context("prepare the init's syscall filter");
  int cv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cv) != 0)
    return Error::from_errno("create the control socket", errno);
  UniqueFd control_ours(cv[0]), control_theirs(cv[1]);
  ChildPlanStorage storage(spec, std::move(*command_filter), std::move(*init_filter),
                           {theirs.get(), ours.get(), control_theirs.get(), control_ours.get()}, cgroups);
  if (!storage.plan().empty_caps) return Error::from_errno("allocate an empty capability set", errno);
  auto own = own_areas();
  if (!own) return own.take_error();
  storage.set_own_areas(*own);

  constexpr unsigned long kNamespaces =
      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  int pidfd = -1;
  long pid = sys::clone_process(kNamespaces | CLONE_PIDFD | SIGCHLD, &pidfd);
  if (pid < 0) return Error::from_errno("create the jail's namespaces (clone)", errno);
  if (pid == 0) jail_main(storage.plan());
  Jail jail(static_cast<pid_t>(pid), UniqueFd(pidfd), std::move(ours), std::move(control_ours));
  // The pid names init: it is not reaped before the Jail is.
  const ChildPlan& plan = storage.plan();
  std::span<const int> v2_procs{plan.cgroup_procs_fds, plan.cgroup_procs_count};
  if (auto st = move_into_cgroups(jail.pid(), jail.control_fd(), v2_procs); !st) return st.take_error();
  return jail;
}

util::Status move_into_cgroups(pid_t pid, int control_fd, std::span<const int> cgroup_procs) {
  if (cgroup_procs.empty()) return {};
  const std::string text = std::to_string(pid);
  int err = 0;
  for (size_t i = 0; i < cgroup_procs.size() && err == 0; ++i) {
    ssize_t n;
    do n = ::write(cgroup_procs[i], text.data(), text.size());
    while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(text.size())) err = n < 0 ? errno : EIO;
  }
  // A refusal goes to init, which reports it as Stage::join_cgroup (and an
  // init that already failed has sent its own record): launch() still
  // holds init's end of the socket, so this lands in its buffer.
  char msg[kControlCgroupsSize] = {kControlCgroups};
  std::memcpy(msg + 1, &err, sizeof err);
  if (::send(control_fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg))
    return Error::from_errno("tell the jail it was moved into the run's cgroups", errno);
  return {};
}

Jail::Jail(Jail&& other) noexcept
    : pid_(other.pid_),
      pidfd_(std::move(other.pidfd_)),
      sync_(std::move(other.sync_)),
      control_(std::move(other.control_)),
      reaped_(other.reaped_) {
  other.reaped_ = true;
}

Jail::~Jail() {
  if (reaped_ || !pidfd_.valid()) return;
  sys::pidfd_send_signal(pidfd_.get(), SIGKILL);
  siginfo_t si{};
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, WEXITED);
}

util::Result<std::optional<SyncRecord>> Jail::read_sync() {
  SyncRecord rec{};
  ssize_t n = ::recv(sync_.get(), &rec, sizeof rec, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN) return std::optional<SyncRecord>{};
    return Error::from_errno("read the sync socket", errno);
  }
  if (n == 0) {
    sync_.reset();
    return std::optional<SyncRecord>{};
  }
  if (n != sizeof rec || rec.magic != kSyncMagic)
    return Error::invalid("the jail sent a malformed setup record (this is a bug in pi-jail)");
  return std::optional<SyncRecord>{rec};
}

util::Status Jail::filter_ready() {
  char ready = kControlFilterReady;
  if (::send(control_.get(), &ready, 1, MSG_NOSIGNAL) != 1)
    return Error::from_errno("tell the jail that the network filter is ready", errno);
  return {};
}

util::Result<std::optional<Jail::Control>> Jail::read_control() {
  char bytes[2] = {};
  int fds[util::kMaxPassedFds];
  size_t count = 0;
  ssize_t n = util::receive_fds(control_.get(), bytes, sizeof bytes, fds, &count, MSG_DONTWAIT);
  if (n == -EAGAIN) return std::optional<Control>{};
  if (n == -EMSGSIZE) return Error::invalid("the jail sent more descriptors than expected");
  // ECONNRESET: init is gone with a message of ours unread (it failed
  // before it read the v2 move's word or filter_ready()): the end, as
  // EOF is; its sync record says what failed.
  if (n < 0 && n != -ECONNRESET) return Error::from_errno("read the control socket", static_cast<int>(-n));
  if (n <= 0) {
    control_.reset();
    return std::optional<Control>{};
  }
  Control c;
  c.tag = bytes[0];
  if (c.tag == kControlStopped) {
    // The signal that stopped the command (init is pi-jail's code and the
    // command cannot write to this socket); anything but a stop signal
    // counts as SIGSTOP.
    int sig = n == 2 ? static_cast<unsigned char>(bytes[1]) : 0;
    c.stop_signal = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU ? sig : SIGSTOP;
  }
  c.ended = c.tag == kControlEnded;
  for (size_t i = 0; i < count; ++i) c.fds.emplace_back(fds[i]);
  return std::optional<Control>{std::move(c)};
}

util::Status Jail::signal(int sig) {
  if (reaped_) return {};
  if (sys::pidfd_send_signal(pidfd_.get(), sig) != 0 && errno != ESRCH)
    return Error::from_errno(fmt::format("send signal {} to the jail", sig), errno);
  return {};
}

util::Result<int> Jail::reap() {
  siginfo_t si{};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, WEXITED) != 0)
    return Error::from_errno("wait for the jail", errno);
  reaped_ = true;
  if (si.si_code == CLD_EXITED) return si.si_status;
  return 128 + si.si_status;
}

}  // namespace pj::linuxjail
