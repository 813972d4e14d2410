// Writing Pi's credentials and settings back to the host after a run.
//
// Inside the jail Pi's agent dir is a private staging directory, and
// auth.json and settings.json there are copies ("given") placed at start.
// When the run ends, what the jail left in them is hostile input (DESIGN
// property 6): Pi runs an auth.json key that starts with '!' as a shell
// command, and several settings name code to load or commands to run.
// Only values Pi treats as data go back to the host, and only where they
// differ from what was given; everything else in the host file is kept
// exactly.
//
// The merge functions are pure: they take the three versions of one file
// and return the host file's new content. write_back() does the I/O, under
// Pi's own lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace pj::pi::agent {

// Every version of a file is refused past this size.
inline constexpr size_t kMaxFileBytes = size_t{1} << 20;

// What write-back applied, refused and left to the host, as short
// sentences for stderr and the report. They name files, providers and
// setting keys, escaped and shortened (the jail chose them); never a value.
class Notes {
public:
  enum class Kind {
    applied,  // written back
    refused,  // not written back: not data, not valid, or a removal
    kept,     // the host changed the same entry during the run; its value stays
  };
  struct Note {
    Kind kind;
    std::string text;
  };
  // Past this many, notes are counted, not kept (the jail picks how many).
  static constexpr size_t kMaxNotes = 100;

  void add(Kind kind, std::string text);
  const std::vector<Note>& items() const { return items_; }
  size_t omitted() const { return omitted_; }
  bool any(Kind kind) const;
  // One line per note ("refused: auth.json: provider \"x\": ..."), and a
  // last line counting the omitted ones.
  std::vector<std::string> lines() const;

private:
  std::vector<Note> items_;
  size_t omitted_ = 0;
};

// A file's bytes, or nullopt when it does not exist.
using Content = std::optional<std::string_view>;
// The host file's new content, or nullopt: nothing to write.
using NewContent = std::optional<std::string>;

// What a merge may know of the host's agent dir besides the file itself:
// the names of the themes in its themes/ ("<name>.json", regular files).
struct HostDir {
  std::vector<std::string> themes;
};

// auth.json: provider name -> credential. A provider entry the jail added
// or changed is written back when it is data: {"type": "oauth", access,
// refresh, expires, ...} or {"type": "api_key", "key": a literal}. A key
// that Pi would run ('!') or expand from the host's environment ('$'), a
// changed field that decides where a token is sent (enterpriseUrl, env),
// an unknown type or a malformed entry is refused. A removed entry is
// never applied. When the host changed the same entry during the run
// (host_now differs from given), the host's entry is kept.
NewContent merge_auth(Content host_now, Content given, Content jail_left, Notes& notes, const HostDir& dir = {});

// The jail's auth.json `jail_left` (real values) with the provider
// entries `held` put back as in `given` (dropped where `given` has none):
// what may be written back while a login made in the jail waits for the
// user's consent (login_consent.h). nullopt when either is not a JSON object
// (the merge then refuses the file anyway).
std::optional<std::string> hold_entries(std::string_view jail_left, Content given,
                                        const std::vector<std::string>& held);

// Whether merge_auth() would take the provider entry `name` of
// `jail_left` as data (given: the host's file at the start). One that it
// refuses anyway (a '!' key, a changed enterpriseUrl) is not a login to
// ask about: the merge refuses it and says why.
bool auth_entry_is_data(std::string_view jail_left, Content given, std::string_view name);

// settings.json: only keys on an allowlist of display and model
// preferences, each with its value type checked; keys that run or load
// code, decide where data goes, or weaken a later run, and every key not
// on the list, are refused. The host's concurrent change to a key wins.
// "theme" is data when it names a theme built into Pi or one in `dir`'s
// themes/ (or, as Pi 1.6.0 reads "LIGHT/DARK", two such names): any other
// name makes Pi load a file from elsewhere.
NewContent merge_settings(Content host_now, Content given, Content jail_left, Notes& notes, const HostDir& dir = {});

using MergeFn = NewContent (*)(Content host_now, Content given, Content jail_left, Notes& notes, const HostDir& dir);

// A file in the agent dir and the only merge that may write it.
struct AgentFile {
  std::string_view name;
  MergeFn merge;
};
inline constexpr AgentFile kAuthFile{"auth.json", &merge_auth};
inline constexpr AgentFile kSettingsFile{"settings.json", &merge_settings};

// How write_back() waits for Pi's lock: the proper-lockfile protocol,
// a directory "<name>.lock" made with mkdir whose mtime the holder
// refreshes. Pi takes it with lockSync (stale 10 s) for quick reads and
// writes, and with lock({stale: 30 s}) around OAuth refreshes, refreshed
// every 15 s (auth-storage.js acquireLockAsync). A lock is stale only when
// its mtime is older than the longer of the two, so a live holder is never
// robbed; a dead holder's lock becomes stale within `stale`, and `wait`
// outlasts that.
struct LockTiming {
  std::chrono::milliseconds stale{30'000};
  std::chrono::milliseconds wait{35'000};
  std::chrono::milliseconds first_retry{10};  // doubling up to max_retry, as Pi's backoff
  std::chrono::milliseconds max_retry{1'000};
};

enum class WriteOutcome { written, nothing_to_write };

// Under Pi's lock on `<name>` in `agent_dir_fd`: read the host file (a
// regular file of at most kMaxFileBytes, never through a symlink, never
// blocking on a FIFO), merge, and replace it atomically: write
// "<name>.<random>.tmp" (mode 0600, O_CREAT|O_EXCL|O_NOFOLLOW), fsync,
// rename over `<name>`, fsync the directory. On every failure the lock is
// released, the temporary file removed, the host file untouched, and the
// error says which step failed. Blocks for at most about `timing.wait`.
[[nodiscard]] util::Result<WriteOutcome> write_back(int agent_dir_fd, const AgentFile& file, Content given,
                                                    Content jail_left, Notes& notes, const LockTiming& timing = {},
                                                    const HostDir& dir = {});

// Where a file of the agent dir keeps its content when it is the user's
// symlink to a regular file elsewhere (a dotfiles repository): the
// target's directory, open at `dir_fd`, and its name there.
struct LinkTarget {
  int dir_fd;
  std::string_view name;
};

// As write_back(), for such a file: Pi's lock is taken beside the link in
// `agent_dir_fd`, where Pi takes it (proper-lockfile with realpath:
// false), and the target is read and replaced in its own directory. The
// link itself is never touched.
[[nodiscard]] util::Result<WriteOutcome> write_back_through(int agent_dir_fd, const AgentFile& file,
                                                            const LinkTarget& target, Content given, Content jail_left,
                                                            Notes& notes, const LockTiming& timing = {},
                                                            const HostDir& dir = {});

// Under Pi's lock on `name` in `agent_dir_fd`, as write_back(): read the
// host file, let `update` compute its new content from it, and replace it
// atomically. (The token exchange writes refreshed OAuth tokens so.)
[[nodiscard]] util::Result<WriteOutcome> update_locked(int agent_dir_fd, std::string_view name,
                                                       const std::function<NewContent(Content host_now)>& update,
                                                       const LockTiming& timing = {});

}  // namespace pj::pi::agent
