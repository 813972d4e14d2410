// The typed messages between the supervisor and the network filter
// process (DESIGN "Process model"): what each side may say, and the one
// codec that turns a message into the bytes of one SOCK_SEQPACKET record
// and back. Pure: no sockets (channel.h sends and receives), built and
// tested on every platform. May import util and netproxy's plain types.
//
// A record is a fixed header (the magic "PJFL", the protocol version, the
// message type, the payload's length; little-endian) and the payload: the
// message's fields in a fixed order, integers little-endian, byte strings
// as a 32-bit length and the bytes. Binary rather than JSON: host names,
// reasons and credential values are arbitrary bytes, and the JSON reader
// takes only valid UTF-8 (the writer would turn a stray byte into
// U+FFFD), so a value would not come back as it went.
//
// The supervisor reads what the filter sends as hostile input (the filter
// parses the jail's bytes and a remote server's): decode_from_filter()
// refuses a wrong magic or version, an unknown type, a length that is not
// the record's, a field past its bound, an enum out of range, bytes left
// over, and descriptors the type does not carry (they are closed). The
// filter reads the supervisor's messages with the same strictness.
//
// Some fields are secrets: the run CA's key, the upstream proxy's user
// and password, a binding's real value, a token exchange's tokens. The
// bytes of a record are wiped with its buffer (util::SecretString), a
// message the decoder refuses has its secrets wiped before it is
// dropped, and a message that was sent, or whose values were taken, is
// wiped by its holder (wipe_secrets, SecretsWiped).
// Every record is at most kMaxRecord bytes; what can be long (rules,
// bindings) travels one item a message, so no bound caps a policy's size.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "net/address.h"
#include "net/proxy_url.h"
#include "netproxy/decisions.h"
#include "credentials/bindings.h"
#include "netproxy/listener_kind.h"
#include "util/result.h"
#include "util/secret.h"
#include "util/unique_fd.h"

