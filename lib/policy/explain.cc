#include "policy/explain.h"

#include <fmt/format.h>

#include "util/escape.h"
#include "util/json.h"

namespace pj::policy {

namespace {

const char* access_word(PathAccess a) { return a == PathAccess::read_write ? "read-write" : "read-only"; }

// Every filesystem entry as (kind, path, source), in the order applied.
struct FsRow {
  const char* kind;
  std::string path;
  const Source* src;
};

std::vector<FsRow> fs_rows(const Policy& p) {
  std::vector<FsRow> rows;
  for (const auto& s : p.system()) rows.push_back({"system", s.path, &s.src});
  for (const auto& g : p.grants()) rows.push_back({access_word(g.access), g.path, &g.src});
  for (const auto& r : p.read_only()) rows.push_back({"kept-read-only", r.path, &r.src});
  for (const auto& r : p.private_dirs()) rows.push_back({"private-copy", r.path, &r.src});
  for (const auto& r : p.write_back()) rows.push_back({"written-back", r.path, &r.src});
  for (const auto& r : p.sockets()) rows.push_back({"socket", r.path, &r.src});
  for (const auto& d : p.denies()) rows.push_back({"denied", d.path, &d.src});
  return rows;
}

// Where the scratch budget applies: the Linux jail's one tmpfs. The
// Seatbelt jail's TMPDIR is a directory on the host disk; the key means
// nothing there.
bool scratch_enforced(const ExplainInput& in) { return in.backend == "linux"; }

std::string scratch_words(const ExplainInput& in, const MemorySize& size) {
  std::string s = size.str();
  if (size.unit == MemorySize::Unit::percent_of_ram) s += " of RAM";
  if (!scratch_enforced(in)) s += " (no effect on macOS: TMPDIR is a private directory on the host disk)";
  return s;
}

}  // namespace

std::string explain_text(const ExplainInput& in) {
  std::string out;
  auto line = [&](std::string_view kind, std::string_view what, const Source& src) {
    out += fmt::format("  {:15} {:45} {}\n", kind, util::printable(what), util::printable(src.str()));
  };
  out += "layers (in order; later operators add, the project only asks):\n";
  for (const auto& l : in.layers)
    out += fmt::format("  {:22} {}{}\n", authority_name(l.authority), util::printable(l.name),
                       l.present ? "" : "  (absent)");
  if (in.policy) {
    const Policy& p = *in.policy;
    out += fmt::format("\nfilesystem (besides the workspace {} read-write and the built-in scratch mounts):\n",
                       util::printable(in.workspace));
    for (const auto& r : fs_rows(p)) line(r.kind, r.path, *r.src);
    out += "\nnetwork (the filter: HTTP proxy 127.0.0.1:3128, SOCKS5 127.0.0.1:1080 inside the jail; "
           "loopback rules with a port are forwarded):\n";
    if (p.net_allow().empty() && p.net_deny().empty()) out += "  (no rules)\n";
    for (const auto& r : p.net_allow())
      line("allow", r.private_ranges == PrivateRanges::allowed ? r.pattern.str() + " (allow_private)" : r.pattern.str(), r.src);
    for (const auto& r : p.net_deny()) line("deny", r.pattern.str(), r.src);
    for (const auto& r : p.publish())
      line("publish", fmt::format("host {}:{} -> jail 127.0.0.1:{}",
                                  r.spec.host_addr == "::1" ? "[::1]" : r.spec.host_addr, r.spec.host_port,
                                  r.spec.jail_port),
           r.src);
    for (const auto& r : p.ssh_hosts()) line("ssh", r.pattern.str() + " (git/ssh; its keys from known_hosts)", r.src);
    for (const auto& b : p.credential_hosts())
      line("bind", fmt::format("{} -> {}{}", b.credential, b.host.text,
                               b.host.text.starts_with("http://") ? " (plain HTTP, host loopback)" : " (TLS)"),
           b.host.src);
    out += "\nenvironment:\n";
    for (const auto& e : p.env_pass()) line("pass", e.name, e.src);
    for (const auto& e : p.env_set()) line("set", e.name + "=" + e.value, e.src);
    for (const auto& r : p.sockets())
      if (!r.env.empty()) line("set", r.env + "=" + r.path, r.src);
    out += "\nhardening:\n";
    line("landlock", choice_name(p.landlock()), p.landlock_src());
    line("ptrace", p.ptrace_allowed() ? "ALLOWED (unsafe_allow_ptrace)" : "denied", p.ptrace_src());
    line("nested-userns", p.nested_userns_allowed() ? "ALLOWED (unsafe_nested_user_namespaces)" : "denied",
         p.nested_userns_src());
    line("logins",
         p.credential_logins() == LoginWriteBack::write_back
             ? "write-back (a login made inside replaces yours without asking)"
             : "ask (a login made inside replaces yours only if you agree)",
         p.credential_logins_src());
    out += "\nhome ($HOME inside; never the real home):\n";
    line("persist", p.home_persists() ? "kept between runs in " + in.jail_home : "no: the run's own, discarded at the end",
         p.home_persist_src());
    out += scratch_enforced(in) ? "\nscratch (one tmpfs for /tmp, /var/tmp and /dev/shm together):\n"
                                : "\nscratch:\n";
    line("size", scratch_words(in, p.scratch()), p.scratch_src());
    out += "\nruntime:\n";
    line("compile-cache",
         !p.compile_cache()          ? "off"
         : in.backend == "linux"     ? "on (Node: read-only, made by a warm-up jail)"
                                     : "on (no effect on macOS yet)",
         p.compile_cache_src());
    out += "\nresource limits (the whole jail):\n";
    const bool linux = in.backend == "linux";
    line("processes", std::to_string(p.pids().value) + (linux ? "" : " (not applied on macOS)"), p.pids().src);
    if (p.memory()) line("memory", p.memory()->size.str() + " (needs a delegated cgroup)", p.memory()->src);
    else line("memory", "no limit", Source{"default", 0, 0});
    if (p.cpus()) line("cpus", cpus_str(p.cpus()->value) + " (needs a delegated cgroup)", p.cpus()->src);
    else line("cpus", "no limit", Source{"default", 0, 0});
    for (const auto& c : p.cgroups()) line("cgroup", c.path, c.src);
  }
  if (in.resolved) {
    out += "\nrefused requests:\n";
    if (in.resolved->refused.empty()) out += "  (none)\n";
    for (const auto& r : in.resolved->refused) out += "  " + util::printable(r.str()) + "\n";
    if (!in.resolved->errors.empty()) {
      out += "\nerrors (nothing runs until they are fixed):\n";
      for (const auto& e : in.resolved->errors) out += "  " + util::printable(e.str()) + "\n";
    }
  }
  return out;
}

std::string explain_json(const ExplainInput& in) {
  util::JsonWriter j;
  auto src = [&](const Source& s) {
    j.key("source").begin_object();
    j.field("file", s.file);
    j.field("line", s.line);
    j.field("column", s.column);
    j.end_object();
  };
  j.begin_object();
  j.field("schema", "pi-jail-explain/1");
  j.field("backend", in.backend);
  j.field("workspace", in.workspace);
  j.key("layers").begin_array();
  for (const auto& l : in.layers) {
    j.begin_object();
    j.field("authority", authority_name(l.authority));
    j.field("name", l.name);
    j.field("present", l.present);
    j.end_object();
  }
  j.end_array();
  if (in.policy) {
    const Policy& p = *in.policy;
    j.key("filesystem").begin_array();
    for (const auto& r : fs_rows(p)) {
      j.begin_object();
      j.field("kind", r.kind);
      j.field("path", r.path);
      src(*r.src);
      j.end_object();
    }
    j.end_array();
    auto rules = [&](const char* key, const std::vector<Policy::NetRule>& v) {
      j.key(key).begin_array();
      for (const auto& r : v) {
        j.begin_object();
        j.field("pattern", r.pattern.str());
        if (r.private_ranges == PrivateRanges::allowed) j.field("allow_private", true);
        src(r.src);
        j.end_object();
      }
      j.end_array();
    };
    j.key("network").begin_object();
    rules("allow", p.net_allow());
    rules("deny", p.net_deny());
    j.key("publish").begin_array();
    for (const auto& r : p.publish()) {
      j.begin_object();
      j.field("host_address", r.spec.host_addr);
      j.field("host_port", r.spec.host_port);
      j.field("jail_port", r.spec.jail_port);
      src(r.src);
      j.end_object();
    }
    j.end_array();
    j.key("ssh").begin_array();
    for (const auto& r : p.ssh_hosts()) {
      j.begin_object();
      j.field("host", r.pattern.host);
      j.field("port", r.pattern.port);
      src(r.src);
      j.end_object();
    }
    j.end_array();
    // Where the operators bind credentials (explain's only view of them
    // in JSON; absent when there are none).
    if (!p.credential_hosts().empty()) {
      j.key("credential_binds").begin_array();
      for (const auto& b : p.credential_hosts()) {
        const bool plain = b.host.text.starts_with("http://");
        j.begin_object();
        j.field("credential", b.credential);
        j.field("target", b.host.text);
        j.field("wire", plain ? "plain-http" : "tls");
        src(b.host.src);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
    j.key("env").begin_object();
    j.key("pass").begin_array();
    for (const auto& e : p.env_pass()) {
      j.begin_object();
      j.field("name", e.name);
      src(e.src);
      j.end_object();
    }
    j.end_array();
    j.key("set").begin_array();
    for (const auto& e : p.env_set()) {
      j.begin_object();
      j.field("name", e.name);
      j.field("value", e.value);
      src(e.src);
      j.end_object();
    }
    j.end_array();
    j.end_object();
    j.key("hardening").begin_object();
    j.field("landlock", choice_name(p.landlock()));
    j.field("ptrace", p.ptrace_allowed() ? "allowed" : "denied");
    j.field("nested_user_namespaces", p.nested_userns_allowed() ? "allowed" : "denied");
    j.field("logins", choice_name(p.credential_logins()));
    j.end_object();
    j.key("home").begin_object();
    j.field("persist", p.home_persists());
    j.field("path", p.home_persists() ? in.jail_home : "");
    src(p.home_persist_src());
    j.end_object();
    j.key("scratch").begin_object();
    j.field("size", p.scratch().str());
    j.field("enforced", scratch_enforced(in));
    j.key("places").begin_array();
    if (scratch_enforced(in))
      for (const char* place : {"/tmp", "/var/tmp", "/dev/shm"}) j.value(place);
    j.end_array();
    src(p.scratch_src());
    j.end_object();
    j.key("runtime").begin_object();
    j.field("compile_cache", p.compile_cache());
    src(p.compile_cache_src());
    j.end_object();
    j.key("limits").begin_object();
    j.key("pids").begin_object();
    j.field("value", static_cast<std::int64_t>(p.pids().value));
    src(p.pids().src);
    j.end_object();
    j.key("memory");
    if (p.memory()) {
      j.begin_object();
      j.field("value", p.memory()->size.str());
      src(p.memory()->src);
      j.end_object();
    } else {
      j.null();
    }
    j.key("cpus");
    if (p.cpus()) {
      j.begin_object();
      j.field("value", cpus_str(p.cpus()->value));
      src(p.cpus()->src);
      j.end_object();
    } else {
      j.null();
    }
    j.key("cgroup").begin_array();
    for (const auto& c : p.cgroups()) j.value(c.path);
    j.end_array();
    j.end_object();
  }
  j.key("refused").begin_array();
  if (in.resolved)
    for (const auto& r : in.resolved->refused) {
      j.begin_object();
      j.field("what", r.what);
      j.field("reason", r.reason);
      j.field("by", authority_name(r.by));
      src(r.request);
      if (r.limit) {
        j.key("limit").begin_object();
        j.field("file", r.limit->file);
        j.field("line", r.limit->line);
        j.field("column", r.limit->column);
        j.end_object();
      }
      j.end_object();
    }
  j.end_array();
  j.key("errors").begin_array();
  if (in.resolved)
    for (const auto& e : in.resolved->errors) {
      j.begin_object();
      j.field("message", e.message);
      src(e.where);
      j.end_object();
    }
  j.end_array();
  j.end_object();
  return j.str();
}

}  // namespace pj::policy
