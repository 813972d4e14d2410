// Policy: the effective, immutable result of all layers. Only resolve()
// can make one: operator layers grant and set limits, the project layer
// only requests within those limits, denies from any layer win, and every
// entry keeps the source that caused it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policy/layer.h"

namespace pj::policy {

enum class PathAccess { read_only, read_write };
// Whether an allowed name may resolve to a private range (`allow_private`):
// the filter's own setting, which the policy fills.
using net::PrivateRanges;

// The processes (threads count too) a jail may have at once unless a
// layer sets `[limits] pids`: far above what Pi and its tools use, far
// below what exhausts a host's process table.
inline constexpr std::uint64_t kDefaultPids = 4096;

class Policy {
public:
  struct PathGrant {
    std::string path;  // absolute, normalised, symlinks resolved
    PathAccess access;
    Source src;
    Authority by = Authority::profile;  // who granted it (git_worktree: derived by pi-jail)
  };
  struct PathRule {  // a system path, a mask or a read-only path
    std::string path;
    Source src;
    bool directory = false;  // written with a trailing "/": a directory even when absent
  };
  struct NetRule {
    NetPattern pattern;
    Source src;
    PrivateRanges private_ranges = PrivateRanges::refused;  // allow rules of operators only
  };
  // A unix socket of the host bound at the same path inside (an agent:
  // ssh-agent, gpg-agent). `env` names the variable it was written as
  // ("$SSH_AUTH_SOCK"), which the jail then gets set to `path`.
  struct SocketGrant {
    std::string path;  // absolute, normalised, as written (never resolved: a symlink is refused)
    std::string env;
    Source src;
  };
  struct Publish {
    PublishSpec spec;
    Source src;
  };
  // A host the jail reaches over SSH (`[network] ssh`, --allow-ssh).
  struct SshHost {
    NetPattern pattern;  // a host (never a wildcard) and its port
    Source src;
  };
  struct EnvPass {
    std::string name;  // a name, or a NAME* prefix
    Source src;
  };
  // The HTTP proxy the filter's outbound connections go through.
  struct UpstreamProxy {
    // nullopt: upstream_proxy = "env" and the host sets no HTTPS_PROXY
    // (nor https_proxy): connections go out directly.
    std::optional<net::ProxyUrl> url;
    bool from_env = false;  // upstream_proxy = "env"
    std::string url_var;    // from_env: the variable read ("HTTPS_PROXY", "https_proxy"), or ""
    // from_env: the host's NO_PROXY (or no_proxy): destinations reached
    // directly. Empty otherwise (loopback is never proxied either way).
    net::NoProxy no_proxy;
    std::string no_proxy_var;  // the variable read, or ""
    Source src;                // the upstream_proxy key
  };

