#include "linuxjail/cgroup.h"
#include "util/numbers.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>

#include <fmt/format.h>

namespace pj::linuxjail::cgroup {

using util::Error;

namespace {

constexpr const char* kDelegateFix =
    "give [limits] cgroup a directory you can write: cgroup v2 with the controller in its cgroup.subtree_control "
    "(systemd: `systemd-run --user --scope -p Delegate=yes ...`), or a cgroup v1 directory of that controller's "
    "hierarchy made for you (mkdir + chown by root)";

// A small kernel file (cgroupfs, procfs) whole.
std::optional<std::string> read_small(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  if (n < 0) return std::nullopt;
  return out;
}

util::Status write_value(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Error::from_errno(fmt::format("open {}", path), errno);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return Error::from_errno(fmt::format("write \"{}\" to {}", value, path), n < 0 ? err : EIO);
  return {};
}

std::optional<std::uint64_t> read_number(const std::string& path) {
  auto text = read_small(path);
  if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '9') return std::nullopt;
  return keyed_value("v " + *text, "v");
}

std::string unescape_mount(std::string_view s) {  // "\040" in /proc/self/mountinfo
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Mount {
  std::string point;
  std::string type;     // "cgroup" or "cgroup2"
  std::string options;  // super options
};

std::vector<Mount> cgroup_mounts() {
  std::vector<Mount> out;
  std::istringstream in(read_small("/proc/self/mountinfo").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash < 5 || dash + 3 > f.size()) continue;
    const std::string& type = f[dash + 1];
    if (type != "cgroup" && type != "cgroup2") continue;
    out.push_back({unescape_mount(f[4]), type, dash + 3 < f.size() ? f[dash + 3] : ""});
  }
  return out;
}

bool within(const std::string& path, const std::string& mount) {
  return path == mount || (path.starts_with(mount) && (mount == "/" || path[mount.size()] == '/'));
}

// Run cgroups an earlier pi-jail left when it was killed (SIGKILL leaves
// no chance to remove them): "pi-jail-PID-N" whose PID is gone. rmdir
// removes only an empty cgroup, so one still in use stays.
void sweep(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (!name.starts_with("pi-jail-")) continue;
    std::string_view rest = name.substr(8);
    size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash > 9 ||
        rest.substr(0, dash).find_first_not_of("0123456789") != std::string_view::npos)
      continue;
    auto pid = util::parse_number<pid_t>(rest.substr(0, dash));
    if (!pid || ::kill(*pid, 0) == 0 || errno != ESRCH) continue;
    ::rmdir((dir + "/" + std::string(name)).c_str());
  }
  ::closedir(d);
}

}  // namespace

Controllers controllers_in(std::string_view words, char sep) {
  Controllers c;
  while (!words.empty()) {
    size_t end = words.find_first_of(std::string{sep, '\n', ' '});
    std::string_view w = words.substr(0, end);
    if (w == "memory") c.memory = true;
    if (w == "cpu") c.cpu = true;
    if (w == "pids") c.pids = true;
    if (end == std::string_view::npos) break;
    words.remove_prefix(end + 1);
  }
  return c;
}

std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ') {
      std::string_view v = line.substr(key.size() + 1);
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
      return util::parse_number<std::uint64_t>(v);
    }
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return std::nullopt;
}

namespace {

// probe() with the host's cgroup mounts read once by the caller.
util::Result<Dir> probe_with(const std::string& path, const std::vector<Mount>& mounts);

}  // namespace

util::Result<Dir> probe(const std::string& path) { return probe_with(path, cgroup_mounts()); }

namespace {

util::Result<Dir> probe_with(const std::string& path, const std::vector<Mount>& mounts) {
  struct statfs sf;
  if (::statfs(path.c_str(), &sf) != 0) return Error::from_errno(fmt::format("[limits] cgroup {}", path), errno);
  Dir d{path, 0, {}};
  if (sf.f_type == CGROUP2_SUPER_MAGIC) {
    d.version = 2;
    auto sub = read_small(path + "/cgroup.subtree_control");
    if (!sub) return Error::from_errno(fmt::format("[limits] cgroup {}: read cgroup.subtree_control", path), errno);
    d.controllers = controllers_in(*sub, ' ');
  } else if (sf.f_type == CGROUP_SUPER_MAGIC) {
    d.version = 1;
    std::string best;
    for (const auto& m : mounts)
      if (m.type == "cgroup" && within(path, m.point) && m.point.size() >= best.size()) {
        best = m.point;
        d.controllers = controllers_in(m.options, ',');
      }
  } else {
    return Error::invalid(fmt::format("[limits] cgroup {}: not a cgroup directory (cgroup v2 or v1)", path));
  }
  if (::access(path.c_str(), W_OK) != 0)
    return Error::from_errno(fmt::format("[limits] cgroup {}: not writable by you", path), errno);
  return d;
}

}  // namespace

