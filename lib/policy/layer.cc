#include "policy/layer.h"
#include "util/numbers.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
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
#include "thirdparty/toml.h"

#include "policy/toml_text.h"

namespace pj::policy {

namespace {

constexpr size_t kMaxFileSize = 1 << 20;

// The schema: which keys each table may have.
const std::map<std::string, std::set<std::string>, std::less<>> kSchema = {
    {"filesystem", {"system", "read", "write", "deny", "read_only", "private", "write_back", "sockets"}},
    {"network", {"allow", "deny", "presets", "publish", "ssh", "upstream_proxy"}},
    {"home", {"persist"}},
    {"env", {"pass", "set"}},
    {"limits", {"read", "write", "network", "env", "scratch", "memory", "pids", "cpus", "cgroup"}},
    {"hardening", {"landlock", "unsafe_allow_ptrace", "unsafe_nested_user_namespaces"}},
    {"policy", {"on_excess"}},
    {"runtime", {"compile_cache"}},
    {"credentials", {"bind", "pass_through", "logins", "allow_minting"}},
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
        if (s->empty())
          error(item, fmt::format("{}: empty string", where));
        else if (s->find('\0') != std::string::npos)
          error(item, fmt::format("{}: NUL byte in string", where));
        else
          out.push_back({*s, at(item)});
      } else {
        error(item, fmt::format("{} must contain only strings", where));
      }
    }
    return out;
  }

  // A string naming one of `names` (its spelling and value), read into
  // the value.
  template <class E>
  std::optional<Choice<E>> one_of(const toml::node& n, std::string_view where,
                                  std::initializer_list<std::pair<const char*, E>> names) {
    auto s = n.value<std::string>();
    if (!n.is_string() || !s) {
      error(n, fmt::format("{} must be a string", where));
      return std::nullopt;
    }
    for (const auto& [name, value] : names)
      if (*s == name) return Choice<E>{value, at(n)};
    std::string list;
    for (const auto& [name, value] : names) list += (list.empty() ? "\"" : ", \"") + std::string(name) + "\"";
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

  // pids = 512 (an integer); cpus = 2 or 1.5 (a number).
  enum class Counted { processes, cpus };
  std::optional<CountSetting> count(const toml::node& n, std::string_view where, Counted what) {
    const bool cpus = what == Counted::cpus;
    std::string text;
    if (n.is_integer())
      text = std::to_string(*n.value<std::int64_t>());
    else if (cpus && n.is_floating_point())
      text = fmt::format("{}", *n.value<double>());
    else {
      error(n, fmt::format("{} must be {}", where, cpus ? "a number (2, 1.5)" : "a whole number (512)"));
      return std::nullopt;
    }
    std::string why;
    auto v = cpus ? parse_cpus(text, why) : parse_count(text, why);
    if (!v) {
      error(n, fmt::format("{} {}: {}", where, text, why));
      return std::nullopt;
    }
    return CountSetting{*v, at(n)};
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
          error(item,
                fmt::format("{} must contain strings or {{ host = \"...\", allow_private = true }} tables", where));
        else if (s->empty())
          error(item, fmt::format("{}: empty string", where));
        else if (s->find('\0') != std::string::npos)
          error(item, fmt::format("{}: NUL byte in string", where));
        else
          out.push_back({*s, at(item)});
        continue;
      }
      std::optional<Entry> host;
      std::optional<Flag> private_flag;
      for (auto&& [k, v] : *t) {
        if (k.str() == "host") {
          auto s = v.value<std::string>();
          if (!v.is_string() || !s || s->empty() || s->find('\0') != std::string::npos)
            error(v, fmt::format("{}: host must be a non-empty string", where));
          else
            host = Entry{*s, at(v)};
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
      auto p = parse_net_pattern(e.text);
      if (!p)
        out_.errors.push_back({e.src, fmt::format("bad network pattern \"{}\": {}", e.text, p.error().what())});
      else
        e.text = p->str();
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
        auto& dst = key == "system"       ? l.system
                    : key == "read"       ? l.read
                    : key == "write"      ? l.write
                    : key == "deny"       ? l.deny
                    : key == "private"    ? l.private_dirs
                    : key == "write_back" ? l.write_back
                    : key == "sockets"    ? l.sockets
                                          : l.read_only;
        dst.insert(dst.end(), list.begin(), list.end());
      } else if (name == "network" && key == "publish") {
        for (auto& e : strings(v, where)) {
          std::string why;
          auto p = parse_publish(e.text, why);
          if (!p)
            out_.errors.push_back({e.src, fmt::format("bad publish \"{}\": {}", e.text, why)});
          else
            l.publish.push_back({p->str(), e.src});
        }
      } else if (name == "network" && key == "ssh") {
        for (auto& e : strings(v, where)) {
          std::string why;
          auto host = parse_ssh_host(e.text, why);
          if (!host)
            out_.errors.push_back({e.src, fmt::format("bad ssh host \"{}\": {}", e.text, why)});
          else
            l.ssh.push_back({*host, e.src});
        }
      } else if (name == "network" && key == "upstream_proxy") {
        l.upstream_proxy = upstream_proxy(v, where);
      } else if (name == "network" && key == "presets") {
        for (const auto& e : strings(v, where)) add_preset(e);
      } else if (name == "home") {
        l.home_persist = flag(v, where);
      } else if (name == "network") {
        std::vector<Entry> list, private_ranges;
        if (key == "allow")
          net_allow_entries(v, where, list, private_ranges);
        else
          list = strings(v, where);
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
        if (key == "scratch" || key == "memory") {
          (key == "scratch" ? l.limits->scratch : l.limits->memory) = memory_size(v, where);
          continue;
        }
        if (key == "pids" || key == "cpus") {
          (key == "pids" ? l.limits->pids : l.limits->cpus) =
              count(v, where, key == "cpus" ? Counted::cpus : Counted::processes);
          continue;
        }
        if (key == "cgroup") {
          l.limits->cgroup = strings(v, where);
          continue;
        }
        auto list = strings(v, where);
        if (key == "network") network_patterns(list);
        if (key == "env")
          for (auto& e : list) check_env_name(e, true);
        (key == "read"      ? l.limits->read
         : key == "write"   ? l.limits->write
         : key == "network" ? l.limits->network
                            : l.limits->env) = std::move(list);
      } else if (name == "hardening") {
        if (key == "landlock")
          l.landlock = one_of(v, where,
                              {std::pair{choice_name(LandlockUse::if_available), LandlockUse::if_available},
                               {choice_name(LandlockUse::required), LandlockUse::required}});
        else if (key == "unsafe_allow_ptrace")
          l.unsafe_allow_ptrace = flag(v, where);
        else
          l.unsafe_nested_user_namespaces = flag(v, where);
      } else if (name == "policy") {
        l.on_excess = one_of(
            v, where,
            {std::pair{choice_name(OnExcess::warn), OnExcess::warn}, {choice_name(OnExcess::error), OnExcess::error}});
      } else if (name == "runtime") {
        l.compile_cache = flag(v, where);
      } else if (name == "credentials") {
        credentials(key, v, where);
      }
    }
  }

  // "http://[USER:PASSWORD@]HOST:PORT" or "env". The value is quoted in
  // an error with its password masked.
  std::optional<UpstreamProxySetting> upstream_proxy(const toml::node& n, std::string_view where) {
    auto s = n.value<std::string>();
    if (!n.is_string() || !s) {
      error(n, fmt::format("{} must be a string: \"http://HOST:PORT\" or \"env\"", where));
      return std::nullopt;
    }
    if (*s == "env") return UpstreamProxySetting{std::nullopt, at(n)};
    auto url = net::parse_proxy_url(*s);
    if (!url) {
      error(n, fmt::format("{} \"{}\": {}", where, net::redact_userinfo(*s), url.error().what()));
      return std::nullopt;
    }
    return UpstreamProxySetting{std::move(*url), at(n)};
  }

  // A preset's hosts become allow entries at the preset's position, so
  // limits and refusals treat them as if each host were written there.
  void add_preset(const Entry& e) {
    if (const NetPreset* p = find_net_preset(e.text)) {
      for (auto host : p->hosts) out_.layer.net_allow.push_back({std::string(host), e.src});
      out_.layer.net_presets.push_back(e);
      return;
    }
    std::string known;
    for (const auto& p : net_presets()) known += (known.empty() ? "" : ", ") + std::string(p.name);
    out_.errors.push_back({e.src, fmt::format("unknown network preset \"{}\" (known: {})", e.text, known)});
  }

  // [credentials] bind = { CREDENTIAL = ["host", "host:port"] }, where
  // CREDENTIAL is a provider name or an environment variable name; and
  // pass_through = ["NAME", ...].
  void credentials(const std::string& key, const toml::node& v, const std::string& where) {
    Layer& l = out_.layer;
    if (key == "logins") {
      l.cred_logins = one_of(v, where,
                             {std::pair{choice_name(LoginWriteBack::ask), LoginWriteBack::ask},
                              {choice_name(LoginWriteBack::write_back), LoginWriteBack::write_back}});
      return;
    }
    if (key == "pass_through") {
      for (auto& e : strings(v, where))
        if (check_env_name(e, /*glob=*/false)) l.cred_pass_through.push_back(std::move(e));
      return;
    }
    if (key == "allow_minting") {
      // "HOST/PATH", exactly as the provider table lists it (pi-jail.toml(5));
      // the supervisor checks it against the table.
      for (auto& e : strings(v, where)) {
        size_t slash = e.text.find('/');
        if (slash == 0 || slash == std::string::npos)
          error_at(e.src, fmt::format("credentials.allow_minting: \"{}\" is not HOST/PATH "
                                      "(e.g. \"api.openai.com/v1/organization/admin_api_keys\")",
                                      e.text));
        else
          l.cred_allow_minting.push_back(std::move(e));
      }
      return;
    }
    const toml::table* t = v.as_table();
    if (!t) return error(v, "credentials.bind must be a table of CREDENTIAL = [\"host\", ...]");
    for (auto&& [name, hosts] : *t) {
      std::string cred(name.str());
      if (cred.empty() || cred.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") !=
                              std::string::npos) {
        error(name,
              fmt::format("credentials.bind: \"{}\" is neither a provider nor an environment variable name", cred));
        continue;
      }
      for (auto& e : strings(hosts, fmt::format("credentials.bind.{}", cred))) {
        std::string why;
        auto target = parse_bind_target(e.text, why);
        if (!target)
          error_at(e.src, fmt::format("credentials.bind.{}: \"{}\": {}", cred, e.text, why));
        else
          l.cred_bind.push_back({cred, Entry{*target, e.src}});
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
        error(k, fmt::format("unknown table [{}] (known: filesystem, network, home, env, limits, hardening, policy, "
                             "runtime, credentials)",
                             key));
        continue;
      }
      if (const toml::table* t = v.as_table())
        table(key, *t);
      else
        error(v, fmt::format("\"{}\" must be a table ([{}])", key, key));
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

std::optional<std::string> parse_bind_target(std::string_view text, std::string& error) {
  auto scheme_is = [&](std::string_view scheme) {
    return text.size() > scheme.size() && std::equal(scheme.begin(), scheme.end(), text.begin(), [](char a, char b) {
             return a == std::tolower(static_cast<unsigned char>(b));
           });
  };
  const bool plain = scheme_is("http://");
  if (plain)
    text.remove_prefix(7);
  else if (scheme_is("https://"))
    text.remove_prefix(8);
  else if (text.find("://") != std::string_view::npos) {
    error = "a bind target is HOST[:PORT], https://HOST[:PORT] or http://127.0.0.1:PORT";
    return std::nullopt;
  }
  if (text.ends_with('/')) text.remove_suffix(1);
  if (text.find_first_of("/?#@") != std::string_view::npos) {
    error = "a credential is bound to a host and port, not to a path or a user";
    return std::nullopt;
  }
  auto p = parse_net_pattern(text);
  if (!p) {
    error = fmt::format("bad host: {}", p.error().what());
    return std::nullopt;
  }
  if (p->wildcard) {
    error = "a credential is bound to named hosts, not to a wildcard";
    return std::nullopt;
  }
  if (!plain) return p->str();
  if (!net::is_loopback_host(p->host)) {
    error =
        "plain HTTP is allowed only to a host loopback port (http://127.0.0.1:PORT, http://[::1]:PORT, "
        "http://localhost:PORT): anywhere else the key would cross a network in clear; bind the host without "
        "http:// for TLS";
    return std::nullopt;
  }
  if (p->port == 0) {
    error = "plain HTTP to the loopback needs its port (http://127.0.0.1:11434)";
    return std::nullopt;
  }
  return "http://" + p->str();
}

const char* authority_name(Authority a) {
  switch (a) {
    case Authority::profile: return "profile";
    case Authority::system: return "system operator file";
    case Authority::user: return "user operator file";
    case Authority::command_line: return "command line";
    case Authority::project: return "project file";
    case Authority::git_worktree: return "git worktree";
    case Authority::program: return "program";
  }
  return "?";
}

const char* choice_name(LandlockUse v) { return v == LandlockUse::required ? "required" : "if-available"; }
const char* choice_name(OnExcess v) { return v == OnExcess::error ? "error" : "warn"; }
const char* choice_name(LoginWriteBack v) { return v == LoginWriteBack::write_back ? "write-back" : "ask"; }

const std::vector<NetPreset>& net_presets() {
  static const std::vector<NetPreset> presets = {
      {"npm", {"registry.npmjs.org", "registry.yarnpkg.com"}, "npm and yarn packages"},
      {"pypi", {"pypi.org", "files.pythonhosted.org"}, "pip packages"},
      {"crates", {"crates.io", "index.crates.io", "static.crates.io"}, "cargo crates"},
      {"github",
       {"github.com", "api.github.com", "codeload.github.com", "raw.githubusercontent.com",
        "objects.githubusercontent.com", "release-assets.githubusercontent.com"},
       "git over HTTPS, releases and raw files"},
  };
  return presets;
}

const NetPreset* find_net_preset(std::string_view name) {
  for (const auto& p : net_presets())
    if (p.name == name) return &p;
  return nullptr;
}

Loaded load_layer(std::string_view text, const std::string& name, Authority authority) {
  Loader loader(name, authority);
  if (auto at = non_ascii_outside_strings(text)) {
    loader.out().errors.push_back({Source{name, at->line, at->column},
                                   "a character past ASCII outside a string or comment (TOML has them only there)"});
    return std::move(loader.out());
  }
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
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      case 't':
      case 'T': shift = 40; break;
      default: return error = usage, std::nullopt;
    }
  }
  if (n > (UINT64_MAX >> shift) >> 1) return error = "too large", std::nullopt;  // stays below 2^63
  out.value = n << shift;
  out.unit = MemorySize::Unit::bytes;
  return out;
}

