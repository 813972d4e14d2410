// The jail's filesystem view, backend-neutral: which host objects the
// jail sees where, which are read-only, masked, pinned or covered by a
// placeholder, each with its provenance. Computed once from the request
// (the resolved policy and what the supervisor staged) and the host's
// facts; the Linux mount plan (linuxjail/plan.h) and the Seatbelt profile
// (seatbelt/plan.h) only translate it. Pure: unit-tested without a host.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/request.h"
#include "view/facts.h"

namespace pj::view {

using runtime::Access;
using runtime::Node;
using runtime::PathRule;

// What the jail sees at a place and below it, up to a closer place.
enum class Shows {
  host,   // the host's object `source` (its resolved path, its inode)
  own,    // the jail's own directory at a host path (its persistent home):
          // the host's objects at the same paths are not shown, so nothing
          // there is masked, protected or pinned from the host
  fresh,  // no host object: a new file system the backend makes (its
          // structure, an ephemeral home)
  link,   // a symlink to `content`; decides nothing below it
  mask,   // an empty read-only object over the host's
};

// Where a place comes from (what the backend translates it as).
enum class Role {
  structure,      // the backend's own (index `backend` in its table)
  system,         // a system path ([paths] system)
  home,           // $HOME: the jail home (own), or the run's (fresh)
  private_root,   // a private directory: the run's copy at the host's path
  private_shown,  // a host entry shown read-only in a private directory's copy
  grant,          // the workspace or a path grant
  socket,         // a host unix socket, at its own path
  shown_file,     // a file pi-jail wrote, shown read-only at `path`
  mark,           // a read-only mark over the same object
  mask,           // a masked path
  placeholder,    // an absent protected path's first missing component
  ca_bundle,      // the run's CA bundle over a distribution bundle path
  pin,            // a directory holding a protected path: not renamed or removed
};

struct Place {
  Role role = Role::grant;
  Shows shows = Shows::host;
  std::string path;  // in the jail
  // host: the object shown at `path`; a system link: what it resolves to;
  // a placeholder: the fact of the absent path it covers (its real path).
  PathFact source;
  Access access = Access::read_only;
  Node node = Node::directory;
  std::string content;      // link: its target; a placeholder file: its content
  bool held = false;        // mark: inside a writable place, held while the jail runs
  std::size_t backend = 0;  // structure: the backend's own index for it
  std::string why;          // where it comes from, for messages and explain
};

class View {
public:
  // In the order made: of several places at one path the later one counts,
  // except that a mask always wins (deduped() says which).
  std::vector<Place> places;
  std::vector<std::string> problems;  // why the run cannot start, all of them
  // The distribution bundle path the run's CA bundle covers first, "" when
  // none (the request asked for none, or a problem says why).
  std::string ca_bundle_inside;

  // The place that decides what `path` is: the closest one at or above
  // it (links ignored), or nullptr.
  const Place* closest(std::string_view path) const;
  // Is the host's object shown at `path` (the closest place is a host one)?
  bool shows_host(std::string_view path) const;
  // Is `path` below a place of the jail's own (its home)?
  bool in_own(std::string_view path) const;
  // Is `path` below a writable host place (where the jail could create it)?
  bool writable(std::string_view path) const;
  // One place per path: a mask always wins; otherwise the later one.
  std::vector<Place> deduped() const;
};

// Whether the backend can show the jail something at a path other than
// the host object's own: a jail home at $HOME, the run's copy of a
// private directory, files pi-jail wrote, the run's CA bundle over the
// system's (the Linux jail binds them). Seatbelt cannot: every host object
// is seen at its own path or not at all, and $HOME is the real one.
enum class Copies { shown, none };

// The view for `r` on a host with `facts`. `structure` is what the backend
// itself adds, placed after the system paths (Linux: the scratch places,
// /run, /dev, /proc; Seatbelt: TMPDIR, the program, the private
// directories read-only). With Copies::shown, an ephemeral home (no
// home_source, home not "/") is a `fresh` home place. Problems go to
// View::problems.
View compute(const runtime::Request& r, const std::vector<Place>& structure, const Facts& facts,
             Copies copies = Copies::shown);

// Every host path compute() asks about (the backend adds its own).
std::vector<std::string> paths_to_probe(const runtime::Request& r);

// Exposed for the backends' own checks and for tests:

// The first missing component of absent `path` (its parent is a
// directory); "" when `path` lies under a file or nothing exists up to "/".
std::string first_missing(const Facts& facts, const std::string& path);

}  // namespace pj::view
