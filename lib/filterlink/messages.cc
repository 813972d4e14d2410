#include "filterlink/messages.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <cstring>
#include <type_traits>

#include "filterlink/wire.h"
#include "util/secret.h"

namespace pj::filterlink {

namespace {

using net::IpAddress;
using wire::Writer;

// The largest errno a message carries (Linux's MAX_ERRNO).
constexpr std::int64_t kMaxErrno = 4095;
// netproxy::bounded() adds "...[+N bytes]" to what it cuts.
constexpr size_t kMaxBoundedText = netproxy::kMaxJailText + 32;

const char* type_name(Type t) {
  switch (t) {
    case Type::settings: return "settings";
    case Type::rule: return "rule";
    case Type::binding: return "binding";
    case Type::minting: return "minting";
    case Type::upstream_ca: return "upstream_ca";
    case Type::config_done: return "config_done";
    case Type::listener: return "listener";
    case Type::name_answer: return "name_answer";
    case Type::jail_socket: return "jail_socket";
    case Type::stop: return "stop";
    case Type::run_ca: return "run_ca";
    case Type::slot: return "slot";
    case Type::token_endpoint: return "token_endpoint";
    case Type::credential_host: return "credential_host";
    case Type::watched: return "watched";
    case Type::listen: return "listen";
    case Type::unlisten: return "unlisten";
    case Type::trust_roots: return "trust_roots";
    case Type::login_endpoint: return "login_endpoint";
    case Type::ready: return "ready";
    case Type::name_question: return "name_question";
    case Type::decision: return "decision";
    case Type::token_update: return "token_update";
    case Type::usage: return "usage";
    case Type::jail_socket_request: return "jail_socket_request";
    case Type::failure: return "failure";
    case Type::probe_result: return "probe_result";
    case Type::added_binding: return "added_binding";
    case Type::added_slot: return "added_slot";
    case Type::unlistened: return "unlistened";
  }
  return "unknown";
}

// Reads one payload's fields in order. The first field that does not fit
// its bound is remembered and every later read yields a default, so a
// decoder reads all its fields and asks finish() once.
class Fields {
public:
  Fields(std::string_view payload, Type type) : r_(payload), type_(type) {}

  std::uint64_t u64(const char* name) { return got(r_.u64(), name, std::uint64_t{0}); }
  std::int64_t i64(const char* name) { return got(r_.i64(), name, std::int64_t{0}); }
  // Out of range gives `min`: a count read from hostile bytes never
  // drives a loop past its bound, even on the way to the error.
  std::uint64_t in_range(const char* name, std::uint64_t min, std::uint64_t max) {
    auto v = u64(name);
    bool ok = v >= min && v <= max;
    check(ok, name, fmt::format("out of range ({} to {})", min, max));
    return ok ? v : min;
  }
  std::uint8_t byte(const char* name) { return got(r_.u8(), name, std::uint8_t{0}); }
  bool flag(const char* name) {
    auto v = got(r_.u8(), name, std::uint8_t{0});
    check(v <= 1, name, "not 0 or 1");
    return v == 1;
  }
  // An enum stored as one byte, valid from 0 to `last`.
  template <typename E>
  E choice(const char* name, E last) {
    auto v = got(r_.u8(), name, std::uint8_t{0});
    check(v <= static_cast<std::uint8_t>(last), name, "not a known value");
    return static_cast<E>(v <= static_cast<std::uint8_t>(last) ? v : 0);
  }
  std::string text(const char* name, size_t max, size_t min = 0) {
    auto s = got(r_.bytes(max), name, std::string());
    check(s.size() >= min, name, "empty");
    return s;
  }
  std::optional<std::string> optional_text(const char* name, size_t max) {
    if (!flag(name)) return std::nullopt;
    return text(name, max, 1);
  }
  // A secret, read into `into` (moved there: no copy is left behind),
  // which finish() wipes when it refuses the message: `into` must live
  // until then.
  void secret(std::string& into, const char* name, size_t max, size_t min = 0) {
    secrets_.push_back(&into);
    if (auto s = r_.bytes(max))
      into = std::move(*s);
    else
      check(false, name, "missing or past its bound");
    check(into.size() >= min, name, "empty");
  }
  void optional_secret(std::optional<std::string>& into, const char* name, size_t max) {
    if (flag(name)) secret(into.emplace(), name, max, 1);
  }
  int err(const char* name) { return static_cast<int>(in_range(name, 0, kMaxErrno)); }
  IpAddress address(const char* name) {
    IpAddress a;
    auto family = got(r_.u8(), name, std::uint8_t{0});
    check(family == 4 || family == 6, name, "not IPv4 or IPv6");
    a.v6 = family == 6;
    auto bytes = r_.raw(a.v6 ? 16 : 4);
    if (!bytes) return got(std::optional<IpAddress>(), name, a);
    std::memcpy(a.v6 ? static_cast<void*>(&a.v6addr) : static_cast<void*>(&a.v4addr), bytes->data(), bytes->size());
    return a;
  }
  std::uint16_t port(const char* name, std::uint64_t min = 1) {
    return static_cast<std::uint16_t>(in_range(name, min, 65535));
  }
  size_t count(const char* name, size_t max) { return static_cast<size_t>(in_range(name, 0, max)); }