std::optional<std::uint64_t> parse_count(std::string_view text, std::string& error) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return error = "expected a whole number such as 512", std::nullopt;
  std::uint64_t n = *util::parse_number<std::uint64_t>(text);
  if (n == 0) return error = "0 would let nothing run; give at least 1", std::nullopt;
  if (n > (1ULL << 31)) return error = "too large (at most 2147483648)", std::nullopt;
  return n;
}

std::optional<std::uint64_t> parse_cpus(std::string_view text, std::string& error) {
  const char* usage = "expected a number of CPUs such as 2 or 1.5";
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot), frac = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 4 || whole.find_first_not_of("0123456789") != std::string_view::npos ||
      (dot != std::string_view::npos &&
       (frac.empty() || frac.find_first_not_of("0123456789") != std::string_view::npos)))
    return error = usage, std::nullopt;
  std::uint64_t milli = *util::parse_number<std::uint64_t>(whole) * 1000;
  for (size_t i = 0; i < frac.size(); ++i) {
    if (i >= 3) {
      if (frac[i] != '0') return error = "at most three decimals (0.001 CPU)", std::nullopt;
      continue;
    }
    milli += static_cast<std::uint64_t>(frac[i] - '0') * (i == 0 ? 100 : i == 1 ? 10 : 1);
  }
  if (milli < 10) return error = "at least 0.01 CPU", std::nullopt;
  if (milli > 1024 * 1000) return error = "at most 1024 CPUs", std::nullopt;
  return milli;
}

