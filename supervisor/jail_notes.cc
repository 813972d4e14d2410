#include "jail_notes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "pi/profile_adapter.h"
#include "prepare.h"
#include "util/dir_names.h"
#include "util/escape.h"
#include "util/file_lock.h"
#include "util/log.h"
#include "util/random.h"
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::supervisor {

namespace {

constexpr const char* kFileName = "refusals";
constexpr const char* kGuardDir = "bin";
constexpr const char* kGuardName = "pi";
constexpr std::string_view kNotesPrefix = "jail-notes-";

// `s` as one word for sh(1).
std::string shell_quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The refused destinations of `table` (protocols together), in order of
// first sight; a published port's failures are the host's, not the jail's.
std::vector<const netproxy::Decision*> refused_destinations(const netproxy::DecisionTable& table) {
  std::vector<const netproxy::Decision*> out;
  for (const auto& d : table.entries) {
    if (d.allowed || d.protocol == netproxy::Protocol::publish) continue;
    if (std::none_of(out.begin(), out.end(), [&](const auto* o) { return o->host == d.host && o->port == d.port; }))
      out.push_back(&d);
  }
  return out;
}

// One destination's line. Never the decision's reason: that is the host's
// text (an operator file's path, a DNS error), which the jail is not told.
std::string line_of(const netproxy::Decision& d, const SummaryHints& hints) {
  std::string dest = d.host.empty() ? "(no destination: " + std::string(netproxy::protocol_name(d.protocol)) + ")"
                                    : fmt::format("{}:{}", util::printable(netproxy::bounded(d.host, 80)), d.port);
  const std::string flag = allow_flag(d, hints);
  return fmt::format("{}: refused{}\n", dest, flag.empty() ? "" : "; to allow: " + flag);
}

}  // namespace

std::string refusals_text(const netproxy::DecisionTable& table, const SummaryHints& hints) {
  std::string text =
      "# pi-jail: the network requests this run refused so far, oldest first, each with the option that would\n"
      "# allow it. Only the user can give one, to pi-jail outside the jail, for a later run: ask them.\n";
  const auto refused = refused_destinations(table);
  const size_t skipped = refused.size() > kMaxListedRefusals ? refused.size() - kMaxListedRefusals : 0;
  if (skipped) text += fmt::format("# ... {} older destinations not listed\n", skipped);
  for (size_t i = skipped; i < refused.size(); ++i) text += line_of(*refused[i], hints);
  if (table.unlisted.refused)
    text += fmt::format(
        "# ... and more refused connections past the filter's {} distinct entries (the exit summary "
        "counts them)\n",
        netproxy::kMaxEntries);
  if (refused.empty() && !table.unlisted.refused) text += "# (none yet)\n";
  return text;
}

std::string pi_guard_script(const std::string& pi_path) {
  std::string text =
      "#!/bin/sh\n"
      "# pi-jail: Pi's package commands would install into the jail's copy of the agent dir (or the workspace's\n"
      "# read-only .pi/), thrown away at the end: refused at once, saying how to install outside.\n"
      "case \"$1\" in\n";
  for (const char* command : {"install", "remove", "uninstall", "update"})
    text += fmt::format("  {}) printf '%s\\n' {} >&2; exit 125 ;;\n", command,
                        shell_quoted("pi-jail: " + pi::package_refusal(command)));
  return text + "esac\nexec " + shell_quoted(pi_path) + " \"$@\"\n";
}

namespace {

// Removes the notes directory `name` of `state` with what a run puts in it.
void remove_notes_dir(int state, const std::string& name, int dir) {
  ::unlinkat(dir, kFileName, 0);
  if (util::UniqueFd bin(::openat(dir, kGuardDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)); bin.valid())
    ::unlinkat(bin.get(), kGuardName, 0);
  ::unlinkat(dir, kGuardDir, AT_REMOVEDIR);
  ::unlinkat(state, name.c_str(), AT_REMOVEDIR);
}

// Each run holds its notes directory locked: one that can be locked is
// left from a run that is gone.
void remove_abandoned_notes(int state) {
  std::vector<std::string> names;
  (void)util::for_each_name(state, [&](std::string_view n) {
    if (n.starts_with(kNotesPrefix)) names.emplace_back(n);
    return true;
  });
  for (const std::string& name : names) {
    util::UniqueFd dir(::openat(state, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.valid() && util::try_lock_file(dir.get())) remove_notes_dir(state, name, dir.get());
  }
}

}  // namespace

util::Result<JailNotes> JailNotes::make(const std::string& state_dir, SummaryHints hints, NotesSeen seen) {
  auto state = util::make_private_dir(state_dir);
  if (!state) return std::move(state.take_error()).context("pi-jail's state directory");
  remove_abandoned_notes(state->get());
  const std::string name = fmt::format("{}{}-{:016x}", kNotesPrefix, ::getpid(), util::random_u64());
  if (::mkdirat(state->get(), name.c_str(), 0700) != 0)
    return util::Error::from_errno("make " + state_dir + "/" + name, errno);
  const std::string dir = state_dir + "/" + name;
  util::UniqueFd fd(::openat(state->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    ::unlinkat(state->get(), name.c_str(), AT_REMOVEDIR);
    return util::Error::from_errno("open " + dir, err);
  }
  if (!util::try_lock_file(fd.get())) {
    int err = errno;
    ::unlinkat(state->get(), name.c_str(), AT_REMOVEDIR);
    return util::Error::from_errno("lock " + dir, err);
  }
  JailNotes out(dir, std::move(*state), name, std::move(fd), hints, seen);
  if (auto ok = out.write(refusals_text({}, hints)); !ok) return ok.take_error();
  return out;
}

JailNotes::JailNotes(JailNotes&& o) noexcept
    : dir_(std::exchange(o.dir_, {})),
      state_(std::move(o.state_)),
      name_(std::move(o.name_)),
      fd_(std::move(o.fd_)),
      hints_(o.hints_),
      seen_(o.seen_),
      seen_entries_(o.seen_entries_),
      warned_(o.warned_) {}

JailNotes::~JailNotes() {
  if (dir_.empty() || !fd_.valid() || !state_.valid()) return;
  remove_notes_dir(state_.get(), name_, fd_.get());
}

// Only a new entry rewrites the file: at most kMaxEntries rewrites a run,
// however many connections the jail has refused.
void JailNotes::update(const netproxy::DecisionTable& table) {
  if (table.entries.size() == seen_entries_) return;
  seen_entries_ = table.entries.size();
  if (auto ok = write(refusals_text(table, hints_)); !ok && !warned_) {
    warned_ = true;
    util::warn("cannot update the jail's list of refusals ({}/{}): {}", jail_dir(), kFileName, ok.error().message());
  }
}

void JailNotes::show(runtime::Request& r) const {
  const char* why = "the network requests refused so far, read-only (pi-jail(1), NETWORK)";
  if (seen_ == NotesSeen::mounted)
    r.shown_files.push_back({std::string(kJailNotesDir), dir_, why, runtime::Node::directory});
  else
    r.grants.push_back({dir_, runtime::Access::read_only, why});
  r.env_set.emplace_back(kRefusalsVariable, jail_dir() + "/" + kFileName);
}

util::Status JailNotes::add_pi_guard(const std::string& pi_path, runtime::Request& r) {
  const std::string path = fmt::format("{}/{}/{}", dir_, kGuardDir, kGuardName);
  if (::mkdirat(fd_.get(), kGuardDir, 0700) != 0) return util::Error::from_errno("make " + path, errno);
  util::UniqueFd bin(::openat(fd_.get(), kGuardDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!bin.valid()) return util::Error::from_errno("open " + path, errno);
  auto tmp = util::TempFile::create(bin.get(), kGuardName);
  if (!tmp) return tmp.error();
  if (auto ok = tmp->fill(pi_guard_script(pi_path), util::Durability::page_cache, 0755); !ok) return ok;
  auto placed = tmp->publish(kGuardName);
  if (!placed) return placed.error();
  if (!*placed) return util::Error::from_errno("create " + path, EEXIST);
  r.path_guard = jail_dir() + "/" + kGuardDir;
  return {};
}

// A new file, then rename(2) over the old one: the jail reads the old
// list or the new one, never a part. Readable by the jail's user.
util::Result<void> JailNotes::write(const std::string& text) {
  auto tmp = util::TempFile::create(fd_.get(), kFileName);
  if (!tmp) return tmp.error();
  if (auto ok = tmp->fill(text, util::Durability::page_cache, 0644); !ok) return ok;
  return tmp->rename_over(kFileName);
}

}  // namespace pj::supervisor
