#include "policy/explain.h"

#include <algorithm>
#include <cstdint>
#include <variant>

#include <fmt/format.h>

#include "util/escape.h"
#include "util/json.h"

namespace pj::policy {

namespace {

// The model both renderers read: the explained policy as sections of
// rows. A row is one entry with everything said about it in one place:
// its text line (a kind, what it is, where it came from) and the fields of
// its JSON object (the source among them where the JSON has one). The
// renderers only lay rows out; neither knows what an entry is.

// One JSON value a row carries.
struct Value {
  std::variant<std::string, std::int64_t, bool, std::vector<std::string>, Source> v;
  // Constructors rather than the variant's own, so that a string literal
  // can never become a bool.
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(int n) : v(std::int64_t{n}) {}
  Value(std::int64_t n) : v(n) {}
  Value(bool b) : v(b) {}
  Value(std::vector<std::string> list) : v(std::move(list)) {}
  Value(Source src) : v(std::move(src)) {}  // {file, line, column}
};

struct Field {
  const char* key;
  Value value;
};

// How a row's text line reads.
enum class Line {
  columns,  // "  KIND WHAT SOURCE", in columns
  named,    // "  KIND WHAT", the kind in a wider column (a layer and its authority)
  message,  // "  WHAT" (a refused request, an error: the message names its source)
};

struct Row {
  Line line;
  std::string kind;           // one of our words, shown as it is
  std::string what;           // may come from the project file: shown through util::printable
  Source source;              // shown by Line::columns
  std::vector<Field> fields;  // its JSON; none: a line of the text only
};

// How a section holds its rows in the JSON.
enum class Shape {
  list,    // an array of one object per row
  values,  // an array of each row's one field's value
  record,  // one object of all rows' fields; null when no row has any (a limit not set)
  parts,   // an object of the parts, each under its key; in the text their rows follow one another
};

struct Section {
  const char* key;           // its member in the JSON
  std::string heading = "";  // in the text; empty: not in the text (a part, or nothing to say)
  Shape shape;
  std::vector<Row> rows = {};
  std::vector<Section> parts = {};  // Shape::parts
  bool json_when_empty = true;      // false: no member at all when there are no rows
};

// The usual entry: the text ends with its source, and so does its JSON object.
Row entry(std::string kind, std::string what, const Source& src, std::vector<Field> fields) {
  fields.push_back({"source", src});
  return {Line::columns, std::move(kind), std::move(what), src, std::move(fields)};
}

// An entry whose JSON has no source: the schema carries none there.
Row unsourced(std::string kind, std::string what, const Source& src, std::vector<Field> fields) {
  return {Line::columns, std::move(kind), std::move(what), src, std::move(fields)};
}

Row text_only(std::string kind, std::string what, const Source& src) {
  return {Line::columns, std::move(kind), std::move(what), src, {}};
}

Row named(std::string kind, std::string what, std::vector<Field> fields) {
  return {Line::named, std::move(kind), std::move(what), {}, std::move(fields)};
}

Row message(std::string what, std::vector<Field> fields) {
  return {Line::message, "", std::move(what), {}, std::move(fields)};
}

const Source kDefault{"default", 0, 0};

const char* access_word(PathAccess a) { return a == PathAccess::read_write ? "read-write" : "read-only"; }

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

Section layers_section(const std::vector<LayerInfo>& layers) {
  Section s{.key = "layers",
            .heading = "layers (in order; later operators add, the project only asks):",
            .shape = Shape::list};
  for (const auto& l : layers)
    s.rows.push_back(named(authority_name(l.authority), l.name + (l.present ? "" : "  (absent)"),
                           {{"authority", authority_name(l.authority)}, {"name", l.name}, {"present", l.present}}));
  return s;
}

// Every filesystem entry, in the order applied.
Section filesystem_section(const Policy& p, const std::string& workspace) {
  Section s{.key = "filesystem",
            .heading = fmt::format("filesystem (besides the workspace {} read-write and the built-in scratch mounts):",
                                   util::printable(workspace)),
            .shape = Shape::list};
  auto add = [&](const char* kind, const std::string& path, const Source& src) {
    s.rows.push_back(entry(kind, path, src, {{"kind", kind}, {"path", path}}));
  };
  for (const auto& r : p.system()) add("system", r.path, r.src);
  for (const auto& g : p.grants()) add(access_word(g.access), g.path, g.src);
  for (const auto& r : p.read_only()) add("kept-read-only", r.path, r.src);
  for (const auto& r : p.private_dirs()) add("private-copy", r.path, r.src);
  for (const auto& r : p.write_back()) add("written-back", r.path, r.src);
  for (const auto& r : p.sockets()) add("socket", r.path, r.src);
  for (const auto& r : p.denies()) add("denied", r.path, r.src);
  return s;
}

Section net_rules(const char* kind, const std::vector<Policy::NetRule>& rules) {
  Section s{.key = kind, .shape = Shape::list};
  for (const auto& r : rules) {
    if (r.private_ranges == PrivateRanges::allowed)
      s.rows.push_back(entry(kind, r.pattern.str() + " (allow_private)", r.src,
                             {{"pattern", r.pattern.str()}, {"allow_private", true}}));
    else
      s.rows.push_back(entry(kind, r.pattern.str(), r.src, {{"pattern", r.pattern.str()}}));
  }
  return s;
}

// How the jail's login callbacks reach the host's browser: the Linux
// supervisor serves the port on the host's loopback while the jail
// listens in its own network namespace (both families or neither); the
// Seatbelt jail shares the host's network stack, and its profile lets it
// listen there itself, on those ports only, for the whole run.
enum class LoginCallbacks { none, served, listened_on_host };
LoginCallbacks login_callbacks_on(const ExplainInput& in) {
  if (in.backend == "linux") return LoginCallbacks::served;
  if (in.backend == "macos-seatbelt") return LoginCallbacks::listened_on_host;
  return LoginCallbacks::none;
}
bool serves_login_callbacks(const ExplainInput& in) { return login_callbacks_on(in) != LoginCallbacks::none; }

Row login_callback_row(const ExplainInput& in, const ExplainInput::LoginCallback& c) {
  const bool macos = login_callbacks_on(in) == LoginCallbacks::listened_on_host;
  std::string what =
      macos ? fmt::format("host localhost:{} (127.0.0.1, ::1): the jail may listen there itself, all run long: {}",
                          c.port, c.what)
            : fmt::format("host 127.0.0.1:{} -> jail, while it listens there: {}", c.port, c.what);
  return entry("login-callback", std::move(what), Source{c.source, 0, 0},
               {{"port", c.port}, {"what", c.what}, {"jail_listens_on_host", macos}});
}

Section network_section(const Policy& p, const ExplainInput& in) {
  Section allow = net_rules("allow", p.net_allow());
  // The text says so first; in the JSON the empty lists say it.
  if (p.net_allow().empty() && p.net_deny().empty()) allow.rows.push_back(message("(no rules)", {}));
  Section publish{.key = "publish", .shape = Shape::list};
  for (const auto& r : p.publish()) {
    const auto& spec = r.spec;
    std::string host = spec.host_addr == "::1" ? "[::1]" : spec.host_addr;
    publish.rows.push_back(
        entry("publish", fmt::format("host {}:{} -> jail 127.0.0.1:{}", host, spec.host_port, spec.jail_port), r.src,
              {{"host_address", spec.host_addr}, {"host_port", spec.host_port}, {"jail_port", spec.jail_port}}));
  }
  // The JSON has them only for a backend that makes them reach the host, and only when there are some.
  Section logins{.key = "login_callbacks", .shape = Shape::list, .json_when_empty = false};
  if (serves_login_callbacks(in))
    for (const auto& c : in.login_callbacks) logins.rows.push_back(login_callback_row(in, c));
  // Absent from the JSON when the program does not log in.
  Section intercepts{.key = "login_endpoints", .shape = Shape::values, .json_when_empty = false};
  for (const auto& e : in.login_endpoints)
    intercepts.rows.push_back(unsourced("login-tls",
                                        e + " (TLS ends at the filter: a login's tokens become placeholders)",
                                        Source{in.login_endpoints_source, 0, 0}, {{"endpoint", e}}));
  Section ssh{.key = "ssh", .shape = Shape::list};
  for (const auto& r : p.ssh_hosts())
    ssh.rows.push_back(entry("ssh", r.pattern.str() + " (git/ssh; its keys from known_hosts)", r.src,
                             {{"host", r.pattern.host}, {"port", r.pattern.port}}));
  // Where the operators bind credentials (explain's only view of them in
  // JSON; absent when there are none).
  Section binds{.key = "credential_binds", .shape = Shape::list, .json_when_empty = false};
  for (const auto& b : p.credential_hosts()) {
    const bool plain = b.host.text.starts_with("http://");
    std::string what =
        fmt::format("{} -> {}{}", b.credential, b.host.text, plain ? " (plain HTTP, host loopback)" : " (TLS)");
    binds.rows.push_back(
        entry("bind", std::move(what), b.host.src,
              {{"credential", b.credential}, {"target", b.host.text}, {"wire", plain ? "plain-http" : "tls"}}));
  }
  // Absent from the JSON when none is set; its password never shown.
  Section upstream{.key = "upstream_proxy", .shape = Shape::record, .json_when_empty = false};
  if (const auto& up = p.upstream_proxy()) {
    const std::string url = up->url ? up->url->redacted() : "";
    std::string what =
        up->url ? url + " (CONNECT; the proxy resolves the names)" : "no HTTPS_PROXY set: connections go out directly";
    if (up->from_env) what = "env: " + (up->url ? up->url_var + "=" : "") + what;
    if (!up->no_proxy.empty()) what += "; " + up->no_proxy_var + "=" + up->no_proxy.str();
    // Pushed one by one: GCC 12 sees an uninitialised variant in a mixed
    // initializer list here (-Wmaybe-uninitialized).
    std::vector<Field> fields{{"url", url}};
    fields.push_back({"from_env", up->from_env});
    fields.push_back({"variable", up->url_var});
    fields.push_back({"no_proxy", up->no_proxy.str()});
    upstream.rows.push_back(entry("upstream-proxy", std::move(what), up->src, std::move(fields)));
  }
  return {.key = "network",
          .heading =
              "network (the filter: HTTP proxy 127.0.0.1:3128, SOCKS5 127.0.0.1:1080 inside the jail; "
              "loopback rules with a port are forwarded):",
          .shape = Shape::parts,
          .parts = {std::move(allow), net_rules("deny", p.net_deny()), std::move(publish), std::move(logins),
                    std::move(intercepts), std::move(ssh), std::move(binds), std::move(upstream)}};
}

Section env_section(const Policy& p) {
  Section pass{.key = "pass", .shape = Shape::list};
  for (const auto& e : p.env_pass()) pass.rows.push_back(entry("pass", e.name, e.src, {{"name", e.name}}));
  Section set{.key = "set", .shape = Shape::list};
  for (const auto& e : p.env_set())
    set.rows.push_back(entry("set", e.name + "=" + e.value, e.src, {{"name", e.name}, {"value", e.value}}));
  // A socket grant's variable: the JSON lists the socket under filesystem.
  for (const auto& r : p.sockets())
    if (!r.env.empty()) set.rows.push_back(text_only("set", r.env + "=" + r.path, r.src));
  return {.key = "env", .heading = "environment:", .shape = Shape::parts, .parts = {std::move(pass), std::move(set)}};
}

Section hardening_section(const Policy& p) {
  const bool ptrace = p.ptrace_allowed(), userns = p.nested_userns_allowed();
  const bool write_back = p.credential_logins() == LoginWriteBack::write_back;
  return {.key = "hardening",
          .heading = "hardening:",
          .shape = Shape::record,
          .rows = {unsourced("landlock", choice_name(p.landlock()), p.landlock_src(),
                             {{"landlock", choice_name(p.landlock())}}),
                   unsourced("ptrace", ptrace ? "ALLOWED (unsafe_allow_ptrace)" : "denied", p.ptrace_src(),
                             {{"ptrace", ptrace ? "allowed" : "denied"}}),
                   unsourced("nested-userns", userns ? "ALLOWED (unsafe_nested_user_namespaces)" : "denied",
                             p.nested_userns_src(), {{"nested_user_namespaces", userns ? "allowed" : "denied"}}),
                   unsourced("logins",
                             write_back ? "write-back (a login made inside replaces yours without asking)"
                                        : "ask (a login made inside replaces yours only if you agree)",
                             p.credential_logins_src(), {{"logins", choice_name(p.credential_logins())}})}};
}

Section home_section(const Policy& p, const std::string& jail_home) {
  const bool persists = p.home_persists();
  return {.key = "home",
          .heading = "home ($HOME inside; never the real home):",
          .shape = Shape::record,
          .rows = {entry("persist",
                         persists ? "kept between runs in " + jail_home : "no: the run's own, discarded at the end",
                         p.home_persist_src(), {{"persist", persists}, {"path", persists ? jail_home : ""}})}};
}

Section scratch_section(const Policy& p, const ExplainInput& in) {
  const bool enforced = scratch_enforced(in);
  std::vector<std::string> places;
  if (enforced) places = {"/tmp", "/var/tmp", "/dev/shm"};
  return {.key = "scratch",
          .heading = enforced ? "scratch (one tmpfs for /tmp, /var/tmp and /dev/shm together):" : "scratch:",
          .shape = Shape::record,
          .rows = {entry("size", scratch_words(in, p.scratch()), p.scratch_src(),
                         {{"size", p.scratch().str()}, {"enforced", enforced}, {"places", std::move(places)}})}};
}

Section runtime_section(const Policy& p, const std::string& backend) {
  const char* words = !p.compile_cache()   ? "off"
                      : backend == "linux" ? "on (Node: read-only, made by a warm-up jail)"
                                           : "on (no effect on macOS yet)";
  return {.key = "runtime",
          .heading = "runtime:",
          .shape = Shape::record,
          .rows = {entry("compile-cache", words, p.compile_cache_src(), {{"compile_cache", p.compile_cache()}})}};
}

// memory and cpus: enforced through a delegated cgroup; null in the JSON
// when not set.
Section cgroup_limit(const char* key, const std::string& value, const Source& src) {
  return {.key = key,
          .shape = Shape::record,
          .rows = {entry(key, value + " (needs a delegated cgroup)", src, {{"value", value}})}};
}

Section no_limit(const char* key) {
  return {.key = key, .shape = Shape::record, .rows = {text_only(key, "no limit", kDefault)}};
}

Section limits_section(const Policy& p, const std::string& backend) {
  const auto& pids = p.pids();
  std::string count = std::to_string(pids.value) + (backend == "linux" ? "" : " (not applied on macOS)");
  Section processes{
      .key = "pids",
      .shape = Shape::record,
      .rows = {entry("processes", std::move(count), pids.src, {{"value", static_cast<std::int64_t>(pids.value)}})}};
  Section cgroup{.key = "cgroup", .shape = Shape::values};
  for (const auto& c : p.cgroups()) cgroup.rows.push_back(unsourced("cgroup", c.path, c.src, {{"path", c.path}}));
  return {.key = "limits",
          .heading = "resource limits (the whole jail):",
          .shape = Shape::parts,
          .parts = {std::move(processes),
                    p.memory() ? cgroup_limit("memory", p.memory()->size.str(), p.memory()->src) : no_limit("memory"),
                    p.cpus() ? cgroup_limit("cpus", cpus_str(p.cpus()->value), p.cpus()->src) : no_limit("cpus"),
                    std::move(cgroup)}};
}

// Without a resolution the text says nothing of refusals and errors; the
// JSON's lists are empty.
Section refused_section(const Resolved* resolved) {
  Section s{.key = "refused", .heading = resolved ? "refused requests:" : "", .shape = Shape::list};
  if (!resolved) return s;
  if (resolved->refused.empty()) s.rows.push_back(message("(none)", {}));
  for (const auto& r : resolved->refused) {
    std::vector<Field> fields{
        {"what", r.what}, {"reason", r.reason}, {"by", authority_name(r.by)}, {"source", r.request}};
    if (r.limit) fields.push_back({"limit", *r.limit});
    s.rows.push_back(message(r.str(), std::move(fields)));
  }
  return s;
}

Section errors_section(const Resolved* resolved) {
  Section s{.key = "errors", .heading = "errors (nothing runs until they are fixed):", .shape = Shape::list};
  if (resolved)
    for (const auto& e : resolved->errors)
      s.rows.push_back(message(e.str(), {{"message", e.message}, {"source", e.where}}));
  if (s.rows.empty()) s.heading.clear();  // the text has no heading for no errors
  return s;
}

std::vector<Section> explain_model(const ExplainInput& in) {
  std::vector<Section> model;
  model.push_back(layers_section(in.layers));
  if (in.policy) {
    const Policy& p = *in.policy;
    model.push_back(filesystem_section(p, in.workspace));
    model.push_back(network_section(p, in));
    model.push_back(env_section(p));
    model.push_back(hardening_section(p));
    model.push_back(home_section(p, in.jail_home));
    model.push_back(scratch_section(p, in));
    model.push_back(runtime_section(p, in.backend));
    model.push_back(limits_section(p, in.backend));
  }
  model.push_back(refused_section(in.resolved));
  model.push_back(errors_section(in.resolved));
  return model;
}

void text_rows(std::string& out, const Section& s) {
  for (const Row& r : s.rows) {
    switch (r.line) {
      case Line::columns:
        out += fmt::format("  {:15} {:45} {}\n", r.kind, util::printable(r.what), util::printable(r.source.str()));
        break;
      case Line::named: out += fmt::format("  {:22} {}\n", r.kind, util::printable(r.what)); break;
      case Line::message: out += "  " + util::printable(r.what) + "\n"; break;
    }
  }
  for (const Section& part : s.parts) text_rows(out, part);
}

struct JsonValue {
  util::JsonWriter& j;
  void operator()(const std::string& s) const { j.value(s); }
  void operator()(std::int64_t n) const { j.value(n); }
  void operator()(bool b) const { j.value(b); }
  void operator()(const std::vector<std::string>& list) const {
    j.begin_array();
    for (const auto& item : list) j.value(item);
    j.end_array();
  }
  void operator()(const Source& src) const {
    j.begin_object().field("file", src.file).field("line", src.line).field("column", src.column).end_object();
  }
};

void json_value(util::JsonWriter& j, const Value& value) { std::visit(JsonValue{j}, value.v); }

void json_fields(util::JsonWriter& j, const Row& r) {
  for (const Field& f : r.fields) {
    j.key(f.key);
    json_value(j, f.value);
  }
}

void json_member(util::JsonWriter& j, const Section& s) {
  if (!s.json_when_empty && s.rows.empty()) return;
  j.key(s.key);
  auto in_json = [](const Row& r) { return !r.fields.empty(); };
  switch (s.shape) {
    case Shape::list:
      j.begin_array();
      for (const Row& r : s.rows)
        if (in_json(r)) {
          j.begin_object();
          json_fields(j, r);
          j.end_object();
        }
      j.end_array();
      break;
    case Shape::values:
      j.begin_array();
      for (const Row& r : s.rows)
        if (in_json(r)) json_value(j, r.fields.front().value);
      j.end_array();
      break;
    case Shape::record:
      if (std::none_of(s.rows.begin(), s.rows.end(), in_json)) {
        j.null();
        break;
      }
      j.begin_object();
      for (const Row& r : s.rows) json_fields(j, r);
      j.end_object();
      break;
    case Shape::parts:
      j.begin_object();
      for (const Section& part : s.parts) json_member(j, part);
      j.end_object();
      break;
  }
}

}  // namespace

std::string explain_text(const ExplainInput& in) {
  std::string out;
  for (const Section& s : explain_model(in)) {
    if (s.heading.empty()) continue;
    if (!out.empty()) out += '\n';
    out += s.heading + '\n';
    text_rows(out, s);
  }
  return out;
}

std::string explain_json(const ExplainInput& in) {
  util::JsonWriter j;
  j.begin_object();
  j.field("schema", "pi-jail-explain/1");
  j.field("backend", in.backend);
  j.field("workspace", in.workspace);  // the text names it in the filesystem heading
  for (const Section& s : explain_model(in)) json_member(j, s);
  j.end_object();
  return j.str();
}

}  // namespace pj::policy