std::string cpus_str(std::uint64_t millicpus) {
  std::string s = fmt::format("{}.{:03}", millicpus / 1000, millicpus % 1000);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::optional<std::string> parse_ssh_host(std::string_view text, std::string& error) {
  auto p = parse_net_pattern(text);
  if (!p) return error = p.error().what(), std::nullopt;
  if (p->wildcard)
    return error = "an SSH host is one host, not a wildcard: its keys come from known_hosts by name", std::nullopt;
  if (p->port == 0) p->port = 22;
  return p->str();
}

std::string PublishSpec::str() const {
  return fmt::format("{}:{}:{}", host_addr == "::1" ? "[::1]" : host_addr, host_port, jail_port);
}

std::optional<PublishSpec> parse_publish(std::string_view text, std::string& error) {
  auto port = [&](std::string_view t, int& out) {
    auto number = util::parse_port(t);
    if (number) out = *number;
    return number.has_value();
  };
  PublishSpec p;
  std::string_view rest = text;
  std::string_view addr;
  if (rest.starts_with("[")) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return error = "unclosed [", std::nullopt;
    addr = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.starts_with(":")) return error = "a port must follow the address", std::nullopt;
    rest.remove_prefix(1);
  } else if (size_t colon = rest.find(':');
             colon != std::string_view::npos &&
             rest.substr(0, colon).find_first_not_of("0123456789") != std::string_view::npos) {
    addr = rest.substr(0, colon);
    rest.remove_prefix(colon + 1);
  }
  if (!addr.empty()) {
    if (addr == "127.0.0.1" || addr == "localhost")
      p.host_addr = "127.0.0.1";
    else if (addr == "::1")
      p.host_addr = "::1";
    else
      return error = fmt::format(
                 "{} is not the host's loopback: a port published there could be reached from other "
                 "machines; publish on 127.0.0.1 or [::1] (e.g. 127.0.0.1:3000)",
                 addr),
             std::nullopt;
  }
  std::string_view host_port = rest, jail_port = rest;
  if (size_t colon = rest.find(':'); colon != std::string_view::npos) {
    host_port = rest.substr(0, colon);
    jail_port = rest.substr(colon + 1);
  }
  if (!port(host_port, p.host_port) || !port(jail_port, p.jail_port))
    return error = "expected [127.0.0.1:|[::1]:]PORT or HOSTPORT:JAILPORT, ports 1-65535", std::nullopt;
  return p;
}

}  // namespace pj::policy
