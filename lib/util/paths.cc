#include "paths.h"

#include <fmt/format.h>

namespace pj::util {

Result<std::string> normalize_path(std::string_view path, std::string_view base) {
  if (path.empty()) return Error::invalid("empty path");
  if (path.find('\0') != std::string_view::npos) return Error::invalid("path contains a NUL byte");
  std::string joined;
  if (path.front() != '/') {
    if (base.empty() || base.front() != '/')
      return Error::invalid(fmt::format("relative path '{}' without an absolute base", path));
    joined = fmt::format("{}/{}", base, path);
  } else {
    joined = std::string(path);
  }
  std::vector<std::string_view> parts;
  std::string_view rest = joined;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return Error::invalid(fmt::format("path '{}' climbs above /", path));
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? std::string("/") : out;
}

bool path_within(std::string_view path, std::string_view root) {
  if (root == "/") return !path.empty() && path.front() == '/';
  if (path.size() < root.size() || path.substr(0, root.size()) != root) return false;
  return path.size() == root.size() || path[root.size()] == '/';
}

std::vector<std::string_view> path_components(std::string_view normalized) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < normalized.size()) {
    while (i < normalized.size() && normalized[i] == '/') ++i;
    size_t j = normalized.find('/', i);
    if (j == std::string_view::npos) j = normalized.size();
    if (j > i) out.push_back(normalized.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string_view parent_path(std::string_view normalized) {
  size_t slash = normalized.rfind('/');
  if (slash == 0 || slash == std::string_view::npos) return "/";
  return normalized.substr(0, slash);
}

bool mode_grants_write(uid_t owner, gid_t group, mode_t mode, uid_t uid, const std::vector<gid_t>& gids) {
  if (owner == uid) return (mode & 0200) != 0;
  for (gid_t g : gids)
    if (g == group) return (mode & 0020) != 0;
  return (mode & 0002) != 0;
}

}  // namespace pj::util