std::vector<Dir> own_dirs() {
  std::vector<Dir> out;
  auto self = read_small("/proc/self/cgroup");
  if (!self) return out;
  auto mounts = cgroup_mounts();
  std::istringstream in(*self);
  std::string line;
  while (std::getline(in, line)) {
    // "N:controllers:/path"; v2 is "0::/path"
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string ctl = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    for (const auto& m : mounts) {
      bool v2 = ctl.empty();
      if (v2 != (m.type == "cgroup2")) continue;
      if (!v2) {
        Controllers want = controllers_in(ctl, ','), have = controllers_in(m.options, ',');
        if (want.memory != have.memory || want.cpu != have.cpu || want.pids != have.pids) continue;
        if (!want.memory && !want.cpu && !want.pids) continue;
      }
      std::string path = m.point + (rel == "/" ? "" : rel);
      auto d = probe_with(path, mounts);
      if (d) out.push_back(*d);
      break;
    }
  }
  return out;
}

util::Result<RunCgroups> RunCgroups::create(const std::vector<Dir>& dirs, const Wanted& wanted,
                                            const std::string& name) {
  RunCgroups out;
  struct Need {
    const char* what;
    bool Controllers::*member;
    bool wanted;
  };
  const Need needs[] = {{"memory", &Controllers::memory, wanted.memory_bytes.has_value()},
                        {"cpu", &Controllers::cpu, wanted.millicpus.has_value()},
                        {"pids", &Controllers::pids, wanted.pids.has_value()}};
  // A process is in one cgroup v2 directory only: a v2 directory with
  // every wanted controller serves them all; else each controller gets
  // the first directory that has it.
  const Dir* whole = nullptr;
  for (const auto& d : dirs) {
    if (d.version == 2 && std::all_of(std::begin(needs), std::end(needs),
                                      [&](const Need& n) { return !n.wanted || d.controllers.*n.member; })) {
      whole = &d;
      break;
    }
  }
  auto pick = [&](auto member) -> const Dir* {
    if (whole) return whole;
    for (const auto& d : dirs)
      if (d.controllers.*member) return &d;
    return nullptr;
  };
  // Two v2 directories: moving the jail into the second would take it out
  // of the first, and that limit with it.
  const Need* v2_need = nullptr;
  const Dir* v2 = nullptr;
  for (const auto& n : needs) {
    const Dir* d = n.wanted ? pick(n.member) : nullptr;
    if (!d || d->version != 2) continue;
    if (v2 && v2->path != d->path)
      return Error::invalid(fmt::format(
          "the {} controller is in {} and the {} controller in {}, both cgroup v2: a process can be in only one "
          "cgroup v2 directory, so one limit would not hold; fix: give [limits] cgroup one cgroup v2 directory "
          "with every controller the limits need in its cgroup.subtree_control",
          v2_need->what, v2->path, n.what, d->path));
    v2 = d;
    v2_need = &n;
  }
  for (const auto& n : needs) {
    if (!n.wanted) continue;
    const Dir* d = pick(n.member);
    if (!d)
      return Error::invalid(
          fmt::format("no cgroup with the {} controller is delegated to pi-jail ({}); fix: {}", n.what,
                      dirs.empty() ? "[limits] cgroup is not set" : "none of [limits] cgroup has it", kDelegateFix));
    auto it =
        std::find_if(out.made_.begin(), out.made_.end(), [&](const Made& m) { return m.path == d->path + "/" + name; });
    if (it == out.made_.end()) {
      sweep(d->path);
      out.made_.push_back({d->path + "/" + name, d->version, {}, {}});
      it = out.made_.end() - 1;
      if (::mkdir(it->path.c_str(), 0755) != 0) {
        int err = errno;
        out.made_.pop_back();
        return Error::from_errno(fmt::format("make the run's cgroup {}/{}", d->path, name), err);
      }
    }
    it->used.*n.member = true;
  }
  for (auto& m : out.made_) {
    auto put = [&](const char* file, const std::string& v) { return write_value(m.path + "/" + file, v); };
    util::Status st;
    if (m.used.memory) {
      const std::string bytes = std::to_string(*wanted.memory_bytes);
      if (m.version == 2) {
        st = put("memory.max", bytes);
        if (st && ::access((m.path + "/memory.swap.max").c_str(), F_OK) == 0) st = put("memory.swap.max", "0");
      } else {
        st = put("memory.limit_in_bytes", bytes);
        // Swap counts too where the kernel accounts it (memsw >= limit).
        if (st && ::access((m.path + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0)
          st = put("memory.memsw.limit_in_bytes", bytes);
      }
    }
    if (st && m.used.cpu) {
      const std::uint64_t period = 100000, quota = *wanted.millicpus * period / 1000;
      if (m.version == 2)
        st = put("cpu.max", fmt::format("{} {}", quota, period));
      else {
        st = put("cpu.cfs_period_us", std::to_string(period));
        if (st) st = put("cpu.cfs_quota_us", std::to_string(quota));
      }
    }
    if (st && m.used.pids) st = put("pids.max", std::to_string(*wanted.pids));
    if (!st) return std::move(st.take_error()).context("set the run's cgroup limits");
    const char* join = m.version == 1 ? "tasks" : "cgroup.procs";
    m.join = util::UniqueFd(::open((m.path + "/" + join).c_str(), O_WRONLY | O_CLOEXEC));
    if (!m.join.valid()) return Error::from_errno(fmt::format("open {}/{}", m.path, join), errno);
  }
  return out;
}

RunCgroups::~RunCgroups() {
  // The jail is gone when this runs; its last tasks may still be leaving
  // the cgroup (EBUSY) for a moment.
  for (auto& m : made_) {
    m.join.reset();
    for (int i = 0; i < 200 && ::rmdir(m.path.c_str()) != 0 && errno == EBUSY; ++i) {
      timespec ts{0, 10 * 1000 * 1000};
      ::nanosleep(&ts, nullptr);
    }
  }
}

JoinFiles RunCgroups::join_files() const {
  JoinFiles out;
  for (const auto& m : made_) (m.version == 1 ? out.tasks : out.procs).push_back(m.join.get());
  return out;
}

std::string RunCgroups::enforcer(std::string_view what) const {
  for (const auto& m : made_)
    if ((what == "memory" && m.used.memory) || (what == "cpu" && m.used.cpu) || (what == "pids" && m.used.pids))
      return fmt::format("cgroup v{} {}", m.version, m.path);
  return "";
}

std::vector<std::string> RunCgroups::describe() const {
  std::vector<std::string> out;
  for (const auto& m : made_) {
    std::vector<std::string> c;
    if (m.used.memory) c.push_back("memory");
    if (m.used.cpu) c.push_back("cpu");
    if (m.used.pids) c.push_back("pids");
    out.push_back(fmt::format("{}: cgroup v{} {}", fmt::join(c, ", "), m.version, m.path));
  }
  return out;
}

Usage RunCgroups::usage() const {
  Usage u;
  for (const auto& m : made_) {
    const std::string p = m.path + "/";
    if (m.used.memory) {
      if (m.version == 2) {
        u.memory_peak = read_number(p + "memory.peak");
        if (auto ev = read_small(p + "memory.events")) u.oom_kills = keyed_value(*ev, "oom_kill");
      } else {
        u.memory_peak = read_number(p + "memory.max_usage_in_bytes");
        if (auto oc = read_small(p + "memory.oom_control")) u.oom_kills = keyed_value(*oc, "oom_kill");
      }
    }
    if (m.version == 2) {
      if (auto st = read_small(p + "cpu.stat"); st && !u.cpu_usec) u.cpu_usec = keyed_value(*st, "usage_usec");
    } else if (auto ns = read_number(p + "cpuacct.usage"); ns && !u.cpu_usec) {
      u.cpu_usec = *ns / 1000;  // cpu,cpuacct mounted together
    }
    if (m.used.pids && !u.pids_peak) u.pids_peak = read_number(p + "pids.peak");
  }
  return u;
}

}  // namespace pj::linuxjail::cgroup
