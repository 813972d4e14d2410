#include "seatbelt/plan.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "seatbelt/sbpl.h"
#include "util/paths.h"
#include "view/view.h"

namespace pj::seatbelt {

using runtime::Access;
using util::Error;

namespace {

using view::fact;
bool present(const PathFact& f) { return view::usable(f); }

// A place the command may read (and maybe write): `filter` is subpath for
// a directory, literal for a file.
struct Root {
  std::string path;
  bool directory;
  Access access;
  std::string why;
  // Subtrees not readable through this root: a private directory's
  // subdirectories that hold write grants (Pi's sessions/, of which only
  // this workspace's directories are shown, each a root of its own).
  std::vector<std::string> hidden = {};
};

struct Mark {  // kept read-only, or masked
  std::string path;
  std::string why;
};

// Builds the generated part: names parameters, writes only fixed text.
class Writer {
public:
  std::string param(std::string_view prefix, std::string value, std::string why, bool indexed = true) {
    std::string name = indexed ? fmt::format("{}_{}", prefix, counters_[std::string(prefix)]++) : std::string(prefix);
    params_.push_back({name, std::move(value), std::move(why)});
    return name;
  }
  static std::string ref(std::string_view filter, const std::string& name) {
    return fmt::format("({} (param \"{}\"))", filter, name);
  }
  void line(std::string text) { text_ += text + "\n"; }
  std::string text_;
  std::vector<Param> params_;

private:
  std::map<std::string, int> counters_;
};

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

// Seatbelt's own places beyond the request's view: the run's TMPDIR, the
// private directories (read-only: the run's own copy is Linux only) and
// the program, each where it really is. A missing one is a problem.
struct OwnPlaces {
  std::vector<view::Place> places;              // `backend`: the index here
  size_t private_begin = 0, program_begin = 0;  // TMPDIR, private dirs, program
};

OwnPlaces own_places(const PlanInput& in, const Facts& facts, std::vector<std::string>& problems) {
  const auto& r = in.request;
  OwnPlaces own;
  std::vector<view::Place>& out = own.places;
  auto add = [&](const std::string& path, Access access, const std::string& why) {
    const PathFact& f = fact(facts, path);
    if (!present(f)) {
      problems.push_back(
          fmt::format("{} {}: {}", why, path,
                      f.kind == PathFact::Kind::absent ? "no such file or directory" : "not a file or directory"));
      return;
    }
    view::Place p;
    p.role = view::Role::structure;
    p.shows = view::Shows::host;
    p.path = f.resolved;
    p.source = f;
    p.access = access;
    p.node = f.kind == PathFact::Kind::directory ? runtime::Node::directory : runtime::Node::file;
    p.backend = out.size();
    p.why = why;
    out.push_back(std::move(p));
  };
  add(in.tmpdir, Access::read_write, "the run's private TMPDIR");
  own.private_begin = out.size();
  for (const auto& p : r.private_dirs)
    add(p.path, Access::read_only, p.why + " (read-only: the run's own copy is Linux only)");
  own.program_begin = out.size();
  if (!r.exec_path.empty()) add(r.exec_path, Access::read_only, "the program");
  return own;
}

// The view's places as profile roots, in the profile's order: the
// workspace, TMPDIR, system paths, private directories, grants, the
// program. One root per real path; read-write wins.
std::vector<Root> roots_of(const runtime::Request& r, const view::View& v, const OwnPlaces& own) {
  using view::Place;
  using view::Role;
  std::vector<Root> roots;
  auto add = [&](const Place& p) {
    const std::string& real = p.source.resolved;
    for (auto& x : roots) {
      if (x.path == real) {
        if (p.access == Access::read_write) x.access = p.access;
        return;
      }
    }
    roots.push_back({real, p.source.kind == PathFact::Kind::directory, p.access, p.why});
  };
  // What is not shown of a private directory: the subdirectories the
  // request hides, and the parents of the write grants inside it.
  auto hidden_in = [&](const std::string& private_dir) {
    std::vector<std::string> out;
    for (const auto& h : r.private_hidden)
      if (h != private_dir && util::path_within(h, private_dir)) out.push_back(h);
    for (const auto& g : v.places) {
      if (g.role != Role::grant || g.access != Access::read_write || !util::path_within(g.path, private_dir)) continue;
      std::string parent(util::parent_path(g.path));
      if (parent != private_dir && util::path_within(parent, private_dir) &&
          std::find(out.begin(), out.end(), parent) == out.end())
        out.push_back(std::move(parent));
    }
    return out;
  };
  auto each = [&](auto&& pick) {
    for (const auto& p : v.places)
      if (pick(p)) add(p);
  };
  auto own_in = [&](size_t begin, size_t end) {
    return [=](const Place& p) { return p.role == Role::structure && p.backend >= begin && p.backend < end; };
  };
  auto workspace = [&](const Place& p) { return p.role == Role::grant && p.path == r.workspace; };
  each(workspace);
  each(own_in(0, own.private_begin));
  each([](const Place& p) { return p.role == Role::system; });
  const size_t private_roots = roots.size();
  each(own_in(own.private_begin, own.program_begin));
  for (size_t i = private_roots; i < roots.size(); ++i) roots[i].hidden = hidden_in(roots[i].path);
  each([&](const Place& p) { return p.role == Role::grant && !workspace(p); });
  each(own_in(own.program_begin, own.places.size()));
  return roots;
}

// The file rules: the roots' parents may be looked at; each root is
// readable except masks below it, writable roots writable except kept
// paths and masks below them; then the kept paths, pins and masks once
// more as denials.
void write_file_rules(Writer& w, const std::vector<Root>& roots, const std::vector<Mark>& keep,
                      const std::vector<Mark>& masks, std::vector<std::string> pins) {
  // Parents of every root may be looked at (stat, realpath), not listed.
  std::set<std::string> ancestors;
  for (const auto& root : roots)
    for (std::string p(util::parent_path(root.path)); p != "/" && !p.empty(); p = std::string(util::parent_path(p)))
      ancestors.insert(p);
  if (!ancestors.empty()) {
    std::vector<std::string> lits;
    for (const auto& a : ancestors)
      lits.push_back(w.ref("literal", w.param("PARENT", a, "a parent of a readable path")));
    w.line("(allow file-read-metadata\n  " + join(lits, "\n  ") + ")");
  }

  // Each root: readable except masks below it; writable roots writable
  // except kept-read-only paths and masks below them. The exclusions are
  // in the rule itself (require-not), so they hold whatever the order.
  std::map<std::string, std::string> mark_param;  // path -> parameter, shared by every rule
  auto mark = [&](const std::string& prefix, const Mark& m) {
    auto key = prefix + "\n" + m.path;
    auto it = mark_param.find(key);
    if (it != mark_param.end()) return it->second;
    return mark_param[key] = w.param(prefix, m.path, m.why);
  };
  std::vector<std::pair<std::string, const Mark*>> keep_names, mask_names;
  for (const auto& m : keep) keep_names.emplace_back(mark("KEEP_RO", m), &m);
  for (const auto& m : masks) mask_names.emplace_back(mark("MASK", m), &m);

  auto rule = [&](std::string_view ops, const std::string& root_ref, const std::vector<std::string>& excluded) {
    if (excluded.empty()) return w.line(fmt::format("(allow {} {})", ops, root_ref));
    std::vector<std::string> parts{root_ref};
    for (const auto& e : excluded) parts.push_back("(require-not " + w.ref("subpath", e) + ")");
    w.line(fmt::format("(allow {}\n  (require-all\n    {}))", ops, join(parts, "\n    ")));
  };
  for (const auto& root : roots) {
    std::string name = w.param("ROOT", root.path, root.why);
    std::string ref = w.ref(root.directory ? "subpath" : "literal", name);
    auto below = [&](const std::vector<std::pair<std::string, const Mark*>>& list) {
      std::vector<std::string> out;
      if (!root.directory) return out;
      for (const auto& [n, m] : list)
        if (util::path_within(m->path, root.path)) out.push_back(n);
      return out;
    };
    std::vector<std::string> unreadable = below(mask_names);
    for (const auto& h : root.hidden) unreadable.push_back(w.param("HIDDEN", h, "shown only where granted below it"));
    rule("file-read*", ref, unreadable);
    if (root.access != Access::read_write) continue;
    std::vector<std::string> excluded = below(keep_names);
    for (const auto& n : below(mask_names)) excluded.push_back(n);
    rule("file-write*", ref, excluded);
  }
  std::sort(pins.begin(), pins.end());
  pins.erase(std::unique(pins.begin(), pins.end()), pins.end());

  // And once more as denials after every allow: the last matching rule wins.
  auto deny = [&](std::string_view ops, std::string_view filter, const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::vector<std::string> refs;
    for (const auto& n : names) refs.push_back(w.ref(filter, n));
    w.line(fmt::format("(deny {}\n  {})", ops, join(refs, "\n  ")));
  };
  std::vector<std::string> names;
  for (const auto& [n, m] : keep_names) names.push_back(n);
  deny("file-write*", "subpath", names);
  names.clear();
  for (const auto& p : pins) names.push_back(w.param("PIN", p, "holds a read-only path: not renamed or removed"));
  deny("file-write*", "literal", names);
  names.clear();
  for (const auto& [n, m] : mask_names) names.push_back(n);
  deny("file-read* file-write*", "subpath", names);
}

// The ports the jail may listen on: the login callbacks
// (runtime::Request::login_callbacks; its profile's adapter names them,
// nothing the jail or a project file says), each once. A port the policy
// forwards to a host service, or one of the filter's, is left out: the
// jail must not stand in for that service when it is down (on Linux the
// filter holds such a port inside the jail, so nothing there can listen
// on it). Port 0 is a problem: it would ask for any free port.
struct Listen {
  std::uint16_t port;
  const runtime::Request::LoginCallback* callback;
};
std::vector<Listen> listen_ports(const PlanInput& in, std::vector<std::string>& problems) {
  static_assert(std::is_same_v<decltype(runtime::Request::LoginCallback::port), std::uint16_t>,
                "a login callback port above 65535 cannot be said");
  std::vector<Listen> out;
  for (const auto& c : in.request.login_callbacks) {
    if (c.port == 0) {
      problems.push_back(fmt::format("login callback port 0 ({}, {}) is out of range", c.what, c.source));
      continue;
    }
    const bool forwarded = !runtime::login_callback_free(in.request, c.port);
    const bool filter = c.port == in.http_port || c.port == in.socks_port;
    const bool again = std::any_of(out.begin(), out.end(), [&](const Listen& l) { return l.port == c.port; });
    if (!forwarded && !filter && !again) out.push_back({c.port, &c});
  }
  return out;
}

// Network: TCP to the filter's two ports on localhost, and to the
// host-loopback services the policy names (Seatbelt can say only
// "localhost", which is 127.0.0.1 and ::1 alike). Listening: only on the
// login callback ports, on localhost, both families (Seatbelt names no
// one of them); every other bind, and every Unix socket, stays refused.
void write_network(Writer& w, const PlanInput& in, const std::vector<Listen>& listen) {
  std::vector<std::string> remotes;
  auto remote = [&](std::string name) { remotes.push_back("(remote tcp (param \"" + name + "\"))"); };
  remote(w.param("PROXY_HTTP", fmt::format("localhost:{}", in.http_port), "the network filter: HTTP proxy", false));
  remote(w.param("PROXY_SOCKS", fmt::format("localhost:{}", in.socks_port), "the network filter: SOCKS5 proxy", false));
  std::set<int> forward_ports;
  for (const auto& f : in.request.forwards) forward_ports.insert(f.port);
  for (int port : forward_ports)
    remote(w.param("FORWARD", fmt::format("localhost:{}", port), "a host-loopback service the policy names"));
  w.line("(allow network-outbound\n  " + join(remotes, "\n  ") + ")");
  if (listen.empty()) return;
  std::vector<std::string> locals;
  for (const auto& l : listen)
    locals.push_back("(local tcp (param \"" +
                     w.param("LOGIN_CALLBACK", fmt::format("localhost:{}", l.port),
                             fmt::format("{}: login callback ({})", l.callback->source, l.callback->what)) +
                     "\"))");
  w.line("(allow network-bind network-inbound\n  " + join(locals, "\n  ") + ")");
}

}  // namespace

std::vector<std::string> paths_to_probe(const PlanInput& in) {
  const auto& r = in.request;
  std::vector<std::string> out{r.workspace, r.cwd, in.tmpdir};
  auto shared = view::paths_to_probe(r);
  out.insert(out.end(), shared.begin(), shared.end());
  for (const auto& p : r.private_dirs) out.push_back(p.path);
  if (!r.exec_path.empty()) out.push_back(r.exec_path);
  return out;
}

util::Result<SeatbeltSpec> plan(const PlanInput& in, const Facts& facts) {
  const auto& r = in.request;
  std::vector<std::string> problems;

  // The shared view (view/view.h), with Seatbelt's own places; nothing is
  // shown at another path here.
  const OwnPlaces own = own_places(in, facts, problems);
  const view::View v = view::compute(r, own.places, facts, view::Copies::none);
  problems.insert(problems.end(), v.problems.begin(), v.problems.end());

  // Where the command may read, and write.
  const std::vector<Root> roots = roots_of(r, v, own);
  // Kept read-only: existing marks where they are; absent ones at their
  // first missing component, which cannot be created (nor made a link).
  // Masks where they are. Pins: the directories holding them.
  std::vector<Mark> keep, masks;
  std::vector<std::string> pins;
  for (const auto& p : v.places) {
    switch (p.role) {
      case view::Role::mark: keep.push_back({p.path, p.why}); break;
      case view::Role::placeholder:
        keep.push_back({p.source.resolved.empty() ? p.path : p.source.resolved, p.why});
        break;
      case view::Role::mask: masks.push_back({p.path, p.why}); break;
      case view::Role::pin: pins.push_back(p.path); break;
      default: break;
    }
  }
  // Every deny that exists is masked here, including those the view does
  // not show: the static base profile reads system trees (/System,
  // /Library/Developer/CommandLineTools, ...) that are no place of the
  // view, and a mask comes last in the profile, so it also wins over a
  // narrower grant inside it, as it always has on macOS.
  for (const auto& d : r.denies) {
    const PathFact& f = view::fact(facts, d.path);
    if (!view::usable(f)) continue;  // nothing there to hide
    if (std::none_of(masks.begin(), masks.end(), [&](const Mark& m) { return m.path == f.resolved; }))
      masks.push_back({f.resolved, d.why});
  }
  for (int port : {in.http_port, in.socks_port})
    if (port < 1 || port > 65535) problems.push_back(fmt::format("network filter port {} is out of range", port));
  for (const auto& [addr, port] : r.forwards)
    if (port < 1 || port > 65535)
      problems.push_back(fmt::format("forward {}:{}: port out of range", runtime::loopback_address(addr), port));
  const std::vector<Listen> listen = listen_ports(in, problems);
  if (!problems.empty()) return Error::invalid(join(problems, "; "));

  Writer w;
  w.line("");
  w.line("; ---- Made from the policy by pi-jail: fixed templates; every path and port");
  w.line("; ---- below is a parameter, passed to sandbox-exec with -D NAME=VALUE.");

  write_file_rules(w, roots, keep, masks, std::move(pins));

  if (!in.tty.empty())
    w.line("(allow file-read* file-write* file-ioctl " +
           w.ref("literal", w.param("TTY", in.tty, "the terminal pi-jail gives the command", false)) + ")");

  write_network(w, in, listen);

  SeatbeltSpec spec;
  spec.profile = std::string(base_profile()) + w.text_;
  spec.params = std::move(w.params_);
  std::vector<std::string> param_names;
  for (const auto& p : spec.params) param_names.push_back(p.name);
  if (auto st = check_profile(spec.profile, param_names); !st)
    return Error::invalid("the Seatbelt profile pi-jail made is malformed (a bug): " + st.error().message());

  spec.exec_path = r.exec_path;
  spec.argv = r.argv;
  spec.env =
      runtime::jail_env(r, in.tmpdir, runtime::ProxyEndpoints{"127.0.0.1", in.http_port, in.socks_port}, r.ca_bundle);
  const PathFact& cwd = fact(facts, r.cwd);
  bool cwd_readable = std::any_of(roots.begin(), roots.end(), [&](const Root& root) {
    return root.directory && util::path_within(cwd.resolved, root.path);
  });
  spec.cwd = present(cwd) && cwd_readable ? r.cwd : r.workspace;
  return spec;
}

std::vector<std::string> sandbox_exec_args(const SeatbeltSpec& spec, const std::string& sandbox_exec) {
  std::vector<std::string> args{sandbox_exec, "-p", spec.profile};
  for (const auto& p : spec.params) {
    args.push_back("-D");
    args.push_back(p.name + "=" + p.value);
  }
  args.push_back("--");
  args.push_back(spec.exec_path);
  args.insert(args.end(), spec.argv.begin() + (spec.argv.empty() ? 0 : 1), spec.argv.end());
  return args;
}

}  // namespace pj::seatbelt
