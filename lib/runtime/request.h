// Request: what a run asks for, the same for every backend (the Linux
// namespace jail and the macOS Seatbelt jail): the workspace, the program,
// the path lists of the resolved policy, the environment. The supervisor
// fills it from the command line and the policy; each backend's planner
// turns it into its own spec.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/policy.h"

namespace pj::runtime {

// How a grant may be used from inside the jail.
enum class Access { read_only, read_write };

// Which kind of object a path is (or, when absent, is to be covered as).
enum class Node { directory, file };

struct PathGrant {
  std::string path;  // absolute, normalised
  Access access;
  std::string why;  // "--allow-read", "workspace", ...
};

// A path with a meaning given by the list it is in (system, mask,
// read-only).
struct PathRule {
  std::string path;
  std::string why;
  Node node = Node::file;  // read-only marks: what to cover when absent
};

// A private directory as staged for one run (pi/private_dirs.h):
// inside the jail `path` is the host directory `staging`, which holds
// copies of the files at the top of `path`; `shown` entries (host
// subdirectories, files too large to copy) are bound read-only into it,
// `links` recreated as the same symlinks.
struct PrivateView {
  std::string path;     // the host directory, resolved
  std::string staging;  // what the jail sees and writes at `path`
  std::string why;
  std::vector<std::string> shown;                          // absolute host paths directly in `path`
  std::vector<std::pair<std::string, std::string>> links;  // path -> link target
};

// The run's resource limits, each with the source that set it.
struct Limits {
  std::optional<policy::MemorySize> memory;  // nullopt: none
  std::string memory_src;
  std::uint64_t pids = policy::kDefaultPids;
  std::string pids_src = "default";
  std::optional<std::uint64_t> millicpus;  // nullopt: none
  std::string cpus_src;
  std::vector<std::string> cgroups;     // delegated by operators
  std::string scratch_src = "default";  // of Request::scratch
};

// The loopback address of one family: where the jail's own listeners
// are, and where a host-loopback service the policy names is reached.
enum class Loopback { v4, v6 };
const char* loopback_address(Loopback l);  // "127.0.0.1" or "::1"

// A host-loopback service the policy names with a port: served inside the
// jail at the same address and port (through the network filter).
struct Forward {
  Loopback address = Loopback::v4;
  int port = 0;
};

struct Request {
  std::string workspace;  // absolute, normalised, resolved
  std::string cwd;        // the caller's current directory
  std::string home;       // $HOME as the jail will see it
  // The host directory shown read-write at `home`: the workspace's own
  // persistent jail home (supervisor/jail_home.h), never the real home.
  // Empty: `home` is the run's own, on the scratch file system, and is
  // gone when the run ends ([home] persist = false, --ephemeral-home).
  std::string home_source;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<PathRule> system;        // read-only when present; symlinks kept
  std::vector<PathGrant> grants;       // beyond the workspace
  std::vector<PathRule> denies;        // masked
  std::vector<PathRule> read_only;     // read-only even under a writable grant
  std::vector<PathRule> private_dirs;  // the run's own copy (policy.h)
  std::vector<PathRule> write_back;    // merged back from a private dir
  // Host unix sockets bound at the same path inside (operator grants);
  // each must be a socket itself, not a symlink to one.
  std::vector<PathRule> sockets;
  std::vector<PrivateView> private_views;  // run mode: as staged
  // Subdirectories of private directories that are not shown, only the
  // grants below them are (Pi's sessions/: every project's sessions, of
  // which a jail sees its own workspace's): an empty directory of the
  // run's own on Linux, unreadable under Seatbelt.
  std::vector<std::string> private_hidden;
  std::vector<std::string> env_pass;  // names, or NAME* prefixes
  std::vector<std::pair<std::string, std::string>> env_set;
  std::vector<std::string> host_env;  // "NAME=value" of the caller
  std::string exec_path;
  std::vector<std::string> argv;
  // Files pi-jail wrote for the jail, shown read-only at another path:
  // (jail path, host file, why, node). The synthesized git config
  // (git/identity.h) at $HOME/.config/git/config; the run's
  // refusals directory (supervisor/jail_notes.h), a directory so that
  // the files pi-jail replaces in it during the run are seen new.
  struct ShownFile {
    std::string path, source, why;
    Node node = Node::file;
  };
  std::vector<ShownFile> shown_files;
  // A directory put first on PATH inside (runtime::Program::path_first).
  std::string path_first;
  // pi-jail's own commands that stand for others inside (the pi guard,
  // supervisor/jail_notes.h): before path_first on PATH.
  std::string path_guard;
  // Host-loopback services the policy names with a port.
  std::vector<Forward> forwards;
  // Allowed SSH hosts (supervisor/ssh_access.h): each reached from the
  // jail's 127.0.0.1:`jail_port`, through the filter, as `host`:`port`.
  struct SshForward {
    int jail_port = 0;
    std::string host;
    int port = 22;
  };
  std::vector<SshForward> ssh;
  // Jail ports served on the host's loopback (operator grants; the
  // supervisor listens and relays, the jail sees nothing new).
  struct Published {
    policy::PublishSpec spec;
    std::string why;
  };
  std::vector<Published> published;
  // Ports on which the program waits for a browser's redirect after a
  // login (its profile's adapter names them: pi/profile_adapter.h).
  // While something in the jail listens on one, the Linux supervisor
  // serves it on the host's loopback (supervisor/login_callbacks.h).
  struct LoginCallback {
    std::uint16_t port = 0;
    std::string what;    // whose login waits there: "Anthropic (Claude Pro/Max)"
    std::string source;  // who named it: "profile pi"
  };
  std::vector<LoginCallback> login_callbacks;
  // Whether the program logs in to model providers inside the jail (its
  // profile's adapter says so: Pi's /login). The network filter then
  // intercepts every provider's token endpoints, bound or not, so that a
  // first login's tokens reach the jail as placeholders too
  // (credentials/run_credentials.h).
  bool logs_in = false;
  std::string logs_in_source;  // who said so, for explain ("profile pi")
  // The size of the one scratch file system /tmp, /var/tmp and /dev/shm
  // share (the Linux jail; the Seatbelt jail's TMPDIR is on the host disk).
  policy::MemorySize scratch{50, policy::MemorySize::Unit::percent_of_ram};
  Limits limits;
  // Credentials outside the jail: a host file holding the
  // system's CAs and the run's CA, which the jail trusts (mounted over the
  // distribution's bundle paths; every TLS library's variable names it).
  // Empty: no credential filter (nothing bound, and a program that does
  // not log in), nothing changes.
  std::string ca_bundle;
};

// The distribution bundle paths the run's bundle is mounted over, and the
// variables that name it (Node, OpenSSL, Python requests, curl, git, Deno).
inline constexpr std::string_view kCaBundlePaths[] = {"/etc/ssl/certs/ca-certificates.crt",
                                                      "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
inline constexpr std::string_view kCaBundleVariables[] = {"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE",
                                                          "CURL_CA_BUNDLE",      "GIT_SSL_CAINFO", "DENO_CERT"};

// The resolved policy's lists into `r` (system, grants, masks, read-only
// marks, environment), each entry keeping its source as the reason, and
// its scratch size.
void apply_policy(const policy::Policy& p, Request& r);

// Whether the jail can take login callback `port` (Request::login_callbacks):
// no forward of the policy is on it. On Linux the filter holds a forwarded
// port inside the jail, so nothing there can listen on it (the supervisor's
// watcher never sees it taken); under Seatbelt the jail must not stand in
// for that service when it is down, and the plan leaves it out. explain
// leaves such a callback out on both.
bool login_callback_free(const Request& r, std::uint16_t port);

// The problem to report when a path that must stay read-only is a symlink
// (every backend refuses to start: the link itself could be replaced).
std::string symlink_at_protected_path(const PathRule& r);

// Where the jailed command finds the network filter.
struct ProxyEndpoints {
  std::string host;  // "127.0.0.1"
  int http_port = 0;
  int socks_port = 0;
};

// The command's environment: the caller's variables that the policy
// passes, the policy's settings, then what pi-jail sets itself (HOME,
// TMPDIR, PI_JAIL=1 and, with a network filter, every client library's
// proxy variables, and with `ca_bundle` (the bundle's path as the jail
// sees it) kCaBundleVariables). Sorted by name. With a network filter,
// no variable of the caller's whose name ends in "proxy" (any case) is
// passed: the host's proxies are unreachable inside, and their URLs may
// hold credentials (an upstream proxy's are the filter's alone).
std::vector<std::string> jail_env(const Request& r, std::string_view tmpdir, const std::optional<ProxyEndpoints>& proxy,
                                  std::string_view ca_bundle = {});

}  // namespace pj::runtime
