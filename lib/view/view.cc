#include "view/view.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/paths.h"

namespace pj::view {

namespace {

using util::path_within;

Node node_of(const PathFact& f) { return f.kind == PathFact::Kind::directory ? Node::directory : Node::file; }

Place host_place(Role role, std::string path, const PathFact& f, Access access, std::string why) {
  Place p;
  p.role = role;
  p.shows = Shows::host;
  p.path = std::move(path);
  p.source = f;
  p.access = access;
  p.node = node_of(f);
  p.why = std::move(why);
  return p;
}

Place link_place(Role role, std::string path, std::string target, std::string why) {
  Place p;
  p.role = role;
  p.shows = Shows::link;
  p.path = std::move(path);
  p.content = std::move(target);
  p.why = std::move(why);
  return p;
}

Place mask_place(Role role, std::string path, Node node, std::string why) {
  Place p;
  p.role = role;
  p.shows = Shows::mask;
  p.path = std::move(path);
  p.node = node;
  p.why = std::move(why);
  return p;
}

// System paths: a symlink whose target lies in another system directory
// (merged /usr: /bin -> usr/bin) is recreated as the same symlink; other
// entries are shown read-only as what they resolve to; absent ones are
// skipped. Without copies, each is seen at its real path.
void add_system(const runtime::Request& r, const Facts& facts, Copies copies, View& v) {
  auto in_system_dir = [&](const std::string& target) {
    for (const auto& s : r.system) {
      const PathFact& f = fact(facts, s.path);
      if (!f.is_symlink && f.kind == PathFact::Kind::directory && path_within(target, s.path)) return true;
    }
    return false;
  };
  for (const auto& e : r.system) {
    const PathFact& f = fact(facts, e.path);
    if (!usable(f)) continue;
    if (copies == Copies::none) {  // seen where it really is
      v.places.push_back(host_place(Role::system, f.resolved, f, Access::read_only, e.why));
    } else if (f.is_symlink && in_system_dir(f.resolved)) {
      v.places.push_back(link_place(Role::system, e.path, f.link_target, e.why));
      v.places.back().source = f;
    } else {
      v.places.push_back(host_place(Role::system, e.path, f, Access::read_only, e.why));
    }
  }
}

// $HOME: the workspace's own jail home (kept between runs), or the run's
// own on a fresh file system.
void add_home(const runtime::Request& r, const Facts& facts, View& v) {
  if (r.home == "/" || r.home.empty()) return;
  if (r.home_source.empty()) {
    Place home;
    home.role = Role::home;
    home.shows = Shows::fresh;
    home.path = r.home;
    home.access = Access::read_write;
    home.why = "$HOME: this run's own, discarded at the end ([home] persist = false; the shared scratch budget)";
    v.places.push_back(std::move(home));
    return;
  }
  const PathFact& f = fact(facts, r.home_source);
  if (f.kind != PathFact::Kind::directory || f.is_symlink || f.resolved != r.home_source) {
    v.problems.push_back(
        fmt::format("$HOME: the jail home {} is not a directory (or changed after it was checked)", r.home_source));
    return;
  }
  Place home = host_place(Role::home, r.home, f, Access::read_write,
                          "$HOME: this workspace's own jail home, kept between runs ([home] persist)");
  home.shows = Shows::own;
  v.places.push_back(std::move(home));
}

// Private directories come before the grants: a grant inside one
// (sessions/) replaces the read-only entry for the same path.
void add_private_views(const runtime::Request& r, const Facts& facts, View& v) {
  for (const auto& pv : r.private_views) {
    const PathFact& own = fact(facts, pv.staging);
    if (own.kind != PathFact::Kind::directory || own.is_symlink) {
      v.problems.push_back(fmt::format("{}: its staging directory {} is not a directory", pv.path, pv.staging));
      continue;
    }
    v.places.push_back(host_place(Role::private_root, pv.path, own, Access::read_write,
                                  fmt::format("the run's own copy ({})", pv.why)));
    for (const auto& p : pv.shown) {
      const PathFact& f = fact(facts, p);
      if (!usable(f) || f.is_symlink) continue;
      v.places.push_back(host_place(Role::private_shown, p, f, Access::read_only,
                                    fmt::format("shown read-only in the run's copy ({})", pv.why)));
    }
    for (const auto& [path, target] : pv.links)
      v.places.push_back(link_place(Role::private_shown, path, target, fmt::format("the same link ({})", pv.why)));
  }
}

// The workspace and the path grants. They were resolved and checked
// (home, system directories, limits) before they were probed: one that
// resolves elsewhere now was changed in between (a jail beside this one
// can swap a directory for a link).
void add_grants(const runtime::Request& r, const Facts& facts, View& v) {
  std::vector<runtime::PathGrant> grants;
  grants.push_back({r.workspace, Access::read_write, "workspace"});
  grants.insert(grants.end(), r.grants.begin(), r.grants.end());
  for (const auto& g : grants) {
    const PathFact& f = fact(facts, g.path);
    if (!usable(f)) {
      v.problems.push_back(
          fmt::format("{} {}: {}", g.why, g.path,
                      f.kind == PathFact::Kind::absent ? "no such file or directory" : "not a file or directory"));
      continue;
    }
    if (f.is_symlink || f.resolved != g.path) {
      v.problems.push_back(
          fmt::format("{} {}: it now resolves to {}; it changed after it was checked", g.why, g.path, f.resolved));
      continue;
    }
    v.places.push_back(host_place(Role::grant, f.resolved, f, g.access, g.why));
  }
}

// Socket grants: the socket itself at its own path (connect(2) needs no
// write access), never through a symlink, never under a mask.
void add_sockets(const runtime::Request& r, const Facts& facts, View& v) {
  for (const auto& s : r.sockets) {
    const PathFact& f = fact(facts, s.path);
    if (f.is_symlink || (f.kind != PathFact::Kind::absent && f.resolved != s.path)) {
      v.problems.push_back(fmt::format("{} {}: a symlink ({}); grant the socket itself", s.why, s.path,
                                       f.resolved.empty() ? "to nothing" : "to " + f.resolved));
      continue;
    }
    if (f.kind != PathFact::Kind::socket) {
      v.problems.push_back(fmt::format("{} {}: {}", s.why, s.path,
                                       f.kind == PathFact::Kind::absent
                                           ? "no such socket (is the agent running? is the variable stale?)"
                                           : "not a unix socket"));
      continue;
    }
    auto masked =
        std::find_if(r.denies.begin(), r.denies.end(), [&](const PathRule& d) { return path_within(s.path, d.path); });
    if (masked != r.denies.end()) {
      v.problems.push_back(
          fmt::format("{} {}: it is under {}, which is denied ({})", s.why, s.path, masked->path, masked->why));
      continue;
    }
    Place p = host_place(Role::socket, s.path, f, Access::read_only, s.why);
    p.node = Node::file;
    v.places.push_back(std::move(p));
  }
}

// Files pi-jail wrote for the jail (its git config, the run's refusals
// directory), at their places.
void add_shown_files(const runtime::Request& r, const Facts& facts, View& v) {
  for (const auto& s : r.shown_files) {
    const PathFact& f = fact(facts, s.source);
    const auto kind = s.node == Node::directory ? PathFact::Kind::directory : PathFact::Kind::file;
    if (f.kind != kind || f.is_symlink || f.resolved != s.source) {
      v.problems.push_back(fmt::format("{} <- {}: not a {} of pi-jail's ({})", s.path, s.source,
                                       s.node == Node::directory ? "directory" : "regular file", s.why));
      continue;
    }
    v.places.push_back(host_place(Role::shown_file, s.path, f, Access::read_only, s.why));
  }
}

// The placeholder covering an absent protected path `path`. Git never
// records an empty directory, so a placeholder is an empty directory
// wherever `git add -A` could pick it up, except for the files git itself
// reads in a git dir: those are files whose content means what absence
// means (an empty config; "." for commondir: the git dir is its own
// common dir, which an empty commondir would not say: git dies on it).
Place placeholder_place(const std::string& path, Node node, const std::string& why) {
  Place cover = mask_place(Role::placeholder, path, Node::directory, why);
  const std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);
  if (node == Node::file &&
      (name == "config" || name == "config.worktree" || name == "commondir" || name == "gitdir")) {
    cover.node = Node::file;
    if (name == "commondir") cover.content = ".\n";
  }
  return cover;
}

// Protect one read-only mark `r`, or say why the run cannot start. Below a
// writable place the jail can change anything but mountpoints, so:
// - a symlink at the mark or in a directory between the place and the
//   mark stops the run (a symlink cannot be mounted over, and the jail
//   could repoint it);
// - an existing mark is shown read-only over itself, held;
// - an absent one is covered at its first missing component, so it cannot
//   be created, except under a missing `.git`: a repository the jail
//   creates is audited when the run ends (git/audit.h), not prevented.
void protect(const Facts& facts, const PathRule& r, View& v) {
  const PathFact& f = fact(facts, r.path);
  if (v.in_own(r.path)) return;  // not the host's
  // A link at a writable mark stops the run wherever it points, the
  // jail's own home included: the jail could replace the link itself.
  if (f.is_symlink && v.writable(r.path)) {
    v.problems.push_back(runtime::symlink_at_protected_path(r));
    return;
  }
  if (usable(f) && v.in_own(f.resolved)) return;  // not the host's
  if (!v.writable(r.path) && !(usable(f) && v.writable(f.resolved))) {
    if (usable(f) && v.shows_host(f.resolved))
      v.places.push_back(host_place(Role::mark, f.resolved, f, Access::read_only, r.why));
    return;
  }
  const Place* grant = v.closest(r.path);
  for (std::string p = r.path; grant && p != grant->path && p != "/"; p = std::string(util::parent_path(p))) {
    if (fact(facts, p).is_symlink) {
      if (p == r.path) {
        v.problems.push_back(runtime::symlink_at_protected_path(r));
      } else {
        v.problems.push_back(
            fmt::format("{} is a symlink, and {} below it must stay read-only ({}): replace the "
                        "link with what it points to, or remove it",
                        p, r.path, r.why));
      }
      return;
    }
  }
  if (usable(f)) {
    Place keep = host_place(Role::mark, f.resolved, f, Access::read_only, r.why);
    keep.held = true;
    v.places.push_back(std::move(keep));
    return;
  }
  std::string missing = first_missing(facts, r.path);
  if (missing.empty()) return;  // under a file: nothing can be made there
  if (missing != r.path && missing.ends_with("/.git")) return;
  v.places.push_back(placeholder_place(missing, missing == r.path ? r.node : Node::directory, r.why));
  v.places.back().source = fact(facts, missing);
}

void add_masks(const runtime::Request& r, const Facts& facts, View& v) {
  for (const auto& d : r.denies) {
    const PathFact& f = fact(facts, d.path);
    if (!usable(f)) continue;                                         // nothing there to hide
    if (!v.shows_host(f.resolved) || v.in_own(f.resolved)) continue;  // not in the view anyway
    v.places.push_back(mask_place(Role::mask, f.resolved, node_of(f), d.why));
  }
}

// The run's CA bundle, read-only over each distribution bundle path the
// view shows (a link there is covered where it points).
void add_ca_bundle(const runtime::Request& r, const Facts& facts, View& v) {
  if (r.ca_bundle.empty()) return;
  const PathFact& src = fact(facts, r.ca_bundle);
  if (src.kind != PathFact::Kind::file || src.is_symlink) {
    v.problems.push_back(fmt::format("the run's CA bundle {} is not a file", r.ca_bundle));
    return;
  }
  for (auto p : runtime::kCaBundlePaths) {
    const PathFact& f = fact(facts, p);
    if (f.kind != PathFact::Kind::file || !v.shows_host(f.resolved)) continue;
    v.places.push_back(host_place(Role::ca_bundle, f.resolved, src, Access::read_only,
                                  "the system's CAs and the run's CA (credentials)"));
    if (v.ca_bundle_inside.empty()) v.ca_bundle_inside = std::string(p);
  }
  if (v.ca_bundle_inside.empty())
    v.problems.push_back(
        "no CA bundle to cover in the jail's view (/etc/ssl/certs/ca-certificates.crt, "
        "/etc/pki/tls/certs/ca-bundle.crt or /etc/ssl/cert.pem): the jail could not trust the "
        "credential filter; install ca-certificates");
}

// A read-only place or a mask inside a writable one is a mountpoint (or,
// under Seatbelt, a path denied by its own rule), so it cannot itself be
// renamed or removed, but its parent directories could: `mv .git .git2;
// mkdir -p .git/hooks` would leave the host a new, writable hooks
// directory. Each directory between the writable place and the protected
// one is pinned: bound over itself on Linux (rename(2) and rmdir(2) of a
// mountpoint in the caller's mount namespace fail with EBUSY: vfs_rename,
// is_local_mountpoint), denied rename and removal under Seatbelt.
void pin_ancestors(const Facts& facts, View& v) {
  std::vector<Place> pins;
  auto taken = [&](const std::string& path) {
    auto same = [&](const Place& o) { return o.path == path; };
    return std::any_of(v.places.begin(), v.places.end(), same) || std::any_of(pins.begin(), pins.end(), same);
  };
  for (const auto& p : v.places) {
    bool protects = p.shows == Shows::mask || (p.shows == Shows::host && p.access == Access::read_only);
    if (!protects || p.path == "/") continue;
    std::string parent(util::parent_path(p.path));
    const Place* above = v.closest(parent);
    if (!above || above->shows != Shows::host || above->access != Access::read_write) continue;
    for (std::string dir = parent; dir != above->path && dir != "/"; dir = std::string(util::parent_path(dir))) {
      const PathFact& f = fact(facts, dir);
      if (f.kind != PathFact::Kind::directory || f.is_symlink || f.resolved != dir || taken(dir)) continue;
      pins.push_back(host_place(Role::pin, dir, f, Access::read_write,
                                fmt::format("pinned: holds {} (cannot be renamed or removed)", p.path)));
    }
  }
  for (auto& p : pins) v.places.push_back(std::move(p));
}

}  // namespace

