#include "warm_up.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <fmt/format.h>

#include "linux_run.h"
#include "linuxjail/host.h"
#include "runtime/compile_cache.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

namespace cc = runtime::compile_cache;
using util::Error;
using util::UniqueFd;

namespace {

// While the warm-up runs, its stdin and stdout are /dev/null and its
// stderr (and the supervisor's own messages) a memory file, shown only
// when the warm-up fails; the caller's fds 0-2 come back on destruction.
class StdioAside {
public:
  StdioAside() {
    for (int fd = 0; fd < 3; ++fd) saved_[fd] = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    log_ = UniqueFd(::memfd_create("pi-jail-warm-up", MFD_CLOEXEC));
    if (null.valid()) {
      ::dup2(null.get(), 0);
      ::dup2(null.get(), 1);
    }
    if (log_.valid()) ::dup2(log_.get(), 2);
  }
  ~StdioAside() { restore(); }
  StdioAside(const StdioAside&) = delete;
  StdioAside& operator=(const StdioAside&) = delete;

  void restore() {
    for (int fd = 0; fd < 3; ++fd)
      if (saved_[fd].valid()) {
        ::dup2(saved_[fd].get(), fd);
        saved_[fd] = UniqueFd();
      }
  }
  // The last `cap` bytes written to stderr.
  std::string tail(size_t cap = 2000) const {
    if (!log_.valid()) return "";
    off_t end = ::lseek(log_.get(), 0, SEEK_END);
    off_t from = end > static_cast<off_t>(cap) ? end - static_cast<off_t>(cap) : 0;
    std::string out(static_cast<size_t>(end - from), '\0');
    ssize_t n = ::pread(log_.get(), out.data(), out.size(), from);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }

private:
  UniqueFd saved_[3];
  UniqueFd log_;
};

// The second part of a warm-up (node --input-type=module -e, with the
// program's script as its argument): import every module beside the
// script, and in the directories one level below it, that `--version`
// did not load (a turn loads its provider and tool modules lazily):
// .js and .mjs files, not through a symlink, not in node_modules, not a
// script with a #! line (a program, which would run), at most 400 of
// them; each given 2 s to load (a module that fails or waits is passed
// over); then the cache is written. Only the installation's own code
// runs, in the same jail as --version.
constexpr const char* kImportModules = R"js(
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { flushCompileCache } from "node:module";
const files = [];
const walk = (dir, depth) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory() && depth < 1 && e.name !== "node_modules") walk(p, depth + 1);
    else if (e.isFile() && /\.m?js$/.test(e.name) && files.length < 400) files.push(p);
  }
};
walk(dirname(process.argv[process.argv.length - 1]), 0);
for (const f of files.sort()) {
  if (readFileSync(f, { encoding: "latin1" }).startsWith("#!")) continue;
  let timer;
  try {
    await Promise.race([import(pathToFileURL(f).href), new Promise((r) => { timer = setTimeout(r, 2000); })]);
  } catch {}
  clearTimeout(timer);
}
flushCompileCache();
process.exit(0);
)js";

