#include "seatbelt/host.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "seatbelt/launch.h"
#include "util/paths.h"

#ifdef __APPLE__
#include <mach-o/dyld.h>
#else
#include <link.h>
#endif

namespace pj::seatbelt {

using runtime::Check;
using util::Error;

namespace {

// Remove everything in the open directory `dir` (then closed).
void empty_dir(int dir) {
  DIR* d = ::fdopendir(dir);
  if (!d) {
    ::close(dir);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  for (const auto& name : names) {
    if (::unlinkat(dir, name.c_str(), 0) == 0) continue;  // not a directory (symlinks included)
    int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    empty_dir(sub);
    ::unlinkat(dir, name.c_str(), AT_REMOVEDIR);
  }
  ::closedir(d);
}

Check check_platform() {
  utsname u{};
  ::uname(&u);
  if (std::string(u.sysname) == "Darwin")
    return {"platform", Check::State::ok, fmt::format("macOS (Darwin {})", u.release), ""};
  return {"platform", Check::State::missing, fmt::format("{} {}: Seatbelt exists only on macOS", u.sysname, u.release),
          "on Linux, use the Linux build of pi-jail (namespace jail)"};
}

// Run /usr/bin/true under the base profile: proof that this macOS
// accepts every operation and filter the profile names.
Check check_profile_accepted(const std::string& sandbox_exec) {
  SeatbeltSpec spec;
  spec.profile = std::string(base_profile()) + "(allow file-read* (literal \"/usr/bin/true\"))\n";
  spec.exec_path = "/usr/bin/true";
  spec.argv = {"true"};
  spec.cwd = "/";
  const std::string name = "the base profile";
  auto started = Sandboxed::start(spec, LaunchOptions{sandbox_exec, -1});
  if (!started) return {name, Check::State::missing, started.error().message(), "reinstall pi-jail, or report a bug"};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto status = started->poll_exit();
    if (!status) return {name, Check::State::missing, status.error().message(), "report a bug"};
    if (*status) {
      if (**status == 0) return {name, Check::State::ok, "sandbox-exec accepts it: /usr/bin/true ran under it", ""};
      return {name, Check::State::missing,
              fmt::format("/usr/bin/true under the profile ended with status {} (sandbox-exec's message is above)",
                          **status),
              "this macOS refuses part of pi-jail's profile: report a bug with `sw_vers` and the message"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {name, Check::State::missing, "/usr/bin/true under the profile did not end within 10 s", "report a bug"};
}

}  // namespace

runtime::HostReport probe_host(const std::string& sandbox_exec) {
  runtime::HostReport r;
  Check platform = check_platform();
  r.checks.push_back(platform);
  if (::access(sandbox_exec.c_str(), X_OK) != 0) {
    r.checks.push_back({"sandbox-exec", Check::State::missing,
                        fmt::format("{}: {}", sandbox_exec, std::strerror(errno)),
                        "pi-jail's macOS jail needs /usr/bin/sandbox-exec, part of every macOS since 10.5"});
    return r;
  }
  r.checks.push_back({"sandbox-exec", Check::State::ok, sandbox_exec, ""});
  r.checks.push_back(check_profile_accepted(sandbox_exec));
  r.checks.push_back({"processes", Check::State::info,
                      "no PID namespace on macOS: what is left in the command's process group is killed at the end; "
                      "a process that starts its own session outlives the run (inside the sandbox)",
                      ""});
  r.jail_possible = true;
  for (const auto& c : r.checks) r.jail_possible = r.jail_possible && c.state != Check::State::missing;
  return r;
}

util::Result<std::string> make_private_dir(const std::string& parent) {
  const std::string pattern = (parent.empty() || parent.back() != '/' ? parent + "/" : parent) + "pi-jail.XXXXXX";
  std::string tmpl = pattern;
  if (!::mkdtemp(tmpl.data()))
    return Error::from_errno(fmt::format("make the run's private TMPDIR {}", pattern), errno);
  char real[PATH_MAX];
  if (!::realpath(tmpl.c_str(), real)) {
    int err = errno;
    ::rmdir(tmpl.c_str());
    return Error::from_errno(fmt::format("resolve the run's private TMPDIR {}", tmpl), err);
  }
  return std::string(real);
}

void remove_tree(const std::string& path) {
  int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  empty_dir(dir);
  ::rmdir(path.c_str());
}

namespace {

std::optional<std::string> resolved(const char* path) {
  char buf[PATH_MAX];
  if (!path || !::realpath(path, buf)) return std::nullopt;
  return std::string(buf);
}

}  // namespace

util::Result<std::string> own_executable() {
#ifdef __APPLE__
  char path[PATH_MAX];
  uint32_t size = sizeof path;
  if (::_NSGetExecutablePath(path, &size) != 0) return Error::invalid("find this executable: its path is too long");
  const char* named = path;
#else
  const char* named = "/proc/self/exe";
#endif
  auto real = resolved(named);
  if (!real) return Error::from_errno(fmt::format("find this executable ({})", named), errno);
  return *real;
}

std::vector<std::string> loaded_libraries() {
  std::vector<std::string> out;
#ifdef __APPLE__
  // Image 0 is the executable.
  for (uint32_t i = 1; i < ::_dyld_image_count(); ++i)
    if (auto real = resolved(::_dyld_get_image_name(i))) out.push_back(*real);
#else
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        // The executable has no name here, the vDSO no path.
        if (info->dlpi_name && info->dlpi_name[0] == '/')
          if (auto real = resolved(info->dlpi_name)) static_cast<std::vector<std::string>*>(data)->push_back(*real);
        return 0;
      },
      &out);
#endif
  return out;
}

}  // namespace pj::seatbelt
