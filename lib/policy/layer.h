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

namespace pj::policy {

// Where an entry came from: "file:line:column", or a command-line flag.
struct Source {
  std::string file;  // path, "profile pi (built in)", or "--allow-read"
  int line = 0;      // 0: no position (command line)
  int column = 0;
  std::string str() const;
};

struct Diagnostic {
  Source where;
  std::string message;
  std::string str() const { return where.str() + ": " + message; }
};

// Who wrote a layer. Operators decide; a project only asks. A
// git_worktree grant is derived by pi-jail from a checked worktree (see
// Context::worktree), bounded by the operators' limits like a request.
enum class Authority { profile, system, user, command_line, project, git_worktree };
const char* authority_name(Authority a);
inline bool is_operator(Authority a) { return a != Authority::project && a != Authority::git_worktree; }

struct Entry {
  std::string text;
  Source src;
};

struct Setting {
  std::string name;
  std::string value;
  Source src;
};

struct Flag {
  bool value = false;
  Source src;
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
};

// "SIZE": digits with an optional binary unit K, M, G or T (either case),
// or "N%" of RAM with N from 1 to 100. Returns the size or an error message.
std::optional<MemorySize> parse_memory_size(std::string_view text, std::string& error);

struct SizeSetting {
  MemorySize size;
  Source src;
};

// Each list key is either absent (no bound from this layer) or a list;
// `scratch` is the size of the jail's one scratch file system (/tmp,
// /var/tmp and /dev/shm together).
struct Limits {
  std::optional<std::vector<Entry>> read, write, network, env;
  std::optional<SizeSetting> scratch;
  Source src;  // the [limits] table
};

struct Layer {
  Authority authority = Authority::project;
  std::string name;
  // [filesystem]
  std::vector<Entry> system;     // read-only when present; symlinks kept as symlinks
  std::vector<Entry> read;       // read-only grants
  std::vector<Entry> write;      // read-write grants
  std::vector<Entry> deny;       // masked, even under a grant
  std::vector<Entry> read_only;  // read-only even under a writable grant
  std::vector<Entry> private_dirs;  // "private": the run's own copy (operators only)
  std::vector<Entry> write_back;    // files of a private dir merged back at the end (operators only)
  // [network]
  std::vector<Entry> net_allow, net_deny;
  // The allow entries written as { host = "...", allow_private = true }
  // (also in net_allow): their names may resolve to private ranges.
  std::vector<Entry> net_allow_private;
  // [env]
  std::vector<Entry> env_pass;   // names or NAME_* globs
  std::vector<Setting> env_set;
  // [credentials] (operators only; see supervisor/credentials.h)
  struct CredentialHost {
    std::string credential;  // a provider ("anthropic") or an environment variable name
    Entry host;              // "name" or "name:port", no wildcard
  };
  std::vector<CredentialHost> cred_bind;   // bind = { anthropic = ["llm.corp.example"] }
  std::vector<Entry> cred_pass_through;    // pass_through = ["AWS_ACCESS_KEY_ID"]: the real value, reported
  // [limits]
  std::optional<Limits> limits;
  // [hardening]
  std::optional<Entry> landlock;  // "if-available" | "required"
  std::optional<Flag> unsafe_allow_ptrace;
  std::optional<Flag> unsafe_nested_user_namespaces;
  // [policy]
  std::optional<Entry> on_excess;  // "warn" | "error"
};

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

// A network pattern: "host", "*.domain", "1.2.3.4", "[::1]", each with an
// optional ":port". Returns the normalised form or an error message.
struct NetPattern {
  std::string host;        // lower case, no trailing dot; "*.x" for wildcards
  bool wildcard = false;   // matches subdomains of host (not host itself)
  int port = 0;            // 0: the default ports (80 and 443)
  std::string str() const;
};
std::optional<NetPattern> parse_net_pattern(std::string_view text, std::string& error);

}  // namespace pj::policy