const Place* View::closest(std::string_view path) const {
  const Place* best = nullptr;
  for (const auto& p : places) {
    if (p.shows == Shows::link) continue;
    if (path_within(path, p.path) && (!best || p.path.size() >= best->path.size())) best = &p;
  }
  return best;
}

bool View::shows_host(std::string_view path) const {
  const Place* p = closest(path);
  return p && p->shows == Shows::host;
}

bool View::in_own(std::string_view path) const {
  const Place* p = closest(path);
  return p && p->shows == Shows::own;
}

bool View::writable(std::string_view path) const {
  const Place* p = closest(path);
  return p && p->shows == Shows::host && p->access == Access::read_write;
}

std::vector<Place> View::deduped() const {
  std::vector<Place> out;
  for (const auto& p : places) {
    auto same = std::find_if(out.begin(), out.end(), [&](const Place& o) { return o.path == p.path; });
    if (same == out.end())
      out.push_back(p);
    else if (same->shows != Shows::mask)
      *same = p;
  }
  return out;
}

std::string first_missing(const Facts& facts, const std::string& path) {
  std::string missing = path;
  while (true) {
    std::string parent(util::parent_path(missing));
    const PathFact& pf = fact(facts, parent);
    if (pf.kind == PathFact::Kind::directory) return missing;
    if (pf.kind != PathFact::Kind::absent || parent == "/") return "";
    missing = parent;
  }
}

