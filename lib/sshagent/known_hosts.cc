#include "sshagent/known_hosts.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "netproxy/http1.h"
#include "sshagent/wire.h"

namespace pj::sshagent {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// sshd(8)'s wildcard match: "*" any run, "?" one character.
bool glob(std::string_view pat, std::string_view s) {
  size_t p = 0, i = 0, star = std::string_view::npos, back = 0;
  while (i < s.size()) {
    if (p < pat.size() && (pat[p] == '?' || pat[p] == s[i]))
      ++p, ++i;
    else if (p < pat.size() && pat[p] == '*')
      star = p++, back = i;
    else if (star != std::string_view::npos)
      p = star + 1, i = ++back;
    else
      return false;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

// |1|base64(salt)|base64(HMAC-SHA1(salt, name))
bool hashed_match(std::string_view pattern, std::string_view name) {
  pattern.remove_prefix(3);
  size_t bar = pattern.find('|');
  if (bar == std::string_view::npos) return false;
  auto salt = netproxy::http1::base64_decode(pattern.substr(0, bar));
  auto hash = netproxy::http1::base64_decode(pattern.substr(bar + 1));
  if (!salt || !hash || salt->size() != 20 || hash->size() != 20) return false;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha1(), salt->data(), static_cast<int>(salt->size()),
            reinterpret_cast<const unsigned char*>(name.data()), name.size(), mac, &len) ||
      len != 20)
    return false;
  return std::equal(hash->begin(), hash->end(), mac,
                    [](char a, unsigned char b) { return static_cast<unsigned char>(a) == b; });
}

// Whether a line's host field names `name`: a hashed entry is one name; a
// plain one is a comma list where a matching negated pattern wins.
bool names(std::string_view field, const std::string& name) {
  if (field.starts_with("|1|")) return hashed_match(field, name);
  bool matched = false;
  while (!field.empty()) {
    size_t comma = field.find(',');
    std::string pat = lower(field.substr(0, comma));
    field = comma == std::string_view::npos ? std::string_view{} : field.substr(comma + 1);
    const bool negated = pat.starts_with("!");
    if (negated) pat.erase(0, 1);
    if (pat.empty() || !glob(pat, name)) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size() && out.size() < 4) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    if (end > i) out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace

std::string known_hosts_name(std::string_view host, int port) {
  return port == 22 ? lower(host) : fmt::format("[{}]:{}", lower(host), port);
}

std::vector<HostKey> find_host_keys(std::string_view text, std::string_view host, int port) {
  const std::string name = known_hosts_name(host, port);
  std::vector<HostKey> keys, revoked;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    auto f = fields(line);
    if (f.empty() || f[0].starts_with("#")) continue;
    std::string_view marker;
    if (f[0].starts_with("@")) {
      marker = f[0];
      f.erase(f.begin());
      if (f.size() < 3 || (marker != "@revoked")) continue;
    }
    if (f.size() < 3 || !names(f[0], name)) continue;
    auto blob = netproxy::http1::base64_decode(f[2]);
    if (!blob) continue;
    WireReader r(*blob);
    if (r.string() != f[1] || !r.ok()) continue;  // the blob's own type must be the one written
    HostKey k{std::string(f[1]), std::string(f[2]), std::move(*blob)};
    auto& dst = marker.empty() ? keys : revoked;
    if (std::find(dst.begin(), dst.end(), k) == dst.end()) dst.push_back(std::move(k));
  }
  std::erase_if(keys, [&](const HostKey& k) {
    return std::any_of(revoked.begin(), revoked.end(), [&](const HostKey& r) { return r.blob == k.blob; });
  });
  return keys;
}

std::string known_hosts_text(std::string_view name, const std::vector<HostKey>& keys) {
  std::string out;
  for (const auto& k : keys) out += fmt::format("{} {} {}\n", name, k.type, k.base64);
  return out;
}

}  // namespace pj::sshagent
