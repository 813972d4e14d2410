// Pi's sessions, per workspace: which directories of the agent dir's
// sessions/ a jail on one workspace may see and write. Owns the knowledge
// of how Pi names a session directory and what a session file records;
// imports util only.
//
// Pi keeps the sessions started in a directory CWD in
// <agent>/sessions/--<CWD without its leading "/", with "/", "\" and ":"
// as "-">--/ (pi-coding-agent dist/core/session-manager.js,
// getDefaultSessionDirPath). A jail sees the directories of its own
// workspace only: the workspace's, the starting directory's, and those of
// the workspace's subdirectories. The encoding is lossy (/u/a-b and
// /u/a/b both become --u-a-b--): a name that an existing directory
// outside the workspace also has is shown only when every session in it
// records a directory inside the workspace.
//
// Everything under sessions/ was written by jails: read with O_NOFOLLOW |
// O_NONBLOCK, only regular files, only the first line of each.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace pj::pi {

// The name of the directory under sessions/ where Pi keeps the sessions
// it starts in `cwd` (absolute, normalised).
std::string session_dir_name(std::string_view cwd);

// The directory a session file records in its header (its first line,
// {"type":"session",...,"cwd":...}), read beneath `dir` without following
// a link or blocking; nullopt when it is not a regular file or has no
// such header.
std::optional<std::string> recorded_cwd(int dir, std::string_view file);
// The same from a session file's first bytes (what recorded_cwd() read).
std::optional<std::string> header_cwd(std::string_view head);

// Whether `path` is a directory (stat(2), links followed: Pi names a
// session directory by the path it was started in, not the real one).
using IsDirectory = std::function<bool(const std::string& path)>;

// The existing directories below `root` (absolute; "/" for all) whose
// relative path, spelled as Pi spells it ("/" as "-"), is `spelled`; at
// most `max_checks` lookups (the spelling branches at every "-").
std::vector<std::string> directories_spelled(const std::string& root, std::string_view spelled,
                                             const IsDirectory& is_dir, size_t max_checks = 512);

// A session directory of this workspace as the jail sees it.
struct SessionDir {
  std::string name;     // under sessions/
  bool exists = false;  // on the host now (else: to be made for this run)
};

struct WorkspaceSessions {
  std::vector<SessionDir> shown;     // present and writable in the jail
  std::vector<std::string> refused;  // sentences: names not shown, and why
};

// Which directories of the host's sessions/ (open at `sessions`; -1 when
// it does not exist yet) belong to `workspace` for a run started in
// `cwd`: the workspace's own and the starting directory's (when inside
// the workspace), shown even when absent (the run makes them), and every
// existing one whose name spells a directory inside the workspace. A
// name that a directory outside the workspace spells too is shown only
// when every session in it records a directory inside the workspace.
WorkspaceSessions workspace_sessions(int sessions, const std::string& workspace, const std::string& cwd,
                                     const IsDirectory& is_dir);

// Why the session directory `name` that a run made (open at `made`: what
// the jail wrote) may not join the host's sessions/, or "" when it may:
// its name spells an existing directory inside `workspace` (a child `pi`
// started there), and, where a directory outside the workspace has the
// same name, every session in it records a directory inside the workspace.
std::string why_not_kept(std::string_view name, int made, const std::string& workspace, const IsDirectory& is_dir);

}  // namespace pj::pi
