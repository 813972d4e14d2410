// A policy layer as written in one file (or on the command line): plain
// data with the source of every entry. Loading checks the schema (unknown
// keys, wrong types, bad patterns) and reports every problem at once; it
// judges nothing: resolve() does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "net/proxy_url.h"

namespace pj::policy {

// Where an entry came from: "file:line:column", or a command-line flag.
struct Source {
  std::string file;  // path, "profile pi (built in)", or "--allow-read"
  int line = 0;      // 0: no position (command line)
  int column = 0;
  std::string str() const;
  bool operator==(const Source&) const = default;
};

struct Diagnostic {
  Source where;
  std::string message;
  std::string str() const { return where.str() + ": " + message; }
};

// Who wrote a layer. Operators decide; a project only asks. A
// git_worktree grant is derived by pi-jail from a checked worktree (see
// Context::worktree), a program grant from the program it runs (see
// Context::program); both are bounded by the operators' limits.
enum class Authority { profile, system, user, command_line, project, git_worktree, program };
const char* authority_name(Authority a);
inline bool is_operator(Authority a) {
  return a != Authority::project && a != Authority::git_worktree && a != Authority::program;
}

struct Entry {
  std::string text;
  Source src;
  bool operator==(const Entry&) const = default;
};

struct Setting {
  std::string name;
  std::string value;
  Source src;
  bool operator==(const Setting&) const = default;
};

struct Flag {
  bool value = false;
  Source src;
  bool operator==(const Flag&) const = default;
};

// The choices a layer makes by name, read into these at load time (an
// unknown name is an error at its file:line there, never later).
enum class LandlockUse { if_available, required };  // [hardening] landlock
enum class OnExcess { warn, error };                // [policy] on_excess
// [credentials] logins: whether a login made inside the jail reaches the
// host's auth.json without asking (operators only; credentials/consent.h).
enum class LoginWriteBack { ask, write_back };
// The spelling in TOML and in explain's output.
const char* choice_name(LandlockUse v);
const char* choice_name(OnExcess v);
const char* choice_name(LoginWriteBack v);

template <class E>
struct Choice {
  E value{};
  Source src;
  bool operator==(const Choice&) const = default;
};

// [network] upstream_proxy (operators only): the HTTP proxy the filter
// connects out through, as a URL, or "env": the host's HTTPS_PROXY and
// NO_PROXY, read when the policy is resolved (Context::getenv).
struct UpstreamProxySetting {
  std::optional<net::ProxyUrl> url;  // nullopt: "env"
  Source src;
  bool operator==(const UpstreamProxySetting&) const = default;
};

// A size of memory-backed space (tmpfs `size=`): bytes, or a share of
// the host's RAM at the time the file system is made. Never 0 (tmpfs
// would take 0 as "no limit").
struct MemorySize {
  enum class Unit { bytes, percent_of_ram };
  std::uint64_t value = 50;  // bytes (>= 1), or 1..100 percent
  Unit unit = Unit::percent_of_ram;
  // The tmpfs spelling: "25%", or bytes in the largest binary unit that
  // divides them exactly ("8M", "1536K", "100").
  std::string str() const;
  // In bytes on a host with `ram` bytes of RAM; nullopt for a share of
  // RAM when `ram` is 0 (unknown).
  std::optional<std::uint64_t> bytes(std::uint64_t ram) const;
  bool operator==(const MemorySize&) const = default;
};

// "SIZE": digits with an optional binary unit K, M, G or T (either case),
// or "N%" of RAM with N from 1 to 100. Returns the size or an error message.
std::optional<MemorySize> parse_memory_size(std::string_view text, std::string& error);

struct SizeSetting {
  MemorySize size;
  Source src;
  bool operator==(const SizeSetting&) const = default;
};

// A whole number with its source: `[limits] pids`, or `cpus` in
// thousandths of a CPU.
struct CountSetting {
  std::uint64_t value = 0;
  Source src;
  bool operator==(const CountSetting&) const = default;
};

// "N": a whole number from 1 to 2^31 (a process count). Returns it or an
// error message.
std::optional<std::uint64_t> parse_count(std::string_view text, std::string& error);
// "N" or "N.FFF": CPUs, at least 0.01 and at most 1024; returns thousandths
// of a CPU ("1.5" -> 1500) or an error message.
std::optional<std::uint64_t> parse_cpus(std::string_view text, std::string& error);
// 1500 -> "1.5".
std::string cpus_str(std::uint64_t millicpus);

// Each list key is either absent (no bound from this layer) or a list;
// `scratch` is the size of the jail's one scratch file system (/tmp,
// /var/tmp and /dev/shm together). The resource limits (memory, pids,
// cpus) are values: a later layer may only lower them (a project file
// too); `cgroup` names the cgroup directories the operator delegates to
// pi-jail for enforcing them (operators only).
struct Limits {
  std::optional<std::vector<Entry>> read, write, network, env;
  std::optional<SizeSetting> scratch, memory;
  std::optional<CountSetting> pids, cpus;
  std::optional<std::vector<Entry>> cgroup;
  Source src;  // the [limits] table
  bool operator==(const Limits&) const = default;
};

struct Layer {
  Authority authority = Authority::project;
  std::string name;
  // [filesystem]
  std::vector<Entry> system;        // read-only when present; symlinks kept as symlinks
  std::vector<Entry> read;          // read-only grants
  std::vector<Entry> write;         // read-write grants
  std::vector<Entry> deny;          // masked, even under a grant
  std::vector<Entry> read_only;     // read-only even under a writable grant
  std::vector<Entry> private_dirs;  // "private": the run's own copy (operators only)
  std::vector<Entry> write_back;    // files of a private dir merged back at the end (operators only)
  std::vector<Entry> sockets;       // unix sockets bound inside ("$SSH_AUTH_SOCK"; operators only)
  // [network]
  std::vector<Entry> net_allow, net_deny;
  // The allow entries written as { host = "...", allow_private = true }
  // (also in net_allow): their names may resolve to private ranges.
  std::vector<Entry> net_allow_private;
  std::vector<Entry> publish;  // jail ports served on the host's loopback (normalised; operators only)
  // Hosts the jail reaches over SSH, "host:port" (port 22 unless written;
  // operators only): the filter opens them, the jail's known_hosts holds
  // their keys and pi-jail's agent proxy signs logins to them only.
  std::vector<Entry> ssh;
  // The presets named in [network] presets (their hosts are in net_allow).
  std::vector<Entry> net_presets;
  std::optional<UpstreamProxySetting> upstream_proxy;  // operators only
  // [home]
  std::optional<Flag> home_persist;  // the workspace's jail home kept between runs
  // [env]
  std::vector<Entry> env_pass;  // names or NAME_* globs
  std::vector<Setting> env_set;
  // [credentials] (operators only; see credentials/credentials.h)
  struct CredentialHost {
    std::string credential;  // a provider ("anthropic") or an environment variable name
    Entry host;              // parse_bind_target(): "name", "name:port" or "http://LOOPBACK:port"
    bool operator==(const CredentialHost&) const = default;
  };
  std::vector<CredentialHost> cred_bind;  // bind = { anthropic = ["llm.corp.example"] }
  std::vector<Entry> cred_pass_through;   // pass_through = ["AWS_ACCESS_KEY_ID"]: the real value, reported
  std::vector<Entry> cred_allow_minting;  // allow_minting = ["api.openai.com/v1/organization/admin_api_keys"]
  std::optional<Choice<LoginWriteBack>> cred_logins;  // logins = "ask" | "write-back"
  // [limits]
  std::optional<Limits> limits;
  // [hardening]
  std::optional<Choice<LandlockUse>> landlock;
  std::optional<Flag> unsafe_allow_ptrace;
  std::optional<Flag> unsafe_nested_user_namespaces;
  // [policy]
  std::optional<Choice<OnExcess>> on_excess;
  // [runtime]
  std::optional<Flag> compile_cache;  // a trusted read-only Node compile cache
  bool operator==(const Layer&) const = default;
};

// A name for the hosts one package ecosystem needs (`[network] presets`,
// --allow-net-preset), documented in pi-jail.toml(5): each host on 443.
struct NetPreset {
  std::string_view name;
  std::vector<std::string_view> hosts;
  std::string_view what;
};
const std::vector<NetPreset>& net_presets();
// The preset named `name`, or nullptr.
const NetPreset* find_net_preset(std::string_view name);

struct Loaded {
  Layer layer;
  std::vector<Diagnostic> errors;
};

// Parse TOML `text` as a layer named `name`.
Loaded load_layer(std::string_view text, const std::string& name, Authority authority);

// Read and parse `path`. A missing file gives an empty layer when
// `optional` (the default operator locations); any other failure is an
// error. Files over 1 MiB are refused.
enum class Presence { required, optional };
Loaded load_file(const std::string& path, Authority authority, Presence presence);

// Network patterns are read by the filter's own parser (net/address.h),
// so what explain shows is what is enforced.
using net::NetPattern;
using net::parse_net_pattern;

// A [credentials] bind target, normalised: "host" or "host:port" (TLS,
// 443 unless given; "https://" may be written before it), or
// "http://HOST:PORT" with HOST a loopback literal or `localhost`: plain
// HTTP to a host loopback port (a local model server). Plain HTTP to any
// other host is refused: the key would cross a network in clear. Returns
// the normalised spelling, or nullopt with `error` set.
std::optional<std::string> parse_bind_target(std::string_view text, std::string& error);

// A published port: the supervisor listens on the host's loopback at
// `host_addr`:`host_port` and relays each connection to `jail_port` on the
// jail's own 127.0.0.1. Written "PORT", "HOSTPORT:JAILPORT",
// "127.0.0.1:PORT[:JAILPORT]", "[::1]:PORT[:JAILPORT]" or
// "localhost:PORT[:JAILPORT]"; any other address is refused (the port
// would be reachable from other machines).
// An SSH host as `[network] ssh` and --allow-ssh write it: "HOST" or
// "HOST:PORT" (a name or an address, no wildcard), normalised to
// "host:port" (22 when no port is written). Returns it or an error message.
std::optional<std::string> parse_ssh_host(std::string_view text, std::string& error);

struct PublishSpec {
  std::string host_addr = "127.0.0.1";  // "127.0.0.1" or "::1"
  int host_port = 0;
  int jail_port = 0;
  std::string str() const;  // "127.0.0.1:3000:3000", "[::1]:8080:3000"
};
std::optional<PublishSpec> parse_publish(std::string_view text, std::string& error);

}  // namespace pj::policy
