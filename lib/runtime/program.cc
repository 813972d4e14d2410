#include "runtime/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "util/paths.h"

namespace pj::runtime {

using util::Error;
using util::path_within;

namespace {

bool executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// The first executable regular file `name` on PATH, as execvp(3) finds
// it. `unexecutable` is set when a regular file of that name was found on
// the way that cannot be executed (execvp then fails with EACCES; the
// shell says "Permission denied", 126).
std::optional<std::string> search_path(const std::string& name, const Lookup& lk, bool& unexecutable) {
  unexecutable = false;
  std::string_view dirs =
      lk.path_env.empty() ? std::string_view("/usr/local/bin:/usr/bin:/bin") : std::string_view(lk.path_env);
  while (true) {
    size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    auto cand = util::normalize_path(dir + "/" + name, lk.cwd);
    if (cand && executable_file(*cand)) return *cand;
    struct stat st;
    if (cand && ::stat(cand->c_str(), &st) == 0 && S_ISREG(st.st_mode)) unexecutable = true;
    if (colon == std::string_view::npos) return std::nullopt;
    dirs.remove_prefix(colon + 1);
  }
}

// An interpreter's installation: the prefix above its `bin` directory
// (nvm, fnm, volta, asdf, Homebrew, /opt/...), which holds its libraries.
// Never `/`, $HOME, an ancestor of it, or ~/.local (they hold secrets):
// then just the file.
std::string installation_of(const std::string& file, const Lookup& lk) {
  std::string dir(util::parent_path(file));
  auto parts = util::path_components(dir);
  if (parts.empty() || parts.back() != "bin") return file;
  std::string prefix(util::parent_path(dir));
  if (prefix == "/" || path_within(lk.home, prefix) || prefix == lk.home + "/.local") return file;
  return prefix;
}

// A script inside a node_modules tree needs the outermost node_modules
// (npm hoists its dependencies there); any other program, only itself
// (never its siblings).
std::string package_tree_of(const std::string& file) {
  size_t at = file.find("/node_modules/");
  if (at == std::string::npos) return file;
  return file.substr(0, at + std::string("/node_modules").size());
}

}  // namespace

std::pair<std::string, std::string> parse_shebang(std::string_view line) {
  if (!line.starts_with("#!")) return {};
  line.remove_prefix(2);
  auto next = [&]() {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    size_t end = line.find_first_of(" \t\r\n");
    std::string_view word = line.substr(0, end);
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
    return std::string(word);
  };
  std::string interp = next();
  std::string arg = next();
  if (interp.ends_with("/env"))
    while (arg.starts_with("-")) arg = next();  // env -S node --flags
  return {interp, arg};
}

util::Result<Program> discover(const std::string& name, const Lookup& lk) {
  using util::CommandExit;
  std::string found;
  if (name.find('/') != std::string::npos) {
    auto norm = util::normalize_path(name, lk.cwd);
    if (!norm) return std::move(norm.take_error()).with_exit(CommandExit::not_found);
    struct stat st;
    if (::stat(norm->c_str(), &st) != 0) {
      // A path the caller may not search (EACCES) exists, as far as the
      // shell can tell, and cannot be executed: 126, as the shell says.
      const int err = errno;
      return Error::from_errno(name, err).with_exit(err == EACCES ? CommandExit::not_executable
                                                                  : CommandExit::not_found);
    }
    if (!executable_file(*norm))
      return Error::invalid(fmt::format("{}: not an executable file", name)).with_exit(CommandExit::not_executable);
    found = *norm;
  } else {
    bool unexecutable = false;
    auto hit = search_path(name, lk, unexecutable);
    if (!hit && unexecutable)
      return Error::invalid(fmt::format("{}: found on PATH but not executable (Permission denied)", name))
          .with_exit(CommandExit::not_executable);
    if (!hit)
      return Error::invalid(fmt::format("{}: command not found on PATH", name)).with_exit(CommandExit::not_found);
    found = *hit;
  }

  Program p;
  p.exec_path = real(found);
  p.needs.push_back({package_tree_of(p.exec_path), fmt::format("runtime: {} itself", name)});

  std::ifstream in(p.exec_path, std::ios::binary);
  std::string first(256, '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<size_t>(in.gcount()));
  first = first.substr(0, first.find('\n'));
  auto [interp, arg] = parse_shebang(first);
  if (!interp.empty()) {
    std::string why = fmt::format("runtime: interpreter of {} ({})", name, first);
    std::string program = interp;
    if (interp.ends_with("/env") && !arg.empty()) {
      bool unexecutable = false;
      auto hit = search_path(arg, lk, unexecutable);
      if (!hit) {
        return Error::invalid(fmt::format("{}: its interpreter \"{}\" ({}) is not on PATH", name, arg, first))
            .with_exit(CommandExit::not_found);
      }
      program = *hit;
    }
    p.interpreter = real(program);
    if (!executable_file(p.interpreter)) {
      // As the shells: an interpreter that is missing is 127, one that
      // exists but cannot be executed (EACCES) 126.
      struct stat st;
      const bool exists = ::stat(p.interpreter.c_str(), &st) == 0;
      return Error::invalid(
                 fmt::format("{}: its interpreter {} ({}) is not an executable file", name, p.interpreter, first))
          .with_exit(exists ? CommandExit::not_executable : CommandExit::not_found);
    }
    p.needs.push_back({installation_of(p.interpreter, lk), why});
    if (interp.ends_with("/env") && !arg.empty()) p.path_first = std::string(util::parent_path(p.interpreter));
  }
  return p;
}

}  // namespace pj::runtime
