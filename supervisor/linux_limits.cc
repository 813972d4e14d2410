#include "linux_limits.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <tuple>

#include <fmt/format.h>

#include "policy/layer.h"
#include "util/log.h"

namespace pj::supervisor {

using util::Error;
namespace cg = linuxjail::cgroup;

util::Result<JailLimits> prepare_limits(const runtime::Request& r) {
  struct sysinfo si;
  const std::uint64_t ram = ::sysinfo(&si) == 0 ? static_cast<std::uint64_t>(si.totalram) * si.mem_unit : 0;
  JailLimits out;
  const runtime::Limits& l = r.limits;
  std::vector<cg::Dir> dirs;
  for (const auto& path : l.cgroups) {
    auto d = cg::probe(path);
    if (!d) return std::move(d.take_error()).context("the cgroup for the run's limits");
    dirs.push_back(*d);
  }
  auto has = [&](bool cg::Controllers::*c) {
    return std::any_of(dirs.begin(), dirs.end(), [&](const cg::Dir& d) { return d.controllers.*c; });
  };
  cg::Wanted want;
  if (l.memory) {
    auto bytes = l.memory->bytes(ram);
    if (!bytes)
      return Error::invalid(
          fmt::format("memory limit {} ({}): the host's RAM is unknown; give a size", l.memory->str(), l.memory_src));
    want.memory_bytes = *bytes;
  }
  want.millicpus = l.millicpus;
  // Checked before root's own pids cgroup joins `dirs`: only operators'
  // directories serve memory and CPU.
  for (auto [asked, member, what] : {std::tuple{want.memory_bytes.has_value(), &cg::Controllers::memory, "memory"},
                                     std::tuple{want.millicpus.has_value(), &cg::Controllers::cpu, "cpu"}}) {
    if (!asked || has(member)) continue;
    std::string request = want.memory_bytes && member == &cg::Controllers::memory
                              ? fmt::format("--memory/[limits] memory {} ({})", l.memory->str(), l.memory_src)
                              : fmt::format("--cpus/[limits] cpus {} ({})", policy::cpus_str(*l.millicpus), l.cpus_src);
    return Error::invalid(fmt::format(
        "cannot enforce {}: no cgroup with the {} controller is delegated to pi-jail ({}); fix: give [limits] cgroup "
        "a directory you can write: cgroup v2 with the controller in its cgroup.subtree_control (systemd: "
        "`systemd-run --user --scope -p Delegate=yes ...`), or a cgroup v1 directory of that controller's hierarchy "
        "made for you (mkdir + chown by root); `pi-jail doctor` lists this host's",
        request, what, dirs.empty() ? "[limits] cgroup is not set" : "none of [limits] cgroup has it"));
  }
  // The host's root is exempt from RLIMIT_NPROC (kernel/fork.c): only a
  // pids cgroup limits its jail; pi-jail makes one in its own pids cgroup
  // when no operator directory has the controller.
  const bool root = r.uid == 0;
  std::string pids_by = root ? "" : "RLIMIT_NPROC in the jail's user namespace";
  // A process is in one cgroup v2 directory only: root's own v2 pids
  // cgroup cannot serve beside an operator's v2 directory for memory or
  // CPU (RunCgroups::create would refuse the pair).
  auto v2_in_use = [&] {
    for (auto [asked, member] : {std::pair{want.memory_bytes.has_value(), &cg::Controllers::memory},
                                 std::pair{want.millicpus.has_value(), &cg::Controllers::cpu}}) {
      if (!asked) continue;
      auto d = std::find_if(dirs.begin(), dirs.end(), [m = member](const cg::Dir& x) { return x.controllers.*m; });
      if (d != dirs.end() && d->version == 2) return true;
    }
    return false;
  };
  if (root && !has(&cg::Controllers::pids))
    for (const auto& d : cg::own_dirs())
      if (d.controllers.pids && (d.version == 1 || !v2_in_use())) {
        dirs.push_back(d);
        break;
      }
  if (has(&cg::Controllers::pids))
    want.pids = l.pids;
  else if (root) {
    std::string why = "the host's root is exempt from RLIMIT_NPROC, and no pids cgroup is writable here";
    if (l.pids_src != "default")
      return Error::invalid(
          fmt::format("the process limit {} ({}) cannot be enforced: {}; fix: give [limits] cgroup a "
                      "cgroup directory with the pids controller, or run as a user other than root",
                      l.pids, l.pids_src, why));
    util::warn("the default process limit ({}) is not enforced: {}", l.pids, why);
    pids_by = "not enforced (root, no pids cgroup)";
  }
  if (want.memory_bytes || want.millicpus || want.pids) {
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    auto made = cg::RunCgroups::create(dirs, want, fmt::format("pi-jail-{}-{}", ::getpid(), now % 1000000000));
    if (!made) {
      std::string asked = l.memory ? fmt::format("--memory/[limits] memory {} ({})", l.memory->str(), l.memory_src)
                          : l.millicpus
                              ? fmt::format("--cpus/[limits] cpus {} ({})", policy::cpus_str(*l.millicpus), l.cpus_src)
                              : fmt::format("the process limit {} ({})", l.pids, l.pids_src);
      return std::move(made.take_error()).context(fmt::format("cannot enforce {}", asked));
    }
    out.cgroups.emplace(std::move(*made));
  }
  auto by = [&](std::string_view what) { return out.cgroups ? out.cgroups->enforcer(what) : std::string(); };
  if (l.memory) out.limits.push_back({"memory", l.memory->str(), l.memory_src, by("memory")});
  if (l.millicpus) out.limits.push_back({"cpus", policy::cpus_str(*l.millicpus), l.cpus_src, by("cpu")});
  std::string pids_cg = by("pids");
  if (!pids_cg.empty()) pids_by = pids_by.empty() ? pids_cg : pids_by + " and " + pids_cg;
  out.limits.push_back({"pids", std::to_string(l.pids), l.pids_src, pids_by});
  out.limits.push_back({"scratch", r.scratch.str(), l.scratch_src, "tmpfs size (/tmp, /var/tmp, /dev/shm together)"});
  if (out.cgroups)
    for (const auto& line : out.cgroups->describe()) util::debug("run cgroup: {}", line);
  return out;
}

void add_usage(const JailLimits& l, ResourceUse& use) {
  use.limits = l.limits;
  if (!l.cgroups) return;
  auto u = l.cgroups->usage();
  if (u.memory_peak) use.memory_peak_bytes = u.memory_peak, use.memory_peak_from = "cgroup";
  if (u.cpu_usec) use.cpu_ms = *u.cpu_usec / 1000, use.cpu_from = "cgroup";
  if (u.pids_peak) use.processes_peak = u.pids_peak;
  use.oom_kills = u.oom_kills;
}

}  // namespace pj::supervisor