  void check(bool ok, const char* name, std::string_view why) {
    if (!ok && !error_) error_ = fmt::format("{}: {}", name, why);
  }
  util::Status finish() {
    if (!error_ && !r_.at_end()) error_ = "bytes after the last field";
    if (!error_) return {};
    for (std::string* s : secrets_) util::wipe(*s);
    return util::Error::invalid(fmt::format("{} message: {}", type_name(type_), *error_));
  }

private:
  template <typename T>
  T got(std::optional<T> v, const char* name, T fallback) {
    if (!v) {
      check(false, name, "missing or past its bound");
      return fallback;
    }
    return error_ ? std::move(fallback) : std::move(*v);
  }
  wire::Reader r_;
  Type type_;
  std::optional<std::string> error_;
  std::vector<std::string*> secrets_;  // read by secret(), to wipe when refused
};

void put_address(Writer& w, const IpAddress& a) {
  w.u8(a.v6 ? 6 : 4);
  if (a.v6)
    w.raw({reinterpret_cast<const char*>(&a.v6addr), 16});
  else
    w.raw({reinterpret_cast<const char*>(&a.v4addr), 4});
}

void put_optional(Writer& w, const std::optional<std::string>& s) {
  w.u8(s.has_value());
  if (s) w.bytes(*s);
}

std::int64_t epoch_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_epoch_ms(std::int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

bool is_name(std::string_view host) {
  auto n = net::normalise_host(host);
  return n && *n == host && !net::parse_ip(host);
}

// An auth.json key as the profile's provider table spells them.
bool is_entry_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// A value that may go into a request header: no CR, LF or NUL.
bool header_safe(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

// --- each message's fields, in order ---

void put(Writer& w, const Settings& s) {
  w.u64(s.connections_per_listener);
  w.u64(s.resolver_names);
  w.u64(static_cast<std::uint64_t>(s.handshake.count()));
  w.u64(static_cast<std::uint64_t>(s.idle.count()));
  w.u64(s.relay_slice);
  w.u64(s.test_resolve.size());
  for (const auto& t : s.test_resolve) {
    w.bytes(t.host_port);
    put_address(w, t.addr);
    w.u64(t.port);
  }
  w.u8(s.test_probe_after_lockdown);
  w.u8(static_cast<std::uint8_t>(s.test_misbehave));
  w.u8(s.upstream_proxy.has_value());
  if (const auto& up = s.upstream_proxy) {
    w.bytes(up->url.host);
    w.u64(static_cast<std::uint64_t>(up->url.port));
    put_optional(w, up->url.user);
    w.bytes(up->url.password);
    w.u64(up->addrs.size());
    for (const auto& a : up->addrs) put_address(w, a);
    w.bytes(up->no_proxy);
  }
}

util::Result<Settings> take_settings(Fields& f) {
  Settings s;
  s.connections_per_listener = f.in_range("connections_per_listener", 1, 1 << 16);
  s.resolver_names = f.in_range("resolver_names", 1, 1 << 12);
  s.handshake = std::chrono::milliseconds(f.in_range("handshake", 1, 3600 * 1000));
  s.idle = std::chrono::milliseconds(f.in_range("idle", 1, 7 * 24 * 3600 * 1000LL));
  s.relay_slice = f.in_range("relay_slice", 1, 64 << 20);
  size_t n = f.count("test_resolve", kMaxListItems);
  for (size_t i = 0; i < n; ++i) {
    Settings::TestResolve t;
    t.host_port = f.text("test_resolve host", kMaxHostName + 6, 1);
    f.check(net::parse_host_port(t.host_port).has_value(), "test_resolve host", "not HOST:PORT");
    t.addr = f.address("test_resolve address");
    t.port = f.port("test_resolve port");
    s.test_resolve.push_back(std::move(t));
  }
  s.test_probe_after_lockdown = f.flag("test_probe_after_lockdown");
  s.test_misbehave = f.choice("test_misbehave", Settings::Misbehave::ask_jail_socket);
  if (f.flag("upstream_proxy")) {
    Settings::UpstreamProxy& up = s.upstream_proxy.emplace();  // in place: finish() may wipe it
    up.url.host = f.text("upstream_proxy host", kMaxHostName, 1);
    auto normal = net::normalise_host(up.url.host);
    f.check(normal && *normal == up.url.host, "upstream_proxy host", "not a normalised name or address");
    up.url.port = f.port("upstream_proxy port");
    f.optional_secret(up.url.user, "upstream_proxy user", kMaxText);
    f.secret(up.url.password, "upstream_proxy password", kMaxText);
    const size_t addrs = f.count("upstream_proxy addresses", kMaxAddresses);
    f.check(addrs > 0, "upstream_proxy addresses", "none");
    for (size_t i = 0; i < addrs; ++i) up.addrs.push_back(f.address("upstream_proxy address"));
    up.no_proxy = f.text("upstream_proxy no_proxy", kMaxNoProxy);
    f.check(net::NoProxy::parse(up.no_proxy).str() == up.no_proxy && net::NoProxy::parse(up.no_proxy).ignored().empty(),
            "upstream_proxy no_proxy", "not a normalised NO_PROXY list");
  }
  if (auto st = f.finish(); !st) return st.take_error();
  return s;
}

void put(Writer& w, const RuleMessage& m) {
  w.u8(static_cast<std::uint8_t>(m.kind));
  w.bytes(m.pattern);
  w.bytes(m.source);
  w.u8(m.private_ranges == net::PrivateRanges::allowed);
}

util::Result<RuleMessage> take_rule(Fields& f) {
  RuleMessage m;
  m.kind = f.choice("kind", RuleMessage::Kind::deny);
  m.pattern = f.text("pattern", kMaxHostName + 8, 1);
  f.check(net::parse_net_pattern(m.pattern).ok(), "pattern", "not a network pattern");
  m.source = f.text("source", kMaxText);
  m.private_ranges = f.flag("private_ranges") ? net::PrivateRanges::allowed : net::PrivateRanges::refused;
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const credentials::Binding& b) {
  w.bytes(b.name);
  w.bytes(b.placeholder);
  w.bytes(b.real);
  w.u64(b.hosts.size());
  for (const auto& h : b.hosts) {
    w.bytes(h.name);
    w.u64(h.port);
    w.u8(static_cast<std::uint8_t>(h.wire));
  }
  w.u8(static_cast<std::uint8_t>(b.carriage));
  w.bytes(b.header);
}
void put(Writer& w, const BindingMessage& m) { put(w, m.binding); }
void put(Writer& w, const AddedBinding& m) { put(w, m.binding); }

// A binding's fields into `b`; the caller finishes (`b` lives until then).
void take_binding_fields(Fields& f, credentials::Binding& b) {
  b.name = f.text("name", kMaxText, 1);
  b.placeholder = f.text("placeholder", kMaxSecret, 1);
  f.secret(b.real, "real", kMaxSecret, 1);
  f.check(header_safe(b.placeholder) && header_safe(b.real), "value", "holds CR, LF or NUL");
  size_t n = f.count("hosts", kMaxListItems);
  f.check(n > 0, "hosts", "none");
  for (size_t i = 0; i < n; ++i) {
    credentials::BoundHost h;
    h.name = f.text("host", kMaxHostName, 1);
    h.port = f.port("port");
    h.wire = f.choice("wire", netproxy::Wire::plain_http);
    b.hosts.push_back(std::move(h));
  }
  b.carriage = f.choice("carriage", credentials::Carriage::token_exchange);
  b.header = f.text("header", kMaxText);
}

template <typename M>
util::Result<M> take_binding_as(Fields& f) {
  M m;
  take_binding_fields(f, m.binding);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const RunCa& m) {
  w.bytes(m.key_pem);
  w.bytes(m.cert_pem);
}

util::Result<RunCa> take_run_ca(Fields& f) {
  RunCa m;
  f.secret(m.key_pem, "key_pem", kMaxPem, 1);
  m.cert_pem = f.text("cert_pem", kMaxPem, 1);
  f.check(m.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "key_pem", "not a PKCS#8 PEM key");
  f.check(m.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"), "cert_pem", "not a PEM certificate");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const SlotMessage& m) {
  w.bytes(m.placeholder);
  w.bytes(m.entry);
  w.bytes(m.field);
  w.u8(static_cast<std::uint8_t>(m.origin));
}

util::Result<SlotMessage> take_slot(Fields& f) {
  SlotMessage m;
  m.placeholder = f.text("placeholder", kMaxSecret, 1);
  m.entry = f.text("entry", kMaxText, 1);
  m.field = f.text("field", kMaxText, 1);
  f.check(credentials::is_secret_field(m.field), "field", "not a secret field of auth.json");
  m.origin = f.choice("origin", credentials::Origin::login);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const TokenEndpointMessage& m) {
  w.bytes(m.id);
  w.bytes(m.host);
  w.u64(m.port);
  w.bytes(m.path);
}

util::Result<TokenEndpointMessage> take_token_endpoint(Fields& f) {
  TokenEndpointMessage m;
  m.id = f.text("id", kMaxText, 1);
  m.host = f.text("host", kMaxHostName, 1);
  m.port = f.port("port");
  m.path = f.text("path", kMaxText, 1);
  f.check(m.path.starts_with('/'), "path", "not a path");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const LoginEndpointMessage& m) {
  w.bytes(m.host);
  w.u64(m.port);
}

util::Result<LoginEndpointMessage> take_login_endpoint(Fields& f) {
  LoginEndpointMessage m;
  m.host = f.text("host", kMaxHostName, 1);
  m.port = f.port("port");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const CredentialHostMessage& m) {
  w.bytes(m.credential);
  w.bytes(m.host);
  w.bytes(m.source);
}

util::Result<CredentialHostMessage> take_credential_host(Fields& f) {
  CredentialHostMessage m;
  m.credential = f.text("credential", kMaxText, 1);
  m.host = f.text("host", kMaxHostName + 16, 1);  // "http://" and ":PORT" around a name (parse_bind_target)
  m.source = f.text("source", kMaxText);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const WatchedMessage& m) {
  w.bytes(m.watched.placeholder);
  w.bytes(m.watched.name);
  w.bytes(m.watched.credential);
}

util::Result<WatchedMessage> take_watched(Fields& f) {
  WatchedMessage m;
  m.watched.placeholder = f.text("placeholder", kMaxSecret, 1);
  m.watched.name = f.text("name", kMaxText, 1);
  m.watched.credential = f.text("credential", kMaxText, 1);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const AddedSlot& m) {
  w.bytes(m.placeholder);
  w.bytes(m.field);
}

util::Result<AddedSlot> take_added_slot(Fields& f) {
  AddedSlot m;
  m.placeholder = f.text("placeholder", kMaxSecret, 1);
  m.field = f.text("field", kMaxText, 1);
  f.check(credentials::is_secret_field(m.field), "field", "not a secret field of auth.json");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const MintingMessage& m) {
  w.bytes(m.endpoint.host);
  w.bytes(m.endpoint.path_prefix);
}

util::Result<MintingMessage> take_minting(Fields& f) {
  MintingMessage m;
  m.endpoint.host = f.text("host", kMaxHostName, 1);
  m.endpoint.path_prefix = f.text("path_prefix", kMaxText, 1);
  f.check(m.endpoint.path_prefix.starts_with('/'), "path_prefix", "not a path");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put_target(Writer& w, const ListenerMessage::Target& t) {
  put_address(w, t.addr);
  w.u64(t.port);
  w.bytes(t.host);
  w.bytes(t.source);
}

void put(Writer& w, const ListenerMessage& m) {
  w.u8(static_cast<std::uint8_t>(m.kind));
  w.u8(m.target.has_value());
  if (m.target) put_target(w, *m.target);
}

// A target's fields; the caller finishes.
ListenerMessage::Target take_target(Fields& f) {
  ListenerMessage::Target t;
  t.addr = f.address("address");
  t.port = f.port("port");
  t.host = f.text("host", kMaxHostName, 1);
  t.source = f.text("source", kMaxText);
  return t;
}

util::Result<ListenerMessage> take_listener(Fields& f) {
  ListenerMessage m;
  m.kind = f.choice("kind", ListenerMessage::Kind::publish);
  bool has_target = f.flag("target");
  bool needs_target = m.kind == ListenerMessage::Kind::forward || m.kind == ListenerMessage::Kind::publish;
  f.check(has_target == needs_target, "target", needs_target ? "missing" : "given for a proxy listener");
  if (has_target) m.target = take_target(f);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const ListenMessage& m) {
  w.u64(m.id);
  put_target(w, m.target);
}

util::Result<ListenMessage> take_listen(Fields& f) {
  ListenMessage m;
  m.id = f.in_range("id", 1, UINT64_MAX);
  m.target = take_target(f);
  f.check(valid_listen_target(m.target), "target", "not the jail's 127.0.0.1 or ::1");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const UnlistenMessage& m) { w.u64(m.id); }
void put(Writer& w, const Unlistened& m) { w.u64(m.id); }

// unlisten and unlistened: an id of a listen message.
template <typename M>
util::Result<M> take_listen_id(Fields& f) {
  M m;
  m.id = f.in_range("id", 1, UINT64_MAX);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const NameAnswer& m) {
  w.u64(m.id);
  w.u64(m.addrs.size());
  for (const auto& a : m.addrs) put_address(w, a);
  w.bytes(m.error);
}

util::Result<NameAnswer> take_name_answer(Fields& f) {
  NameAnswer m;
  m.id = f.u64("id");
  size_t n = f.count("addresses", kMaxAddresses);
  for (size_t i = 0; i < n; ++i) m.addrs.push_back(f.address("address"));
  m.error = f.text("error", kMaxText);
  f.check(m.error.empty() || m.addrs.empty(), "error", "given with addresses");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const JailSocket& m) {
  w.u64(m.id);
  w.u64(static_cast<std::uint64_t>(m.err));
}

util::Result<JailSocket> take_jail_socket(Fields& f) {
  JailSocket m;
  m.id = f.u64("id");
  m.err = f.err("errno");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const Ready& m) { w.bytes(m.ca_pem); }

util::Result<Ready> take_ready(Fields& f) {
  Ready m;
  m.ca_pem = f.text("ca_pem", kMaxPem);
  f.check(m.ca_pem.empty() || m.ca_pem.starts_with("-----BEGIN CERTIFICATE-----\n"), "ca_pem", "not a PEM certificate");
  f.check(m.ca_pem.find('\0') == std::string::npos, "ca_pem", "holds NUL");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const NameQuestion& m) {
  w.u64(m.id);
  w.bytes(m.host);
}

util::Result<NameQuestion> take_name_question(Fields& f) {
  NameQuestion m;
  m.id = f.u64("id");
  m.host = f.text("host", kMaxHostName, 1);
  f.check(is_name(m.host), "host", "not a normalised host name");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const DecisionMessage& m) {
  const auto& d = m.decision;
  w.i64(epoch_ms(d.time));
  w.i64(epoch_ms(d.last));
  w.u8(static_cast<std::uint8_t>(d.protocol));
  w.bytes(netproxy::bounded(d.host));
  w.u64(static_cast<std::uint64_t>(d.port));
  w.bytes(d.address);
  w.u8(d.allowed);
  w.bytes(netproxy::bounded(d.reason));
  w.u8(d.rule_refusal);
  w.bytes(netproxy::bounded(d.unbound_credential));
  w.u64(d.count);
  w.u64(d.bytes_up);
  w.u64(d.bytes_down);
  w.i64(d.duration_ms);
}

util::Result<DecisionMessage> take_decision(Fields& f) {
  DecisionMessage m;
  auto& d = m.decision;
  // From 1970 to the last millisecond system_clock's nanoseconds hold
  // (in 2262): a later time the filter made up would overflow them.
  constexpr std::uint64_t kMaxEpochMs = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count());
  d.time = from_epoch_ms(static_cast<std::int64_t>(f.in_range("time", 0, kMaxEpochMs)));
  d.last = from_epoch_ms(static_cast<std::int64_t>(f.in_range("last", 0, kMaxEpochMs)));
  d.protocol = f.choice("protocol", netproxy::Protocol::credential);
  d.host = f.text("host", kMaxBoundedText);
  d.port = f.port("port", 0);
  d.address = f.text("address", 64);
  f.check(d.address.empty() || net::parse_ip(d.address), "address", "not an IP address");
  d.allowed = f.flag("allowed");
  d.reason = f.text("reason", kMaxBoundedText);
  d.rule_refusal = f.flag("rule_refusal");
  // The summary suggests an allow rule for a rule refusal's host:port, and
  // the relay says so only of a valid one (netproxy/connection.cc).
  f.check(!d.rule_refusal || (d.port > 0 && net::normalise_host(d.host).has_value()), "rule_refusal",
          "for no valid host:port");
  d.unbound_credential = f.text("unbound_credential", kMaxBoundedText);
  d.count = f.in_range("count", 1, UINT64_MAX);
  d.bytes_up = f.u64("bytes_up");
  d.bytes_down = f.u64("bytes_down");
  d.duration_ms = f.i64("duration_ms");
  f.check(d.duration_ms >= 0, "duration_ms", "negative");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const TokenUpdate& m) {
  w.u8(static_cast<std::uint8_t>(m.kind));
  w.bytes(m.entry);
  w.u8(m.ok);
  put_optional(w, m.access);
  put_optional(w, m.refresh);
  w.u8(m.expires_ms.has_value());
  if (m.expires_ms) w.i64(*m.expires_ms);
  w.bytes(m.account);
  w.bytes(m.host);
  w.bytes(m.path);
}

util::Result<TokenUpdate> take_token_update(Fields& f) {
  TokenUpdate m;
  m.kind = f.choice("kind", credentials::ExchangeKind::login);
  m.entry = f.text("entry", kMaxText, 1);
  f.check(is_entry_name(m.entry), "entry", "not an auth.json key");
  m.ok = f.flag("ok");
  f.optional_secret(m.access, "access", kMaxSecret);
  f.optional_secret(m.refresh, "refresh", kMaxSecret);
  f.check(header_safe(m.access.value_or("")) && header_safe(m.refresh.value_or("")), "token", "holds CR, LF or NUL");
  if (f.flag("expires")) m.expires_ms = f.i64("expires_ms");
  f.check(m.expires_ms.value_or(0) >= 0, "expires_ms", "negative");
  m.account = f.text("account", kMaxText);
  m.host = f.text("host", kMaxHostName, 1);
  m.path = f.text("path", kMaxText, 1);
  f.check(m.path.starts_with('/'), "path", "not a path");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const Usage& m) {
  w.u64(m.open_connections);
  w.u64(m.intercepted);
  w.u64(m.peak_rss_kib);
}

util::Result<Usage> take_usage(Fields& f) {
  Usage m;
  m.open_connections = f.u64("open_connections");
  m.intercepted = f.u64("intercepted");
  m.peak_rss_kib = f.u64("peak_rss_kib");
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const JailSocketRequest& m) {
  w.u64(m.id);
  w.u8(m.family == AF_INET6 ? 6 : m.family == AF_INET ? 4 : 0);
}

util::Result<JailSocketRequest> take_jail_socket_request(Fields& f) {
  JailSocketRequest m;
  m.id = f.u64("id");
  auto family = f.byte("family");  // one byte, as put() writes it
  f.check(family == 4 || family == 6, "family", "not IPv4 or IPv6");
  m.family = family == 6 ? AF_INET6 : AF_INET;
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const Failure& m) {
  w.bytes(m.step);
  w.u64(static_cast<std::uint64_t>(m.err));
  w.bytes(m.message);
}

util::Result<Failure> take_failure(Fields& f) {
  Failure m;
  m.step = f.text("step", kMaxText, 1);
  m.err = f.err("errno");
  m.message = f.text("message", kMaxText);
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

void put(Writer& w, const ProbeResult& m) {
  w.u64(m.attempts.size());
  for (const auto& a : m.attempts) {
    w.bytes(a.what);
    w.u64(static_cast<std::uint64_t>(a.err));
  }
}

util::Result<ProbeResult> take_probe_result(Fields& f) {
  ProbeResult m;
  size_t n = f.count("attempts", kMaxListItems);
  for (size_t i = 0; i < n; ++i) {
    ProbeResult::Attempt a;
    a.what = f.text("what", kMaxText, 1);
    a.err = f.err("errno");
    m.attempts.push_back(std::move(a));
  }
  if (auto st = f.finish(); !st) return st.take_error();
  return m;
}

// Empty payloads.
void put(Writer&, const ConfigDone&) {}
void put(Writer&, const Stop&) {}
void put(Writer&, const UpstreamCa&) {}
void put(Writer&, const TrustRoots&) {}

// --- the record around the payload ---

template <typename M>
constexpr Type type_of() {
  if constexpr (std::is_same_v<M, Settings>)
    return Type::settings;
  else if constexpr (std::is_same_v<M, RuleMessage>)
    return Type::rule;
  else if constexpr (std::is_same_v<M, BindingMessage>)
    return Type::binding;
  else if constexpr (std::is_same_v<M, MintingMessage>)
    return Type::minting;
  else if constexpr (std::is_same_v<M, UpstreamCa>)
    return Type::upstream_ca;
  else if constexpr (std::is_same_v<M, TrustRoots>)
    return Type::trust_roots;
  else if constexpr (std::is_same_v<M, RunCa>)
    return Type::run_ca;
  else if constexpr (std::is_same_v<M, SlotMessage>)
    return Type::slot;
  else if constexpr (std::is_same_v<M, TokenEndpointMessage>)
    return Type::token_endpoint;
  else if constexpr (std::is_same_v<M, CredentialHostMessage>)
    return Type::credential_host;
  else if constexpr (std::is_same_v<M, LoginEndpointMessage>)
    return Type::login_endpoint;
  else if constexpr (std::is_same_v<M, WatchedMessage>)
    return Type::watched;
  else if constexpr (std::is_same_v<M, AddedBinding>)
    return Type::added_binding;
  else if constexpr (std::is_same_v<M, AddedSlot>)
    return Type::added_slot;
  else if constexpr (std::is_same_v<M, ConfigDone>)
    return Type::config_done;
  else if constexpr (std::is_same_v<M, ListenerMessage>)
    return Type::listener;
  else if constexpr (std::is_same_v<M, NameAnswer>)
    return Type::name_answer;
  else if constexpr (std::is_same_v<M, JailSocket>)
    return Type::jail_socket;
  else if constexpr (std::is_same_v<M, Stop>)
    return Type::stop;
  else if constexpr (std::is_same_v<M, ListenMessage>)
    return Type::listen;
  else if constexpr (std::is_same_v<M, UnlistenMessage>)
    return Type::unlisten;
  else if constexpr (std::is_same_v<M, Unlistened>)
    return Type::unlistened;
  else if constexpr (std::is_same_v<M, Ready>)
    return Type::ready;
  else if constexpr (std::is_same_v<M, NameQuestion>)
    return Type::name_question;
  else if constexpr (std::is_same_v<M, DecisionMessage>)
    return Type::decision;
  else if constexpr (std::is_same_v<M, TokenUpdate>)
    return Type::token_update;
  else if constexpr (std::is_same_v<M, Usage>)
    return Type::usage;
  else if constexpr (std::is_same_v<M, JailSocketRequest>)
    return Type::jail_socket_request;
  else if constexpr (std::is_same_v<M, Failure>)
    return Type::failure;
  else {
    static_assert(std::is_same_v<M, ProbeResult>);
    return Type::probe_result;
  }
}

// The descriptors a message carries.
std::vector<int> fds_of(const UpstreamCa& m) { return {m.pem.get()}; }
std::vector<int> fds_of(const TrustRoots& m) { return {m.pem.get()}; }
std::vector<int> fds_of(const ListenerMessage& m) { return {m.fd.get()}; }
std::vector<int> fds_of(const ListenMessage& m) { return {m.fd.get()}; }
std::vector<int> fds_of(const JailSocket& m) {
  if (m.err != 0) return {};
  return {m.fd.get()};
}
template <typename M>
std::vector<int> fds_of(const M&) {
  return {};
}

template <typename Variant>
util::Result<Record> encode_any(const Variant& v) {
  return std::visit(
      [](const auto& m) -> util::Result<Record> {
        using M = std::decay_t<decltype(m)>;
        Writer payload;
        put(payload, m);
        Record rec;
        rec.fds = fds_of(m);
        for (int fd : rec.fds)
          if (fd < 0) return util::Error::invalid(fmt::format("{} message: no descriptor", type_name(type_of<M>())));
        if constexpr (std::is_same_v<M, ListenMessage>) {
          if (m.id == 0) return util::Error::invalid("listen message: id: 0");
          if (!valid_listen_target(m.target))
            return util::Error::invalid("listen message: target: not the jail's 127.0.0.1 or ::1");
        }
        Writer w;
        w.u32(kMagic);
        w.u16(kVersion);
        w.u16(static_cast<std::uint16_t>(type_of<M>()));
        w.u32(static_cast<std::uint32_t>(payload.str().size()));
        w.raw(payload.str());
        if (w.str().size() > kMaxRecord)
          return util::Error::invalid(
              fmt::format("{} message: {} bytes, more than {}", type_name(type_of<M>()), w.str().size(), kMaxRecord));
        rec.bytes = std::move(w.str());
        return rec;
      },
      v);
}

struct Header {
  Type type;
  std::string_view payload;
};

util::Result<Header> take_header(std::string_view bytes) {
  if (bytes.size() > kMaxRecord)
    return util::Error::invalid(fmt::format("a message of more than {} bytes", kMaxRecord));
  wire::Reader r(bytes);
  auto magic = r.u32();
  auto version = r.u16();
  auto type = r.u16();
  auto length = r.u32();
  if (!length) return util::Error::invalid(fmt::format("a message of {} bytes, shorter than its header", bytes.size()));
  if (*magic != kMagic) return util::Error::invalid("a message without the protocol's magic");
  if (*version != kVersion)
    return util::Error::invalid(fmt::format("a message of protocol version {}, not {}", *version, kVersion));
  if (*length != bytes.size() - kHeaderSize)
    return util::Error::invalid(
        fmt::format("a message whose header says {} bytes and that holds {}", *length, bytes.size() - kHeaderSize));
  return Header{static_cast<Type>(*type), bytes.substr(kHeaderSize)};
}

// Takes the descriptors a message carries: exactly `want` of them.
util::Status expect_fds(Type t, const std::vector<util::UniqueFd>& fds, size_t want) {
  if (fds.size() == want) return {};
  return util::Error::invalid(fmt::format("{} message: {} descriptors, {} expected", type_name(t), fds.size(), want));
}

template <typename M, typename Variant>
util::Result<Variant> lift(util::Result<M> m) {
  if (!m) return m.take_error();
  return Variant(std::move(*m));
}

}  // namespace

bool valid_listen_target(const ListenerMessage::Target& t) {
  const auto v4 = net::parse_ip("127.0.0.1"), v6 = net::parse_ip("::1");
  return t.port > 0 && (t.addr == *v4 || t.addr == *v6) && t.host == t.addr.str();
}

std::optional<size_t> record_size(std::string_view header) {
  wire::Reader r(header.substr(0, kHeaderSize));
  (void)r.u32(), (void)r.u16(), (void)r.u16();
  auto length = r.u32();
  if (!length || *length > kMaxRecord - kHeaderSize) return std::nullopt;
  return kHeaderSize + *length;
}

void wipe_secrets(FromSupervisor& m) {
  if (auto* s = std::get_if<Settings>(&m); s && s->upstream_proxy) {
    if (auto& user = s->upstream_proxy->url.user) util::wipe(*user);
    util::wipe(s->upstream_proxy->url.password);
  } else if (auto* ca = std::get_if<RunCa>(&m)) {
    util::wipe(ca->key_pem);
  } else if (auto* b = std::get_if<BindingMessage>(&m)) {
    util::wipe(b->binding.real);
  }
}

void wipe_secrets(FromFilter& m) {
  if (auto* u = std::get_if<TokenUpdate>(&m)) {
    for (auto* token : {&u->access, &u->refresh})
      if (*token) util::wipe(**token);
  } else if (auto* b = std::get_if<AddedBinding>(&m)) {
    util::wipe(b->binding.real);
  }
}

util::Result<Record> encode(const FromSupervisor& m) { return encode_any(m); }
util::Result<Record> encode(const FromFilter& m) { return encode_any(m); }

util::Result<FromSupervisor> decode_from_supervisor(std::string_view bytes, std::vector<util::UniqueFd> fds) {
  auto h = take_header(bytes);
  if (!h) return h.take_error();
  Fields f(h->payload, h->type);
  using V = FromSupervisor;
  size_t want = h->type == Type::upstream_ca || h->type == Type::trust_roots || h->type == Type::listener ||
                        h->type == Type::listen
                    ? 1
                    : 0;
  if (h->type == Type::jail_socket) want = fds.size() == 1 ? 1 : 0;  // checked against its errno below
  if (auto st = expect_fds(h->type, fds, want); !st) return st.take_error();
  switch (h->type) {
    case Type::settings: return lift<Settings, V>(take_settings(f));
    case Type::rule: return lift<RuleMessage, V>(take_rule(f));
    case Type::binding: return lift<BindingMessage, V>(take_binding_as<BindingMessage>(f));
    case Type::minting: return lift<MintingMessage, V>(take_minting(f));
    case Type::run_ca: return lift<RunCa, V>(take_run_ca(f));
    case Type::slot: return lift<SlotMessage, V>(take_slot(f));
    case Type::token_endpoint: return lift<TokenEndpointMessage, V>(take_token_endpoint(f));
    case Type::credential_host: return lift<CredentialHostMessage, V>(take_credential_host(f));
    case Type::login_endpoint: return lift<LoginEndpointMessage, V>(take_login_endpoint(f));
    case Type::watched: return lift<WatchedMessage, V>(take_watched(f));
    case Type::upstream_ca: {
      if (auto st = f.finish(); !st) return st.take_error();
      return V(UpstreamCa{std::move(fds[0])});
    }
    case Type::trust_roots: {
      if (auto st = f.finish(); !st) return st.take_error();
      return V(TrustRoots{std::move(fds[0])});
    }
    case Type::config_done:
      if (auto st = f.finish(); !st) return st.take_error();
      return V(ConfigDone{});
    case Type::listener: {
      auto m = take_listener(f);
      if (!m) return m.take_error();
      m->fd = std::move(fds[0]);
      return V(std::move(*m));
    }
    case Type::name_answer: return lift<NameAnswer, V>(take_name_answer(f));
    case Type::jail_socket: {
      auto m = take_jail_socket(f);
      if (!m) return m.take_error();
      if (auto st = expect_fds(h->type, fds, m->err == 0 ? 1 : 0); !st) return st.take_error();
      if (m->err == 0) m->fd = std::move(fds[0]);
      return V(std::move(*m));
    }
    case Type::stop:
      if (auto st = f.finish(); !st) return st.take_error();
      return V(Stop{});
    case Type::listen: {
      auto m = take_listen(f);
      if (!m) return m.take_error();
      m->fd = std::move(fds[0]);
      return V(std::move(*m));
    }
    case Type::unlisten: return lift<UnlistenMessage, V>(take_listen_id<UnlistenMessage>(f));
    default: break;
  }
  return util::Error::invalid(
      fmt::format("a message of type {}, unknown from the supervisor", static_cast<unsigned>(h->type)));
}

util::Result<FromFilter> decode_from_filter(std::string_view bytes, std::vector<util::UniqueFd> fds) {
  auto h = take_header(bytes);
  if (!h) return h.take_error();
  if (auto st = expect_fds(h->type, fds, 0); !st) return st.take_error();
  Fields f(h->payload, h->type);
  using V = FromFilter;
  switch (h->type) {
    case Type::ready: return lift<Ready, V>(take_ready(f));
    case Type::name_question: return lift<NameQuestion, V>(take_name_question(f));
    case Type::decision: return lift<DecisionMessage, V>(take_decision(f));
    case Type::token_update: return lift<TokenUpdate, V>(take_token_update(f));
    case Type::usage: return lift<Usage, V>(take_usage(f));
    case Type::jail_socket_request: return lift<JailSocketRequest, V>(take_jail_socket_request(f));
    case Type::failure: return lift<Failure, V>(take_failure(f));
    case Type::probe_result: return lift<ProbeResult, V>(take_probe_result(f));
    case Type::added_binding: return lift<AddedBinding, V>(take_binding_as<AddedBinding>(f));
    case Type::added_slot: return lift<AddedSlot, V>(take_added_slot(f));
    case Type::unlistened: return lift<Unlistened, V>(take_listen_id<Unlistened>(f));
    default: break;
  }
  return util::Error::invalid(
      fmt::format("a message of type {}, unknown from the filter", static_cast<unsigned>(h->type)));
}

}  // namespace pj::filterlink
