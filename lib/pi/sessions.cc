#include "pi/sessions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "util/dir_names.h"
#include "util/escape.h"
#include "util/json_value.h"
#include "util/paths.h"
#include "util/unique_fd.h"

namespace pj::pi {

namespace {

constexpr std::string_view kWrap = "--";
// A header is one short JSON line; a first line longer than this is not
// Pi's.
constexpr size_t kMaxHeader = 64 * 1024;
// Entries of one session directory looked at before it counts as
// unreadable (a directory of Pi's holds one file per session).
constexpr size_t kMaxEntries = 200000;

std::string join(const std::string& dir, std::string_view name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + std::string(name);
}

void spelled_below(const std::string& dir, std::string_view rest, const IsDirectory& is_dir, size_t& checks,
                   std::vector<std::string>& out) {
  if (rest.empty()) {
    out.push_back(dir);
    return;
  }
  for (size_t i = 0; i <= rest.size(); ++i) {
    if (i < rest.size() && rest[i] != '-') continue;
    const std::string_view part = rest.substr(0, i);
    if (part.empty() || part == "." || part == "..") continue;
    if (checks == 0) return;
    --checks;
    const std::string path = join(dir, part);
    if (!is_dir(path)) continue;
    spelled_below(path, i == rest.size() ? std::string_view() : rest.substr(i + 1), is_dir, checks, out);
  }
}

// The spelling of the directory a session-directory name stands for
// ("--a-b--" -> "a-b"), or nullopt for a name Pi does not make.
std::optional<std::string_view> spelling_of(std::string_view name) {
  if (name.size() < 2 * kWrap.size() || !name.starts_with(kWrap) || !name.ends_with(kWrap)) return std::nullopt;
  return name.substr(kWrap.size(), name.size() - 2 * kWrap.size());
}

// A session in `dir` (open) that records a directory outside `workspace`,
// described for a sentence; "" when every one records a directory inside.
std::string foreign_session(int dir, const std::string& workspace) {
  std::string found;
  size_t seen = 0;
  const bool read = util::for_each_name(dir, [&](std::string_view name) {
    if (++seen > kMaxEntries) {
      found = fmt::format("it holds more than {} entries", kMaxEntries);
      return false;
    }
    if (!name.ends_with(".jsonl")) return true;  // Pi reads sessions only from *.jsonl
    auto cwd = recorded_cwd(dir, name);
    if (!cwd) {
      found = fmt::format("the session {} records no directory Pi would read", util::printable(name));
      return false;
    }
    if (cwd->empty() || cwd->front() != '/' || !util::path_within(*cwd, workspace)) {
      found = fmt::format("the session {} records the directory {}", util::printable(name),
                          util::printable(cwd->size() > 300 ? cwd->substr(0, 300) + "..." : *cwd));
      return false;
    }
    return true;
  });
  if (!read && found.empty()) found = "it cannot be read";
  return found;
}

}  // namespace

std::string session_dir_name(std::string_view cwd) {
  std::string spelled(cwd.starts_with('/') || cwd.starts_with('\\') ? cwd.substr(1) : cwd);
  std::replace_if(
      spelled.begin(), spelled.end(), [](char c) { return c == '/' || c == '\\' || c == ':'; }, '-');
  return std::string(kWrap) + spelled + std::string(kWrap);
}

std::optional<std::string> recorded_cwd(int dir, std::string_view file) {
  util::UniqueFd fd(::openat(dir, std::string(file).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  // The header is the first line: read until it ends, in small steps (a
  // history of thousands of sessions is read at every start).
  std::string head;
  char buf[1024];
  while (head.find('\n') == std::string::npos && head.size() < kMaxHeader) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  return header_cwd(head);
}

std::optional<std::string> header_cwd(std::string_view head) {
  const size_t end = head.find('\n');
  if (end == std::string::npos && head.size() >= kMaxHeader) return std::nullopt;
  auto header = util::json::parse(head.substr(0, end));
  if (!header) return std::nullopt;
  const auto* type = header->find("type");
  const auto* cwd = header->find("cwd");
  if (!type || !type->as_string() || *type->as_string() != "session" || !cwd || !cwd->as_string()) return std::nullopt;
  return *cwd->as_string();
}

std::vector<std::string> directories_spelled(const std::string& root, std::string_view spelled,
                                             const IsDirectory& is_dir, size_t max_checks) {
  std::vector<std::string> out;
  if (spelled.empty()) return out;
  size_t checks = max_checks;
  spelled_below(root, spelled, is_dir, checks, out);
  return out;
}

std::string why_not_kept(std::string_view name, int made, const std::string& workspace, const IsDirectory& is_dir) {
  const std::string own_name = session_dir_name(workspace);
  const std::string below = own_name.substr(0, own_name.size() - kWrap.size()) + "-";
  const bool own = name == own_name;
  if (!own && (!name.starts_with(below) || !name.ends_with(kWrap) || name.size() < below.size() + kWrap.size() + 1))
    return "its name is not that of a directory in this workspace";
  if (!own &&
      directories_spelled(workspace, name.substr(below.size(), name.size() - below.size() - kWrap.size()), is_dir)
          .empty())
    return "its name is not that of a directory in this workspace";
  for (const auto& d : directories_spelled("/", *spelling_of(name), is_dir)) {
    if (util::path_within(d, workspace)) continue;
    if (auto why = foreign_session(made, workspace); !why.empty())
      return fmt::format("{} outside the workspace has the same name, and {}", util::printable(d), why);
    break;
  }
  return "";
}

WorkspaceSessions workspace_sessions(int sessions, const std::string& workspace, const std::string& cwd,
                                     const IsDirectory& is_dir) {
  WorkspaceSessions out;
  std::vector<std::string> own{session_dir_name(workspace)};
  if (cwd != workspace && util::path_within(cwd, workspace)) own.push_back(session_dir_name(cwd));
  // The names of the workspace's subdirectories start with this.
  const std::string own_name = session_dir_name(workspace);
  const std::string below = own_name.substr(0, own_name.size() - kWrap.size()) + "-";

  std::vector<std::string> candidates = own;
  if (sessions >= 0) {
    util::for_each_name(sessions, [&](std::string_view name) {
      if (std::find(own.begin(), own.end(), name) != own.end()) return true;
      if (!name.starts_with(below) || !name.ends_with(kWrap) || name.size() < below.size() + kWrap.size() + 1)
        return true;
      const std::string_view rest = name.substr(below.size(), name.size() - below.size() - kWrap.size());
      if (!directories_spelled(workspace, rest, is_dir).empty()) candidates.emplace_back(name);
      return true;
    });
  }
  std::sort(candidates.begin() + static_cast<std::ptrdiff_t>(own.size()), candidates.end());

  for (const auto& name : candidates) {
    struct stat st;
    const bool present = sessions >= 0 && ::fstatat(sessions, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (present && !S_ISDIR(st.st_mode)) {
      out.refused.push_back(
          fmt::format("sessions/{} is not a directory (a link?), so Pi's sessions there are not "
                      "shown; remove it",
                      util::printable(name)));
      continue;
    }
    if (present) {
      // Another existing directory outside the workspace has the same name.
      std::vector<std::string> others;
      for (auto& d : directories_spelled("/", *spelling_of(name), is_dir))
        if (!util::path_within(d, workspace)) others.push_back(std::move(d));
      if (!others.empty()) {
        util::UniqueFd dir(::openat(sessions, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        const std::string why = dir.valid() ? foreign_session(dir.get(), workspace) : "it cannot be opened";
        if (!why.empty()) {
          out.refused.push_back(fmt::format(
              "Pi's sessions in sessions/{} are not shown in this jail: Pi names the sessions of {}, outside the "
              "workspace, the same way, and {}; what this run's Pi keeps there is discarded at the end",
              util::printable(name), util::printable(others.front()), why));
          continue;
        }
      }
    }
    out.shown.push_back({name, present});
  }
  return out;
}

}  // namespace pj::pi