std::vector<std::string> paths_to_probe(const runtime::Request& r) {
  std::vector<std::string> out;
  for (const auto& e : r.system) out.push_back(e.path);
  out.push_back(r.workspace);
  for (const auto& g : r.grants) out.push_back(g.path);
  for (const auto& s : r.sockets) out.push_back(s.path);
  if (!r.home_source.empty()) out.push_back(r.home_source);
  for (const auto& s : r.shown_files) out.push_back(s.source);
  for (const auto& v : r.private_views) {
    out.push_back(v.staging);
    out.insert(out.end(), v.shown.begin(), v.shown.end());
  }
  // Marks and masks, and their parents (pins and placeholders ask about them).
  auto with_ancestors = [&](const std::string& path) {
    for (std::string p = path; p != "/"; p = std::string(util::parent_path(p))) out.push_back(p);
  };
  for (const auto& d : r.denies) with_ancestors(d.path);
  if (!r.ca_bundle.empty()) {
    out.push_back(r.ca_bundle);
    for (auto p : runtime::kCaBundlePaths) out.emplace_back(p);
  }
  for (const auto& m : r.read_only) with_ancestors(m.path);
  return out;
}

View compute(const runtime::Request& r, const std::vector<Place>& structure, const Facts& facts, Copies copies) {
  View v;
  const bool shown = copies == Copies::shown;
  add_system(r, facts, copies, v);
  v.places.insert(v.places.end(), structure.begin(), structure.end());
  if (shown) add_home(r, facts, v);
  if (shown) add_private_views(r, facts, v);
  add_grants(r, facts, v);
  add_sockets(r, facts, v);
  if (shown) add_shown_files(r, facts, v);
  for (const auto& m : r.read_only) protect(facts, m, v);
  add_masks(r, facts, v);
  if (shown) add_ca_bundle(r, facts, v);
  pin_ancestors(facts, v);
  return v;
}

}  // namespace pj::view