// A jail that sees the system's read-only paths (libraries), the
// program's installation read-only and `dir` writable: no workspace, no
// agent dir, no grant of the policy, no network (not even the filter), no
// variable of the caller. It runs `PROGRAM --version`, which loads the
// program; Node writes the compile cache into `dir` as it exits. Then,
// in a jail of the same plan, the program's other modules
// (kImportModules): what that adds is kept, and its failure only noted.
// A termination signal that stopped either jail is the error.
util::Result<cc::WarmUpOutcome> warm_up(const Prepared& prepared, const linuxjail::PlanInput& session,
                                        const std::string& dir) {
  using cc::Warmed;
  linuxjail::PlanInput w;
  w.workspace = dir;
  w.cwd = dir;
  w.home = session.home;
  w.uid = session.uid;
  w.gid = session.gid;
  w.system = session.system;
  w.denies = session.denies;
  for (const auto& need : prepared.program.needs) w.grants.push_back({need.path, runtime::Access::read_only, need.why});
  w.env_set = {{"NODE_COMPILE_CACHE", dir}, {"PI_OFFLINE", "1"}, {"PI_SKIP_VERSION_CHECK", "1"}, {"PI_TELEMETRY", "0"}};
  // The interpreter the session's #! line finds (on the caller's PATH for
  // #!/usr/bin/env node), run directly: the warm-up has no PATH of the caller's.
  w.exec_path = prepared.program.interpreter;
  w.network_filter = false;
  w.seccomp = session.seccomp;
  w.landlock_abi = session.landlock_abi;
  w.landlock_use = session.landlock_use;
  w.scratch = policy::MemorySize{64ULL << 20, policy::MemorySize::Unit::bytes};

  RunOptions opts;
  opts.timeout = std::chrono::seconds(30);  // a guard: --version takes well under a second
  opts.grace = std::chrono::milliseconds(500);
  // The warm-up jail running `argv`, its stdio aside; `tail` gets the end
  // of its stderr.
  auto run_warm_up_jail = [&](std::vector<std::string> argv, std::string& tail) -> util::Result<RunOutcome> {
    w.argv = std::move(argv);
    auto facts = view::probe_paths(linuxjail::paths_to_probe(w));
    auto spec = linuxjail::plan(w, facts);
    if (!spec) return Error::invalid("plan the warm-up jail: " + spec.error().message());
    for (const auto& op : spec->mounts)
      if (op.placeholder || op.held)
        return Error::invalid(fmt::format("the warm-up jail would need a placeholder at {}", op.dest));
    StdioAside aside;
    RunOutcome ended = run_jailed(*spec, opts);
    aside.restore();
    tail = aside.tail();
    return ended;
  };

  using Ending = RunOutcome::Ending;
  // The user's Ctrl-C (or a TERM) reached the warm-up's supervisor, which
  // passed it on: it is meant for the whole run.
  auto stopped = [](int sig) {
    return Error::stopped_by_signal(fmt::format("stopped by signal {} during the compile cache's warm-up", sig), sig);
  };
  std::string tail;
  auto version = run_warm_up_jail({prepared.program.interpreter, session.exec_path, "--version"}, tail);
  if (!version) return cc::WarmUpOutcome{Warmed::not_now, version.error().message()};
  const RunOutcome& ended = *version;
  if (ended.ending == Ending::exited && ended.exit_code == 0) {
    std::string modules_tail;
    auto modules = run_warm_up_jail(
        {prepared.program.interpreter, "--input-type=module", "-e", kImportModules, "--", session.exec_path},
        modules_tail);
    if (modules && modules->stopped_by) return stopped(modules->stopped_by);
    if (!modules)
      util::debug("compile cache: the program's other modules: {}", modules.error().message());
    else if (modules->ending != Ending::exited || modules->exit_code != 0)
      util::debug(
          "compile cache: importing the program's other modules ended with status {}{}; kept what "
          "`--version` made",
          modules->exit_code, util::printable("; its stderr: " + modules_tail));
    return cc::WarmUpOutcome{Warmed::made, ""};
  }
  if (ended.stopped_by) return stopped(ended.stopped_by);
  std::string why =
      fmt::format("`{} --version` in the warm-up jail ended with status {}{}{}", session.exec_path, ended.exit_code,
                  ended.failure.empty() ? "" : ": " + ended.failure, util::printable("; its stderr: " + tail));
  if (ended.ending == Ending::setup_failed) return cc::WarmUpOutcome{Warmed::not_now, why};
  return cc::WarmUpOutcome{Warmed::program_failed, why};
}

}  // namespace

util::Status attach_compile_cache(const Prepared& prepared, linuxjail::PlanInput& in) {
  const auto& pol = prepared.policy.resolved.policy;
  if (!pol || !pol->compile_cache() || !cc::is_node_program(prepared.program)) return {};
  const std::string root = cc::cache_root(std::getenv("XDG_CACHE_HOME"), in.home);
  if (root.empty()) return {};
  std::vector<std::string> installation;
  for (const auto& need : prepared.program.needs) installation.push_back(need.path);
  installation.push_back(root);
  if (auto why = cc::writable_in_jail(in, installation); !why.empty()) {
    util::note("no compile cache for {}: {}", util::printable(in.exec_path), util::printable(why));
    return {};
  }
  auto key = cc::installation_key(prepared.program);
  if (!key) return {};
  auto dir = cc::ensure(root, *key, [&](const std::string& d) { return warm_up(prepared, in, d); });
  if (!dir && dir.error().exit_kind() == util::Exit::signaled) return dir.take_error();
  if (!dir) {
    util::warn("compile cache not used: {}; the program starts without it", util::printable(dir.error().message()));
    return {};
  }
  if (auto why = cc::writable_in_jail(in, {*dir}); !why.empty()) {
    util::warn("compile cache not used: {}", util::printable(why));
    return {};
  }
  util::debug("compile cache {} (read-only)", util::printable(*dir));
  in.grants.push_back({*dir, runtime::Access::read_only, "compile cache (written only by its warm-up jail)"});
  in.env_set.emplace_back("NODE_COMPILE_CACHE", *dir);
  return {};
}

}  // namespace pj::supervisor
