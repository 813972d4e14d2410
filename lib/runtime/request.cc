#include "runtime/request.h"

#include <map>

namespace pj::runtime {

namespace {

bool passes(const Request& r, std::string_view name) {
  for (const auto& p : r.env_pass) {
    if (p.ends_with("*") ? name.starts_with(std::string_view(p).substr(0, p.size() - 1)) : name == p) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> jail_env(const Request& r, std::string_view tmpdir,
                                  const std::optional<ProxyEndpoints>& proxy) {
  std::map<std::string, std::string> env;
  for (const auto& kv : r.host_env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (passes(r, name)) env[name] = kv.substr(eq + 1);
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
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
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy",
                             "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
                             "GLOBAL_AGENT_HTTP_PROXY", "GLOBAL_AGENT_HTTPS_PROXY"})
      env[name] = http;
    env["ALL_PROXY"] = env["all_proxy"] = socks;
    env["NO_PROXY"] = env["no_proxy"] = env["npm_config_noproxy"] = env["GLOBAL_AGENT_NO_PROXY"] = no_proxy;
    env["NODE_USE_ENV_PROXY"] = "1";
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace pj::runtime
