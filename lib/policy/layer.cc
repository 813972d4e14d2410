#include "policy/layer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <tuple>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace pj::policy {

namespace {

constexpr size_t kMaxFileSize = 1 << 20;

// The schema: which keys each table may have.
const std::map<std::string, std::set<std::string>, std::less<>> kSchema = {
    {"filesystem", {"system", "read", "write", "deny", "read_only", "private", "write_back"}},
    {"network", {"allow", "deny"}},
    {"env", {"pass", "set"}},
    {"limits", {"read", "write", "network", "env", "scratch"}},
    {"hardening", {"landlock", "unsafe_allow_ptrace", "unsafe_nested_user_namespaces"}},
    {"policy", {"on_excess"}},
    {"credentials", {"bind", "pass_through"}},
};

class Loader {
public:
  Loader(const std::string& name, Authority authority) { out_.layer.name = name, out_.layer.authority = authority; }

  Source at(const toml::source_region& r) const {
    return Source{out_.layer.name, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
  }
  Source at(const toml::node& n) const { return at(n.source()); }
  Source at(const toml::key& k) const { return at(k.source()); }
  void error(const toml::node& n, std::string msg) { out_.errors.push_back({at(n), std::move(msg)}); }
  void error(const toml::key& k, std::string msg) { out_.errors.push_back({at(k), std::move(msg)}); }

  std::vector<Entry> strings(const toml::node& n, std::string_view where) {
    std::vector<Entry> out;
    const toml::array* arr = n.as_array();
    if (!arr) {
      error(n, fmt::format("{} must be an array of strings", where));
      return out;
    }
    for (const toml::node& item : *arr) {
      if (auto s = item.value<std::string>(); s && item.is_string()) {
        if (s->empty()) error(item, fmt::format("{}: empty string", where));
        else if (s->find('\0') != std::string::npos) error(item, fmt::format("{}: NUL byte in string", where));
        else out.push_back({*s, at(item)});
      } else {
        error(item, fmt::format("{} must contain only strings", where));
      }
    }
    return out;
  }

  std::optional<Entry> one_of(const toml::node& n, std::string_view where, std::initializer_list<const char*> allowed) {
    auto s = n.value<std::string>();
    if (!n.is_string() || !s) {
      error(n, fmt::format("{} must be a string", where));
      return std::nullopt;
    }
    for (const char* a : allowed)
      if (*s == a) return Entry{*s, at(n)};
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
    error(n, fmt::format("{} must be one of {}", where, list));
    return std::nullopt;
  }

  std::optional<Flag> flag(const toml::node& n, std::string_view where) {
    if (!n.is_boolean()) {
      error(n, fmt::format("{} must be true or false", where));
      return std::nullopt;
    }
    return Flag{*n.value<bool>(), at(n)};
  }

  std::optional<SizeSetting> memory_size(const toml::node& n, std::string_view where) {
    auto s = n.value<std::string>();
    if (!n.is_string() || !s) {
      error(n, fmt::format("{} must be a string (\"2G\", \"512M\", \"25%\")", where));
      return std::nullopt;
    }
    std::string why;
    auto size = parse_memory_size(*s, why);
    if (!size) {
      error(n, fmt::format("{} \"{}\": {}", where, *s, why));
      return std::nullopt;
    }
    return SizeSetting{*size, at(n)};
  }

  // [network] allow: strings, or { host = "PATTERN", allow_private = BOOL }
  // tables; the entries with allow_private = true go to `private_ranges` too.
  void net_allow_entries(const toml::node& n, std::string_view where, std::vector<Entry>& out,
                         std::vector<Entry>& private_ranges) {
    const toml::array* arr = n.as_array();
    if (!arr) return error(n, fmt::format("{} must be an array", where));
    for (const toml::node& item : *arr) {
      const toml::table* t = item.as_table();
      if (!t) {
        auto s = item.value<std::string>();
        if (!item.is_string() || !s)
          error(item, fmt::format("{} must contain strings or {{ host = \"...\", allow_private = true }} tables", where));
        else if (s->empty()) error(item, fmt::format("{}: empty string", where));
        else if (s->find('\0') != std::string::npos) error(item, fmt::format("{}: NUL byte in string", where));
        else out.push_back({*s, at(item)});
        continue;
      }
      std::optional<Entry> host;
      std::optional<Flag> private_flag;
      for (auto&& [k, v] : *t) {
        if (k.str() == "host") {
          auto s = v.value<std::string>();
          if (!v.is_string() || !s || s->empty() || s->find('\0') != std::string::npos)
            error(v, fmt::format("{}: host must be a non-empty string", where));
          else host = Entry{*s, at(v)};
        } else if (k.str() == "allow_private") {
          private_flag = flag(v, fmt::format("{}: allow_private", where));
        } else {
          error(k, fmt::format("{}: unknown key \"{}\" (known: host, allow_private)", where, k.str()));
        }
      }
      if (!host) {
        error(item, fmt::format("{}: a table needs host = \"PATTERN\"", where));
        continue;
      }
      host->src = at(item);
      out.push_back(*host);
      if (private_flag && private_flag->value) private_ranges.push_back(*host);
    }
  }

  void network_patterns(std::vector<Entry>& entries) {
    for (auto& e : entries) {
      std::string why;
      auto p = parse_net_pattern(e.text, why);
      if (!p) out_.errors.push_back({e.src, fmt::format("bad network pattern \"{}\": {}", e.text, why)});
      else e.text = p->str();
    }
  }

  void table(std::string_view name, const toml::table& t) {
    Layer& l = out_.layer;
    const auto& keys = kSchema.find(name)->second;
    for (auto&& [k, v] : t) {
      std::string key(k.str());
      std::string where = fmt::format("{}.{}", name, key);
      if (!keys.count(key)) {
        error(k, fmt::format("unknown key \"{}\" in [{}] (known: {})", key, name, fmt::join(keys, ", ")));
        continue;
      }
      if (name == "filesystem") {
        auto list = strings(v, where);
        auto& dst = key == "system" ? l.system : key == "read" ? l.read : key == "write" ? l.write
                  : key == "deny" ? l.deny : key == "private" ? l.private_dirs : key == "write_back" ? l.write_back
                  : l.read_only;
        dst.insert(dst.end(), list.begin(), list.end());
      } else if (name == "network") {
        std::vector<Entry> list, private_ranges;
        if (key == "allow") net_allow_entries(v, where, list, private_ranges);
        else list = strings(v, where);
        network_patterns(list);
        network_patterns(private_ranges);
        auto& dst = key == "allow" ? l.net_allow : l.net_deny;
        dst.insert(dst.end(), list.begin(), list.end());
        l.net_allow_private.insert(l.net_allow_private.end(), private_ranges.begin(), private_ranges.end());
      } else if (name == "env") {
        if (key == "pass") {
          auto list = strings(v, where);
          for (auto& e : list) check_env_name(e, /*glob=*/true);
          l.env_pass.insert(l.env_pass.end(), list.begin(), list.end());
        } else if (const toml::table* set = v.as_table()) {
          for (auto&& [name2, value] : *set) {
            auto s = value.value<std::string>();
            if (!value.is_string() || !s) {
              error(value, fmt::format("env.set.{} must be a string", name2.str()));
              continue;
            }
            Entry e{std::string(name2.str()), at(name2)};
            if (check_env_name(e, /*glob=*/false)) l.env_set.push_back({e.text, *s, e.src});
          }
        } else {
          error(v, "env.set must be a table of NAME = \"value\"");
        }
      } else if (name == "limits") {
        if (!l.limits) l.limits = Limits{};
        l.limits->src = at(t);
        if (key == "scratch") {
          l.limits->scratch = memory_size(v, where);
          continue;
        }
        auto list = strings(v, where);
        if (key == "network") network_patterns(list);
        if (key == "env")
          for (auto& e : list) check_env_name(e, true);
        (key == "read" ? l.limits->read : key == "write" ? l.limits->write
         : key == "network" ? l.limits->network : l.limits->env) = std::move(list);
      } else if (name == "hardening") {
        if (key == "landlock") l.landlock = one_of(v, where, {"if-available", "required"});
        else if (key == "unsafe_allow_ptrace") l.unsafe_allow_ptrace = flag(v, where);
        else l.unsafe_nested_user_namespaces = flag(v, where);
      } else if (name == "policy") {
        l.on_excess = one_of(v, where, {"warn", "error"});
      } else if (name == "credentials") {
        credentials(key, v, where);
      }
    }
  }

  // [credentials] bind = { CREDENTIAL = ["host", "host:port"] }, where
  // CREDENTIAL is a provider name or an environment variable name; and
  // pass_through = ["NAME", ...].
  void credentials(const std::string& key, const toml::node& v, const std::string& where) {
    Layer& l = out_.layer;
    if (key == "pass_through") {
      for (auto& e : strings(v, where))
        if (check_env_name(e, /*glob=*/false)) l.cred_pass_through.push_back(std::move(e));
      return;
    }
    const toml::table* t = v.as_table();
    if (!t) return error(v, "credentials.bind must be a table of CREDENTIAL = [\"host\", ...]");
    for (auto&& [name, hosts] : *t) {
      std::string cred(name.str());
      if (cred.empty() || cred.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") !=
                              std::string::npos) {
        error(name, fmt::format("credentials.bind: \"{}\" is neither a provider nor an environment variable name",
                                cred));
        continue;
      }
      for (auto& e : strings(hosts, fmt::format("credentials.bind.{}", cred))) {
        std::string why;
        auto p = parse_net_pattern(e.text, why);
        if (!p) error_at(e.src, fmt::format("credentials.bind.{}: bad host \"{}\": {}", cred, e.text, why));
        else if (p->wildcard) error_at(e.src, fmt::format("credentials.bind.{}: \"{}\": a credential is bound to "
                                                          "named hosts, not to a wildcard", cred, e.text));
        else l.cred_bind.push_back({cred, Entry{p->str(), e.src}});
      }
    }
  }
  void error_at(const Source& s, std::string msg) { out_.errors.push_back({s, std::move(msg)}); }

  bool check_env_name(const Entry& e, bool glob) {
    std::string_view n = e.text;
    if (glob && n.ends_with("*")) n.remove_suffix(1);
    bool ok = !n.empty() && n.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                                std::string_view::npos;
    if (!ok)
      out_.errors.push_back({e.src, fmt::format("\"{}\" is not an environment variable name{}", e.text,
                                                glob ? " (or NAME* prefix)" : "")});
    return ok;
  }

  Loaded finish(const toml::table& root) {
    for (auto&& [k, v] : root) {
      std::string key(k.str());
      if (!kSchema.count(key)) {
        error(k, fmt::format("unknown table [{}] (known: filesystem, network, env, limits, hardening, policy, credentials)", key));
        continue;
      }
      if (const toml::table* t = v.as_table()) table(key, *t);
      else error(v, fmt::format("\"{}\" must be a table ([{}])", key, key));
    }
    // toml++ walks keys in sorted order; report in file order.
    std::stable_sort(out_.errors.begin(), out_.errors.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
    });
    return std::move(out_);
  }