namespace pj::filterlink {

inline constexpr std::uint32_t kMagic = 0x4c464a50;  // "PJFL" in memory order
inline constexpr std::uint16_t kVersion = 4;
inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kMaxRecord = 64 * 1024;  // header and payload
// Field bounds. Jail-supplied text the filter records is already cut to
// netproxy::kMaxJailText (plus the cut's marker); the rest is generous
// for what it holds and small against kMaxRecord.
inline constexpr size_t kMaxText = 1024;         // reasons, sources, names, messages
inline constexpr size_t kMaxHostName = 255;      // a DNS name, or a literal
inline constexpr size_t kMaxSecret = 16 * 1024;  // a credential's value, a token
inline constexpr size_t kMaxPem = 16 * 1024;     // the run CA's certificate
inline constexpr size_t kMaxAddresses = 64;      // one name answer
inline constexpr size_t kMaxListItems = 64;      // hosts of a binding, probe results
inline constexpr size_t kMaxNoProxy = 4 * 1024;  // the upstream proxy's NO_PROXY list
inline constexpr size_t kMaxListens = 64;        // run-time listeners (listen) held at once

// Numbered once for good: a later version adds types, never renumbers.
// Supervisor to filter below 64, filter to supervisor from 64.
enum class Type : std::uint16_t {
  settings = 1,          // limits and test switches; first
  rule = 2,              // one allow or deny rule
  binding = 3,           // one credential bound to hosts
  minting = 4,           // one refused minting endpoint
  upstream_ca = 5,       // the operator's extra upstream trust anchors (an fd)
  config_done = 6,       // the filter may load, lock down and answer ready
  listener = 7,          // a listening socket to serve (an fd)
  name_answer = 8,       // the addresses of a name the filter asked for
  jail_socket = 9,       // a socket of the jail's network namespace (an fd), or why not
  stop = 10,             // close every connection and exit
  run_ca = 11,           // the run's CA key and certificate (credentials bound)
  slot = 12,             // where a bound placeholder stands in auth.json
  token_endpoint = 13,   // a test build's stand-in for a provider's token endpoint
  credential_host = 14,  // an operator's extra host for a credential ([credentials] bind)
  watched = 15,          // a placeholder to look for on unbound loopback ports
  listen = 16,           // run time: a host listener to serve as a published port (an fd)
  unlisten = 17,         // run time: close that listener
  trust_roots = 18,      // the system's trust anchors for upstream servers (an fd), for a filter that opens no file
  login_endpoint = 19,   // a token endpoint intercepted with nothing bound to it: a login inside
  ready = 64,            // locked down; the run CA's certificate
  name_question = 65,
  decision = 66,      // one connection's decision
  token_update = 67,  // tokens a token exchange got: the supervisor writes auth.json
  usage = 68,         // figures for the report
  jail_socket_request = 69,
  failure = 70,        // the filter could not start: which step, errno
  probe_result = 71,   // test builds: what the filter could do after lock-down
  added_binding = 72,  // a token exchange bound a new placeholder; then token_update
  added_slot = 73,     // a token exchange put a placeholder in an auth.json field; then token_update
  unlistened = 74,     // a listener of `listen` is closed: its host port is free
};

// --- supervisor to filter ---

struct Settings {
  std::uint64_t connections_per_listener = 512;
  std::uint64_t resolver_names = 64;
  std::chrono::milliseconds handshake{10000};
  std::chrono::milliseconds idle{600000};
  std::uint64_t relay_slice = 256 * 1024;
  // Test builds only; the filter refuses them when built without.
  struct TestResolve {
    std::string host_port;  // HOST:PORT as the rules check it
    net::IpAddress addr;
    std::uint16_t port = 0;
  };
  std::vector<TestResolve> test_resolve;
  bool test_probe_after_lockdown = false;  // try files, exec, ptrace, kill; send probe_result
  // What the filter does wrong once it is ready, to test the supervisor's
  // side: abort() on the first request head; send name questions and
  // never read the answers; ask for a socket in the jail.
  enum class Misbehave : std::uint8_t { none, abort_mid_request, stop_reading, ask_jail_socket };
  Misbehave test_misbehave = Misbehave::none;
  // Where outbound connections go (netproxy/upstream.h); nullopt: out
  // directly. The proxy's name is resolved by the supervisor (the filter
  // looks up nothing before it is locked down).
  struct UpstreamProxy {
    net::ProxyUrl url;  // its user and password: secrets (at most kMaxText bytes each)
    std::vector<net::IpAddress> addrs;
    std::string no_proxy;  // net::NoProxy::str(): parsed again by the filter
  };
  std::optional<UpstreamProxy> upstream_proxy;
};

struct RuleMessage {
  enum class Kind : std::uint8_t { allow = 0, deny = 1 };
  Kind kind = Kind::allow;
  std::string pattern;  // net::NetPattern::str(): parsed again by the filter
  std::string source;
  net::PrivateRanges private_ranges = net::PrivateRanges::refused;
};

struct BindingMessage {
  credentials::Binding binding;
};

struct MintingMessage {
  credentials::MintingEndpoint endpoint;
};

struct UpstreamCa {
  util::UniqueFd pem;  // a regular file opened by the supervisor, read once
};

// The trust store for upstream servers in place of OpenSSL's default
// paths, where the filter may open no file at all (macOS: its Seatbelt
// profile grants none): the file those paths name, opened by the
// supervisor (credentials::system_roots_file()).
struct TrustRoots {
  util::UniqueFd pem;  // a regular file, read once
};

// The run's CA, made by the supervisor (its certificate is in the jail's
// trust bundle before the filter starts): the filter mints leaves with it.
struct RunCa {
  std::string key_pem;  // PKCS#8, unencrypted: a secret
  std::string cert_pem;
};

// Where a placeholder the filter holds the real value of stands in Pi's
// auth.json, and where its value came from: the token exchange's
// "current refresh token" of an entry (credentials::Table::current_in).
struct SlotMessage {
  std::string placeholder;
  std::string entry;  // an auth.json key
  std::string field;  // "access", "refresh", "key", "token"
  credentials::Origin origin = credentials::Origin::host;
};

// A loopback stand-in for a provider's token endpoint (test builds).
struct TokenEndpointMessage {
  std::string id;  // the provider's auth.json key
  std::string host;
  std::uint16_t port = 0;
  std::string path;
};

// A host the filter intercepts though no credential is bound to it: a
// provider's token endpoint, where a login inside the jail gets its tokens
// (credentials::Intercept::login_endpoints). TLS on `port`.
struct LoginEndpointMessage {
  std::string host;
  std::uint16_t port = 443;
};

// [credentials] bind: one more host a credential is sent to.
struct CredentialHostMessage {
  std::string credential;  // a provider id or a variable name
  std::string host;        // as the policy wrote it (parse_bind_target)
  std::string source;      // "policy.toml:3:1"
};

struct WatchedMessage {
  netproxy::Watched watched;
};

struct ConfigDone {};

struct ListenerMessage {
  using Kind = netproxy::ListenerKind;
  Kind kind = Kind::http;
  struct Target {
    net::IpAddress addr;
    std::uint16_t port = 0;
    std::string host;
    std::string source;
  };
  std::optional<Target> target;  // forward and publish only
  util::UniqueFd fd;
};

// A listener on the host's loopback that the supervisor made while the
// run (the profile's login callbacks, runtime::LoginCallback) wants a
// port of the jail served there: served as a published port, connected
// to `target` in the jail through the supervisor's jail sockets and never
// checked against the rules, until unlisten with its id. Its target is
// the jail's 127.0.0.1 or ::1 (valid_listen_target), never anywhere else.
struct ListenMessage {
  std::uint64_t id = 0;  // 1 and up, the supervisor's, never reused in a run
  ListenerMessage::Target target;
  util::UniqueFd fd;
};
// Whether `t` is where a listen message may send the host's
// connections: the jail's 127.0.0.1 or ::1 (named so in `host`), a port.
bool valid_listen_target(const ListenerMessage::Target& t);

struct UnlistenMessage {
  std::uint64_t id = 0;
};

struct NameAnswer {
  std::uint64_t id = 0;
  std::vector<net::IpAddress> addrs;
  std::string error;  // empty when addrs holds the answer
};

struct JailSocket {
  std::uint64_t id = 0;
  int err = 0;        // errno when no socket could be made
  util::UniqueFd fd;  // valid exactly when err is 0
};

struct Stop {};

// --- filter to supervisor ---

struct Ready {
  std::string ca_pem;  // empty when no credential is bound
};

struct NameQuestion {
  std::uint64_t id = 0;
  std::string host;  // a normalised name, never a literal
};

struct DecisionMessage {
  netproxy::Decision decision;
};

// One token exchange's end: the bindings and slots it added (sent just
// before, as added_binding and added_slot) are the supervisor's from now
// on, and the tokens the response carried (real values) go to the host's
// auth.json (a renewal) or wait for consent (a login). `ok`: the
// response's status was 2xx; without it no token is applied.
struct TokenUpdate {
  credentials::ExchangeKind kind = credentials::ExchangeKind::login;
  std::string entry;  // the auth.json key
  bool ok = false;
  std::optional<std::string> access, refresh;
  std::optional<std::int64_t> expires_ms;
  std::string account;
  std::string host, path;  // the token endpoint (a normalised host; the request's path)
};

struct AddedBinding {
  credentials::Binding binding;
};

// `placeholder` (an added binding's, or one the response echoed) now
// stands in field `field` of the exchange's entry.
struct AddedSlot {
  std::string placeholder;
  std::string field;
};

// The filter closed the listener of listen `id` (told by unlisten): the
// supervisor may bind that host port again.
struct Unlistened {
  std::uint64_t id = 0;
};

struct Usage {
  std::uint64_t open_connections = 0;
  std::uint64_t intercepted = 0;
  std::uint64_t peak_rss_kib = 0;
};

struct JailSocketRequest {
  std::uint64_t id = 0;
  int family = 0;  // AF_INET or AF_INET6
};

struct Failure {
  std::string step;  // "lock down (seccomp)"
  int err = 0;
  std::string message;
};

struct ProbeResult {
  struct Attempt {
    std::string what;  // "open /etc/passwd"
    int err = 0;       // 0: it succeeded (a containment failure)
  };
  std::vector<Attempt> attempts;
};

using FromSupervisor =
    std::variant<Settings, RuleMessage, BindingMessage, MintingMessage, UpstreamCa, RunCa, SlotMessage,
                 TokenEndpointMessage, CredentialHostMessage, WatchedMessage, ConfigDone, ListenerMessage, NameAnswer,
                 JailSocket, Stop, ListenMessage, UnlistenMessage, TrustRoots, LoginEndpointMessage>;
using FromFilter = std::variant<Ready, NameQuestion, DecisionMessage, TokenUpdate, Usage, JailSocketRequest, Failure,
                                ProbeResult, AddedBinding, AddedSlot, Unlistened>;

// One record: its bytes and the descriptors it carries (borrowed: sending
// dups nothing and closes nothing).
struct Record {
  util::SecretString bytes;
  std::vector<int> fds;
};

// Encoding fails only for a message that breaks a bound (a field too
// long, a descriptor missing) or, for listen, whose target is not valid
// (valid_listen_target): the sender's bug, never sent half.
util::Result<Record> encode(const FromSupervisor& m);
util::Result<Record> encode(const FromFilter& m);

// The size of the record whose first kHeaderSize bytes are `header`, as
// its length field says: how much of a stream is that record (channel.h).
// nullopt when that is more than kMaxRecord; the rest of the header is
// checked when the record is decoded.
std::optional<size_t> record_size(std::string_view header);

// Decode one record as received; `fds` are the descriptors that came with
// it, owned here (closed unless the message takes them).
util::Result<FromSupervisor> decode_from_supervisor(std::string_view bytes, std::vector<util::UniqueFd> fds);
util::Result<FromFilter> decode_from_filter(std::string_view bytes, std::vector<util::UniqueFd> fds);

// The secrets `m` holds (see above) overwritten and emptied; its other
// fields are left. For the holder of a message once it was sent, or once
// what it carried was moved to where it is used.
void wipe_secrets(FromSupervisor& m);
void wipe_secrets(FromFilter& m);

// wipe_secrets(m) when it goes out of scope: on every way out of a
// function that sends or takes a message.
template <typename Message>
class SecretsWiped {
public:
  explicit SecretsWiped(Message& m) : m_(m) {}
  ~SecretsWiped() { wipe_secrets(m_); }
  SecretsWiped(const SecretsWiped&) = delete;
  SecretsWiped& operator=(const SecretsWiped&) = delete;

private:
  Message& m_;
};

}  // namespace pj::filterlink
