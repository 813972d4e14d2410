// pj-profile-gen OUT.cc: each profile embedded in pi-jail (profiles.h),
// loaded by load_layer exactly as a run loads it, written out as C++ that
// builds the same Layer: a run of the default profile then parses no TOML
// (parsing it, and the first use of toml++'s code, was a measurable part
// of every start; see the start-up benchmark). A profile with a problem
// stops the build. The unit tests check each built layer against
// load_layer's.
//
// Every field of Layer is written below; one added to Layer must be added
// here too (the unit test fails when an embedded profile sets it).
#include <cstdio>
#include <optional>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "policy/layer.h"
#include "policy/profiles.h"

namespace {

using namespace pj::policy;

// A C++ string literal holding exactly `s` (octal escapes: never greedy).
std::string lit(const std::string& s) {
  std::string out = "std::string(\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\{:03o}", c);
  }
  return out + fmt::format("\", {})", s.size());
}

std::string emit(const Source& s) { return fmt::format("Source{{{}, {}, {}}}", lit(s.file), s.line, s.column); }
std::string emit(const Entry& e) { return fmt::format("Entry{{{}, {}}}", lit(e.text), emit(e.src)); }
std::string emit(const Setting& s) {
  return fmt::format("Setting{{{}, {}, {}}}", lit(s.name), lit(s.value), emit(s.src));
}
std::string emit(const Flag& f) { return fmt::format("Flag{{{}, {}}}", f.value ? "true" : "false", emit(f.src)); }
std::string emit(const Choice<LandlockUse>& c) {
  return fmt::format("Choice<LandlockUse>{{static_cast<LandlockUse>({}), {}}}", static_cast<int>(c.value), emit(c.src));
}
std::string emit(const Choice<OnExcess>& c) {
  return fmt::format("Choice<OnExcess>{{static_cast<OnExcess>({}), {}}}", static_cast<int>(c.value), emit(c.src));
}
std::string emit(const Choice<LoginWriteBack>& c) {
  return fmt::format("Choice<LoginWriteBack>{{static_cast<LoginWriteBack>({}), {}}}", static_cast<int>(c.value),
                     emit(c.src));
}
std::string emit(const SizeSetting& s) {
  return fmt::format("SizeSetting{{MemorySize{{{}u, static_cast<MemorySize::Unit>({})}}, {}}}", s.size.value,
                     static_cast<int>(s.size.unit), emit(s.src));
}
std::string emit(const CountSetting& c) { return fmt::format("CountSetting{{{}u, {}}}", c.value, emit(c.src)); }
std::string emit(const UpstreamProxySetting& u) {
  std::string url = "std::nullopt";
  if (u.url)
    url = fmt::format("pj::net::ProxyUrl{{{}, {}, {}, {}}}", lit(u.url->host), u.url->port,
                      u.url->user ? "std::optional<std::string>(" + lit(*u.url->user) + ")" : "std::nullopt",
                      lit(u.url->password));
  return fmt::format("UpstreamProxySetting{{{}, {}}}", url, emit(u.src));
}
std::string emit(const Layer::CredentialHost& h) {
  return fmt::format("Layer::CredentialHost{{{}, {}}}", lit(h.credential), emit(h.host));
}

template <class T>
std::string emit(const std::vector<T>& v) {
  std::string out = "{";
  for (const auto& x : v) out += "\n      " + emit(x) + ",";
  return out + "}";
}

template <class T>
std::string emit(const std::optional<T>& o) {
  return o ? emit(*o) : std::string("std::nullopt");
}

std::string emit(const Limits& l) {
  std::ostringstream out;
  out << "[] {\n    Limits m;\n";
  out << "    m.read = " << (l.read ? "std::vector<Entry>" + emit(*l.read) : "std::nullopt") << ";\n";
  out << "    m.write = " << (l.write ? "std::vector<Entry>" + emit(*l.write) : "std::nullopt") << ";\n";
  out << "    m.network = " << (l.network ? "std::vector<Entry>" + emit(*l.network) : "std::nullopt") << ";\n";
  out << "    m.env = " << (l.env ? "std::vector<Entry>" + emit(*l.env) : "std::nullopt") << ";\n";
  out << "    m.scratch = " << emit(l.scratch) << ";\n";
  out << "    m.memory = " << emit(l.memory) << ";\n";
  out << "    m.pids = " << emit(l.pids) << ";\n";
  out << "    m.cpus = " << emit(l.cpus) << ";\n";
  out << "    m.cgroup = " << (l.cgroup ? "std::vector<Entry>" + emit(*l.cgroup) : "std::nullopt") << ";\n";
  out << "    m.src = " << emit(l.src) << ";\n";
  out << "    return m;\n  }()";
  return out.str();
}