  const std::vector<PathRule>& system() const { return system_; }
  const std::vector<PathGrant>& grants() const { return grants_; }
  const std::vector<PathRule>& denies() const { return denies_; }
  const std::vector<PathRule>& read_only() const { return read_only_; }
  // Directories the run gets its own copy of: the files at the top copied
  // in, the subdirectories shown read-only, whatever the run writes there
  // discarded at the end, except the write_back files, whose data values
  // are merged back into the host's (by the rule of their name).
  const std::vector<PathRule>& private_dirs() const { return private_dirs_; }
  const std::vector<PathRule>& write_back() const { return write_back_; }
  const std::vector<SocketGrant>& sockets() const { return sockets_; }
  const std::vector<NetRule>& net_allow() const { return net_allow_; }
  const std::vector<Publish>& publish() const { return publish_; }
  const std::vector<NetRule>& net_deny() const { return net_deny_; }
  const std::vector<SshHost>& ssh_hosts() const { return ssh_hosts_; }
  // `[network] upstream_proxy` (operators only; the last one written):
  // nullopt when none is set.
  const std::optional<UpstreamProxy>& upstream_proxy() const { return upstream_proxy_; }
  const std::vector<EnvPass>& env_pass() const { return env_pass_; }
  const std::vector<Setting>& env_set() const { return env_set_; }
  // [credentials], operators only: extra hosts a credential may be sent
  // to, and the credentials passed in as they are (not placeholders).
  const std::vector<Layer::CredentialHost>& credential_hosts() const { return cred_hosts_; }
  const std::vector<Entry>& credential_pass_through() const { return cred_pass_through_; }
  // [credentials] allow_minting (operators only): credential-minting
  // endpoints of the provider table the filter lets through.
  const std::vector<Entry>& credential_allow_minting() const { return cred_allow_minting_; }
  // [credentials] logins (operators only): ask, unless an operator said write-back.
  LoginWriteBack credential_logins() const { return cred_logins_; }
  const Source& credential_logins_src() const { return cred_logins_src_; }
  LandlockUse landlock() const { return landlock_; }
  const Source& landlock_src() const { return landlock_src_; }
  bool ptrace_allowed() const { return ptrace_.value; }
  const Source& ptrace_src() const { return ptrace_.src; }
  bool nested_userns_allowed() const { return nested_userns_.value; }
  const Source& nested_userns_src() const { return nested_userns_.src; }
  // The size of the jail's one scratch file system, which /tmp, /var/tmp
  // and /dev/shm share (`[limits] scratch`; default half the RAM).
  const MemorySize& scratch() const { return scratch_.size; }
  const Source& scratch_src() const { return scratch_.src; }
  // `[runtime] compile_cache` (operators only; default on): a Node
  // program gets a compile cache made by a warm-up jail that sees only its
  // installation, mounted read-only (supervisor/compile_cache.h).
  bool compile_cache() const { return compile_cache_.value; }
  const Source& compile_cache_src() const { return compile_cache_.src; }
  // Whether $HOME inside is the workspace's jail home, kept between runs
  // (`[home] persist`, default true), or the run's own on the scratch
  // file system (false; --ephemeral-home).
  bool home_persists() const { return home_persist_.value; }
  const Source& home_persist_src() const { return home_persist_.src; }
  // The jail's resource limits: memory (nullopt: none), processes (always
  // one: kDefaultPids unless a layer set it), CPUs in thousandths (nullopt:
  // none), and the cgroup directories operators delegate for them.
  const std::optional<SizeSetting>& memory() const { return memory_; }
  const CountSetting& pids() const { return pids_; }
  const std::optional<CountSetting>& cpus() const { return cpus_; }
  const std::vector<PathRule>& cgroups() const { return cgroups_; }

private:
  Policy() = default;
  friend struct Resolver;
  std::vector<PathRule> system_;
  std::vector<PathGrant> grants_;
  std::vector<PathRule> denies_;
  std::vector<PathRule> read_only_;
  std::vector<PathRule> private_dirs_, write_back_;
  std::vector<NetRule> net_allow_, net_deny_;
  std::vector<SocketGrant> sockets_;
  std::vector<Publish> publish_;
  std::vector<SshHost> ssh_hosts_;
  std::optional<UpstreamProxy> upstream_proxy_;
  std::vector<EnvPass> env_pass_;
  std::vector<Setting> env_set_;
  std::vector<Layer::CredentialHost> cred_hosts_;
  std::vector<Entry> cred_pass_through_;
  std::vector<Entry> cred_allow_minting_;
  LoginWriteBack cred_logins_ = LoginWriteBack::ask;
  Source cred_logins_src_{"default", 0, 0};
  LandlockUse landlock_ = LandlockUse::if_available;
  Source landlock_src_{"default", 0, 0};
  Flag ptrace_{false, {"default", 0, 0}};
  Flag nested_userns_{false, {"default", 0, 0}};
  Flag compile_cache_{true, {"default", 0, 0}};
  Flag home_persist_{true, {"default", 0, 0}};
  SizeSetting scratch_{MemorySize{50, MemorySize::Unit::percent_of_ram}, {"default", 0, 0}};
  std::optional<SizeSetting> memory_;
  CountSetting pids_{kDefaultPids, {"default", 0, 0}};
  std::optional<CountSetting> cpus_;
  std::vector<PathRule> cgroups_;
};

// A request that was not applied, and why.
struct Refusal {
  Source request;
  std::string what;             // "write ~/x", "network evil.example", "unsafe_allow_ptrace"
  std::string reason;           // "outside the write limit", ...
  std::optional<Source> limit;  // the limit it exceeds, when there is one
  Authority by = Authority::project;
  std::string str() const;
};

// A git worktree found in the workspace and checked by the supervisor the
// way git checks it (the .git file names a git dir inside the common
// dir's worktrees/, whose back-link names this .git file). Only then is
// the main repository's git dir granted read-write (objects, refs, the
// worktree's index), and only within the operators' write limits.
struct Worktree {
  std::string dot_git;     // <workspace>/.git, a file
  std::string git_dir;     // <common_dir>/worktrees/<name>, resolved
  std::string common_dir;  // the main repository's git dir, resolved
};

// A path the program pi-jail runs needs read-only (runtime::discover():
// its file or package tree, its interpreter's installation; tools it
// looks for on PATH), resolved. It enters the policy like a request of
// the program's: never /, a tree the jail makes itself or a masked path,
// and within the system operator's read (or write) limit when one is set,
// unless the system view shows it anyway. A refused required need is an
// error (the program cannot run without it); an optional one a refusal.
enum class Necessity { required, optional };
// A need may also be read-write: the places the program keeps its data
// for this workspace (Pi's sessions of this workspace), which then answer
// to the system operator's write limit.
struct ProgramNeed {
  std::string path;
  Source src;  // provenance: "runtime: interpreter of pi (#!/usr/bin/env node)"
  Necessity necessity = Necessity::required;
  PathAccess access = PathAccess::read_only;
};

// What resolve() needs from outside: where things are, and how to resolve
// symlinks (injected, so tests can invent a filesystem).
// A directory that a ${name} variable names and the caller places, not
// an operator (Pi's agent dir: $PI_CODING_AGENT_DIR). What a profile
// writes below it answers to the system operator's write limit, like a
// grant on the command line; outside that limit the run stops, saying
// what the directory is, who chose it, and the fix.
struct PlacedDir {
  std::string var;        // "pi_agent_dir"
  std::string what;       // "Pi's agent dir"
  std::string chosen_by;  // "$PI_CODING_AGENT_DIR, else ~/.pi/agent"
  std::string fix;        // "set PI_CODING_AGENT_DIR to a directory within it"
};

struct Context {
  std::string workspace;
  std::string home;
  std::string cwd;
  // More ${name} variables (e.g. pi_agent_dir), already absolute.
  std::vector<std::pair<std::string, std::string>> vars;
  // realpath(3): the resolved path, or nullopt when it does not exist.
  std::function<std::optional<std::string>(const std::string&)> realpath;
  // A checked git worktree (nullopt: none, or not a valid one).
  std::optional<Worktree> worktree;
  // What the program to run needs (empty: no program, as for explain).
  std::vector<ProgramNeed> program = {};
  // The host's RAM in bytes, to compare a share of RAM with a size
  // (`[limits] scratch` of the user against the system's); 0: unknown.
  std::uint64_t ram_bytes = 0;
  // The caller's environment, for "$NAME" in `[filesystem] sockets` and
  // for `upstream_proxy = "env"` (HTTPS_PROXY, NO_PROXY) (nullopt: unset
  // or empty). Absent: every variable is unset.
  std::function<std::optional<std::string>(const std::string&)> getenv = {};
  // The directories among `vars` that the caller places (PlacedDir).
  std::vector<PlacedDir> placed = {};
};

struct Resolved {
  std::optional<Policy> policy;    // absent when errors is not empty
  std::vector<Refusal> refused;    // project requests (and operator excesses) not applied
  std::vector<Diagnostic> errors;  // problems that stop the run (exit 125)
  OnExcess on_excess = OnExcess::warn;
};

// Layers in order: profile, system, user, command line, project.
Resolved resolve(const std::vector<Layer>& layers, const Context& ctx);

}  // namespace pj::policy