  Loaded& out() { return out_; }

private:
  Loaded out_;
};

}  // namespace

std::string Source::str() const {
  if (line == 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

const char* authority_name(Authority a) {
  switch (a) {
    case Authority::profile: return "profile";
    case Authority::system: return "system operator file";
    case Authority::user: return "user operator file";
    case Authority::command_line: return "command line";
    case Authority::project: return "project file";
    case Authority::git_worktree: return "git worktree";
  }
  return "?";
}

Loaded load_layer(std::string_view text, const std::string& name, Authority authority) {
  Loader loader(name, authority);
  try {
    toml::table root = toml::parse(text, name);
    return loader.finish(root);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    loader.out().errors.push_back(
        {Source{name, static_cast<int>(b.line), static_cast<int>(b.column)}, std::string(e.description())});
    return std::move(loader.out());
  }
}

Loaded load_file(const std::string& path, Authority authority, Presence presence) {
  Loaded out;
  out.layer.name = path;
  out.layer.authority = authority;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && presence == Presence::optional) return out;
    out.errors.push_back({Source{path, 0, 0}, fmt::format("cannot read: {}", std::strerror(errno))});
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.errors.push_back({Source{path, 0, 0}, "not a regular file"});
    return out;
  }
  if (static_cast<size_t>(st.st_size) > kMaxFileSize) {
    out.errors.push_back({Source{path, 0, 0}, fmt::format("{} bytes: policy files are limited to 1 MiB", st.st_size)});
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.push_back({Source{path, 0, 0}, fmt::format("cannot read: {}", std::strerror(errno))});
    return out;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return load_layer(ss.str(), path, authority);
}

std::string MemorySize::str() const {
  if (unit == Unit::percent_of_ram) return fmt::format("{}%", value);
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  std::uint64_t v = value;
  size_t u = 0;
  while (u + 1 < std::size(kUnits) && v % 1024 == 0) v /= 1024, ++u;
  return fmt::format("{}{}", v, kUnits[u]);
}

std::optional<std::uint64_t> MemorySize::bytes(std::uint64_t ram) const {
  if (unit == Unit::bytes) return value;
  if (ram == 0) return std::nullopt;
  return ram / 100 * value + ram % 100 * value / 100;  // no overflow for value <= 100
}

std::optional<MemorySize> parse_memory_size(std::string_view text, std::string& error) {
  const std::string_view usage = "expected a size such as \"2G\", \"512M\" or \"25%\" (of RAM)";
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view suffix = text.substr(digits);
  if (digits == 0 || suffix.size() > 1) return error = usage, std::nullopt;
  std::uint64_t n = 0;
  for (char c : text.substr(0, digits)) {
    if (n > (UINT64_MAX - 9) / 10) return error = "too large", std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n == 0) return error = "0 would be no limit at all for a tmpfs; give a size", std::nullopt;
  MemorySize out;
  if (suffix == "%") {
    if (n > 100) return error = "a share of RAM goes from 1% to 100%", std::nullopt;
    out.value = n;
    out.unit = MemorySize::Unit::percent_of_ram;
    return out;
  }
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: return error = usage, std::nullopt;
    }
  }
  if (n > (UINT64_MAX >> shift) >> 1) return error = "too large", std::nullopt;  // stays below 2^63
  out.value = n << shift;
  out.unit = MemorySize::Unit::bytes;
  return out;
}