// The entry lists as tables (text, line, column) that one small function
// turns into vectors: code per entry made the function 40 KiB, which a run
// reads in (footprint_test bounds the supervisor's memory).
std::string table(std::ostringstream& tables, const std::string& id, const std::vector<Entry>& v,
                  const std::string& file) {
  if (v.empty()) return "{}";
  for (const auto& e : v)
    if (e.src.file != file) return emit(v);  // not this layer's own file: written out whole
  tables << "constexpr Row " << id << "[] = {\n";
  for (const auto& e : v) {
    std::string text = lit(e.text);
    text = text.substr(std::string("std::string(").size());  // "...", N)
    text.pop_back();
    tables << "    {" << text << ", " << e.src.line << ", " << e.src.column << "},\n";
  }
  tables << "};\n";
  return "rows(" + id + ", std::size(" + id + "), file)";
}

std::string emit_layer(const Layer& l, size_t index, std::ostringstream& tables) {
  std::ostringstream out;
  out << "  const std::string file = " << lit(l.name) << ";\n";
  out << "  Layer l;\n";
  out << "  l.authority = static_cast<Authority>(" << static_cast<int>(l.authority) << ");\n";
  out << "  l.name = file;\n";
  // Every list of entries, then every other field.
  static constexpr std::pair<const char*, std::vector<Entry> Layer::*> kLists[] = {
      {"system", &Layer::system},
      {"read", &Layer::read},
      {"write", &Layer::write},
      {"deny", &Layer::deny},
      {"read_only", &Layer::read_only},
      {"private_dirs", &Layer::private_dirs},
      {"write_back", &Layer::write_back},
      {"sockets", &Layer::sockets},
      {"net_allow", &Layer::net_allow},
      {"net_deny", &Layer::net_deny},
      {"net_allow_private", &Layer::net_allow_private},
      {"publish", &Layer::publish},
      {"net_presets", &Layer::net_presets},
      {"env_pass", &Layer::env_pass},
      {"cred_pass_through", &Layer::cred_pass_through},
      {"cred_allow_minting", &Layer::cred_allow_minting},
  };
  for (const auto& [field, member] : kLists)
    out << "  l." << field << " = " << table(tables, fmt::format("k{}_{}", index, field), l.*member, l.name) << ";\n";
  out << "  l.home_persist = " << emit(l.home_persist) << ";\n";
  out << "  l.env_set = " << emit(l.env_set) << ";\n";
  out << "  l.cred_bind = " << emit(l.cred_bind) << ";\n";
  out << "  l.cred_logins = " << emit(l.cred_logins) << ";\n";
  out << "  l.upstream_proxy = " << emit(l.upstream_proxy) << ";\n";
  if (l.limits) out << "  l.limits = " << emit(*l.limits) << ";\n";
  out << "  l.landlock = " << emit(l.landlock) << ";\n";
  out << "  l.unsafe_allow_ptrace = " << emit(l.unsafe_allow_ptrace) << ";\n";
  out << "  l.unsafe_nested_user_namespaces = " << emit(l.unsafe_nested_user_namespaces) << ";\n";
  out << "  l.on_excess = " << emit(l.on_excess) << ";\n";
  out << "  l.compile_cache = " << emit(l.compile_cache) << ";\n";
  out << "  return l;\n";
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pj-profile-gen OUT.cc\n");
    return 2;
  }
  std::ostringstream tables, functions;
  std::vector<std::string> names;
  for (const auto& p : embedded_profiles()) {
    const std::string name(p.name);
    Loaded loaded = load_layer(p.text, built_in_profile_name(p.name), Authority::profile);
    if (!loaded.errors.empty()) {
      for (const auto& e : loaded.errors) std::fprintf(stderr, "pj-profile-gen: %s\n", e.str().c_str());
      return 1;
    }
    functions << "Layer layer_" << names.size() << "() {\n"
              << emit_layer(loaded.layer, names.size(), tables) << "}\n\n";
    names.push_back(name);
  }
  std::ostringstream out;
  out << "// Generated by pj-profile-gen (lib/policy/profile_gen.cc). Do not edit.\n"
         "#include <cstddef>\n#include <iterator>\n#include <optional>\n#include <string>\n#include <vector>\n\n"
         "#include \"policy/profiles.h\"\n\n"
         "namespace pj::policy {\n\nnamespace {\n\n"
         "struct Row {\n  const char* text;\n  std::size_t size;\n  int line, column;\n};\n\n"
         "[[gnu::noinline]] std::vector<Entry> rows(const Row* t, std::size_t n, const std::string& file) {\n"
         "  std::vector<Entry> out;\n  out.reserve(n);\n"
         "  for (std::size_t i = 0; i < n; ++i)\n"
         "    out.push_back({std::string(t[i].text, t[i].size), {file, t[i].line, t[i].column}});\n"
         "  return out;\n}\n\n"
      << tables.str() << "\n"
      << functions.str();
  out << "}  // namespace\n\nstd::optional<Layer> prebuilt_profile(std::string_view name) {\n";
  for (size_t i = 0; i < names.size(); ++i)
    out << "  if (name == \"" << names[i] << "\") return layer_" << i << "();\n";
  out << "  return std::nullopt;\n}\n\n}  // namespace pj::policy\n";
  FILE* f = std::fopen(argv[1], "w");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  const std::string text = out.str();
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok ? 0 : 1;
}
