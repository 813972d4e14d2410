#include "runtime/request.h"

#include <algorithm>
#include <map>

namespace pj::runtime {

const char* loopback_address(Loopback l) { return l == Loopback::v6 ? "::1" : "127.0.0.1"; }

namespace {

// HTTPS_PROXY, no_proxy, npm_config_https_proxy, RSYNC_PROXY, ...
bool names_a_proxy(std::string_view name) {
  constexpr std::string_view kSuffix = "proxy";
  if (name.size() < kSuffix.size()) return false;
  std::string_view tail = name.substr(name.size() - kSuffix.size());
  for (size_t i = 0; i < kSuffix.size(); ++i)
    if ((tail[i] | 0x20) != kSuffix[i]) return false;
  return true;
}

bool passes(const Request& r, std::string_view name) {
  for (const auto& p : r.env_pass) {
    if (p.ends_with("*") ? name.starts_with(std::string_view(p).substr(0, p.size() - 1)) : name == p) return true;
  }
  return false;
}

}  // namespace

bool login_callback_free(const Request& r, std::uint16_t port) {
  return std::none_of(r.forwards.begin(), r.forwards.end(), [&](const Forward& f) { return f.port == port; });
}

void apply_policy(const policy::Policy& p, Request& r) {
  for (const auto& e : p.system()) r.system.push_back({e.path, e.src.str()});
  for (const auto& g : p.grants())
    r.grants.push_back(
        {g.path, g.access == policy::PathAccess::read_write ? Access::read_write : Access::read_only, g.src.str()});
  for (const auto& d : p.denies()) r.denies.push_back({d.path, d.src.str()});
  for (const auto& e : p.read_only())
    r.read_only.push_back({e.path, e.src.str(), e.directory ? Node::directory : Node::file});
  for (const auto& e : p.private_dirs()) r.private_dirs.push_back({e.path, e.src.str(), Node::directory});
  for (const auto& e : p.write_back()) r.write_back.push_back({e.path, e.src.str(), Node::file});
  for (const auto& e : p.env_pass()) r.env_pass.push_back(e.name);
  for (const auto& e : p.env_set()) r.env_set.emplace_back(e.name, e.value);
  for (const auto& e : p.sockets()) {
    r.sockets.push_back({e.path, "socket grant " + e.src.str(), Node::file});
    if (!e.env.empty()) r.env_set.emplace_back(e.env, e.path);
  }
  for (const auto& e : p.publish()) r.published.push_back({e.spec, e.src.str()});
  r.scratch = p.scratch();
  r.limits.scratch_src = p.scratch_src().str();
  if (p.memory()) r.limits.memory = p.memory()->size, r.limits.memory_src = p.memory()->src.str();
  r.limits.pids = p.pids().value;
  r.limits.pids_src = p.pids().src.str();
  if (p.cpus()) r.limits.millicpus = p.cpus()->value, r.limits.cpus_src = p.cpus()->src.str();
  for (const auto& c : p.cgroups()) r.limits.cgroups.push_back(c.path);
}

std::string symlink_at_protected_path(const PathRule& r) {
  return r.path + " is a symlink; it must stay read-only (" + r.why +
         "), which needs the real file or directory there: replace the link with what it points to, or remove it";
}

std::vector<std::string> jail_env(const Request& r, std::string_view tmpdir, const std::optional<ProxyEndpoints>& proxy,
                                  std::string_view ca_bundle) {
  std::map<std::string, std::string> env;
  for (const auto& kv : r.host_env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (proxy && names_a_proxy(name)) continue;
    if (passes(r, name)) env[name] = kv.substr(eq + 1);
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  if (!r.path_first.empty() && !(env["PATH"] + ":").starts_with(r.path_first + ":"))
    env["PATH"] = r.path_first + ":" + env["PATH"];
  if (!r.path_guard.empty()) env["PATH"] = r.path_guard + ":" + env["PATH"];
  for (const auto& [k, v] : r.env_set) env[k] = v;
  env["HOME"] = r.home;
  env["TMPDIR"] = std::string(tmpdir);
  env["PI_JAIL"] = "1";
  if (proxy) {
    // Every client library's spelling of "use this proxy"; loopback is
    // not proxied (forwarded services answer there directly).
    const std::string http = "http://" + proxy->host + ":" + std::to_string(proxy->http_port);
    const std::string socks = "socks5h://" + proxy->host + ":" + std::to_string(proxy->socks_port);
    const std::string no_proxy = "localhost,127.0.0.1,::1";
    for (const char* name :
         {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy",
          "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "GLOBAL_AGENT_HTTP_PROXY", "GLOBAL_AGENT_HTTPS_PROXY"})
      env[name] = http;
    env["ALL_PROXY"] = env["all_proxy"] = socks;
    env["NO_PROXY"] = env["no_proxy"] = env["npm_config_noproxy"] = env["GLOBAL_AGENT_NO_PROXY"] = no_proxy;
    env["NODE_USE_ENV_PROXY"] = "1";
  }
  if (!ca_bundle.empty())
    for (auto name : kCaBundleVariables) env[std::string(name)] = std::string(ca_bundle);
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace pj::runtime