std::string NetPattern::str() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port ? fmt::format("{}:{}", h, port) : h;
}

std::optional<NetPattern> parse_net_pattern(std::string_view text, std::string& error) {
  NetPattern p;
  std::string_view host = text, port;
  if (text.starts_with("[")) {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return error = "unclosed [", std::nullopt;
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return error = "expected :PORT after ]", std::nullopt;
      port = rest.substr(1);
    }
    if (host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos || host.empty())
      return error = "not an IPv6 address", std::nullopt;
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      if (text.find(':') != colon) return error = "IPv6 addresses go in brackets: [::1]:PORT", std::nullopt;
      port = text.substr(colon + 1);
      host = text.substr(0, colon);
    }
  }
  if (!port.empty() || (text.size() && text.back() == ':')) {
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
      return error = "the port must be a number from 1 to 65535", std::nullopt;
    p.port = std::stoi(std::string(port));
    if (p.port < 1 || p.port > 65535) return error = "the port must be a number from 1 to 65535", std::nullopt;
  }
  std::string h;
  for (char c : host) h += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.starts_with("*.")) {
    p.wildcard = true;
    h = h.substr(2);
    if (h.empty() || h.find('.') == std::string::npos)
      return error = "a wildcard needs a domain with a dot (*.example.com)", std::nullopt;
  }
  if (h.empty()) return error = "empty host", std::nullopt;
  if (h.find('*') != std::string::npos) return error = "'*' is only allowed as a leading \"*.\"", std::nullopt;
  if (!text.starts_with("[")) {
    if (h.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos)
      return error = "a host name has only letters, digits, '-' and '.'", std::nullopt;
    if (h.size() > 253 || h.find("..") != std::string::npos || h.front() == '.' || h.front() == '-')
      return error = "not a valid host name", std::nullopt;
  }
  p.host = p.wildcard ? "*." + h : h;
  return p;
}

}  // namespace pj::policy
