#include "git/worktree.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::git {

namespace {

constexpr size_t kPointerCap = 4096;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

// A small pointer file (`.git`, `gitdir`, `commondir`): its first line.
util::Result<std::string> pointer(const std::string& path) {
  auto text = util::read_untrusted_file(path, kPointerCap);
  if (!text) return text.take_error();
  if (!*text) return util::Error::invalid(fmt::format("{} does not exist", path));
  std::string line = (*text)->substr(0, (*text)->find('\n'));
  return trim(std::move(line));
}

std::optional<std::string> real_dir(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  auto dir = util::open_dir_nofollow(buf);  // resolved, so no symlink is left on the way
  if (!dir) return std::nullopt;
  return std::string(buf);
}

// Git's own rule (safe.directory): a repository another user owns is not
// trusted; nor is one in a directory everyone may write (sticky /tmp,
// /dev/shm), where another user could have planted it.
std::string ownership_problem(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return fmt::format("{} cannot be examined", path);
  if (st.st_uid != ::getuid()) return fmt::format("{} belongs to another user", path);
  if (st.st_mode & (S_IWOTH | S_ISVTX)) return fmt::format("{} is writable by everyone", path);
  return "";
}

bool looks_like_git_dir(const std::string& dir) {
  auto fd = util::open_dir_nofollow(dir);
  if (!fd) return false;
  auto head = util::stat_beneath(fd->get(), "HEAD");
  auto objects = util::stat_beneath(fd->get(), "objects");
  auto refs = util::stat_beneath(fd->get(), "refs");
  return head && head->type == util::NodeType::regular && objects && objects->type == util::NodeType::directory &&
         refs && refs->type == util::NodeType::directory;
}

}  // namespace

std::optional<policy::Worktree> find_worktree(const std::string& workspace, const std::string& home,
                                              std::string& why_not) {
  auto ws = util::open_dir_nofollow(workspace);
  if (!ws) return std::nullopt;
  auto node = util::stat_beneath(ws->get(), ".git");
  if (!node || node->type != util::NodeType::regular) return std::nullopt;  // a repository, or none
  const std::string dot_git = workspace + "/.git";
  auto fail = [&](std::string why) {
    why_not = fmt::format("{} is not a git worktree that git would accept ({}); its repository stays outside the jail",
                          dot_git, why);
    return std::nullopt;
  };
  auto line = pointer(dot_git);
  if (!line) return fail(line.error().message());
  if (!line->starts_with("gitdir: ")) return fail("it does not start with \"gitdir: \"");
  auto named = util::normalize_path(line->substr(8), workspace);
  if (!named) return fail(named.error().message());
  auto git_dir = real_dir(*named);
  if (!git_dir) return fail(fmt::format("its git dir {} is not a directory", *named));

  auto back = pointer(*git_dir + "/gitdir");
  if (!back) return fail(back.error().message());
  auto back_path = util::normalize_path(*back, *git_dir);
  if (!back_path || *back_path != dot_git)
    return fail(fmt::format("{}/gitdir names {}, not this workspace", *git_dir, *back));

  auto common_line = pointer(*git_dir + "/commondir");
  if (!common_line) return fail(common_line.error().message());
  auto common_named = util::normalize_path(*common_line, *git_dir);
  if (!common_named) return fail(common_named.error().message());
  auto common = real_dir(*common_named);
  if (!common) return fail(fmt::format("its common dir {} is not a directory", *common_named));
  if (util::parent_path(*git_dir) != *common + "/worktrees")
    return fail(fmt::format("{} is not in {}/worktrees", *git_dir, *common));
  if (!looks_like_git_dir(*common)) return fail(fmt::format("{} is not a git repository", *common));
  if (*common == "/" || util::path_within(home, *common))
    return fail(fmt::format("{} contains your home directory", *common));
  for (const std::string& p : {dot_git, *git_dir, *common})
    if (auto why = ownership_problem(p); !why.empty()) return fail(why);
  return policy::Worktree{dot_git, *git_dir, *common};
}

}  // namespace pj::git
