// The messages between the supervisor and the network filter process:
// every message comes back as it went, and a record that breaks any rule
// of the protocol (header, type, direction, bound, enum, leftover bytes,
// descriptors) is refused with a sentence, its descriptors closed.
#include "filterlink/messages.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "filterlink/wire.h"

using namespace pj;
using namespace pj::filterlink;

namespace {

std::vector<util::UniqueFd> no_fds() { return {}; }

std::vector<util::UniqueFd> one_fd() {
  std::vector<util::UniqueFd> v;
  v.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(v.back().valid());
  return v;
}

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

net::IpAddress ip(const char* text) { return *net::parse_ip(text); }

template <typename M>
std::string bytes_of(M m) {
  auto rec = encode(std::move(m));
  REQUIRE(rec.ok());
  return std::string(rec->bytes);
}

// A record with a hand-made header around `payload`.
std::string record(std::uint16_t type, std::string_view payload, std::uint32_t magic = kMagic,
                   std::uint16_t version = kVersion, std::optional<std::uint32_t> length = std::nullopt) {
  wire::Writer w;
  w.u32(magic);
  w.u16(version);
  w.u16(type);
  w.u32(length.value_or(static_cast<std::uint32_t>(payload.size())));
  w.raw(payload);
  return std::string(w.str());
}

std::string decision_error(std::string_view bytes) {
  auto d = decode_from_filter(bytes, no_fds());
  REQUIRE_FALSE(d.ok());
  return d.error().message();
}

netproxy::Decision sample_decision() {
  netproxy::Decision d;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  d.last = d.time + std::chrono::seconds(3);
  d.protocol = netproxy::Protocol::socks5;
  d.host = std::string("ex\xff\x01mple.com", 12);  // jail bytes: not UTF-8
  d.port = 443;
  d.address = "93.184.216.34";
  d.allowed = false;
  d.reason = "no rule allows it";
  d.rule_refusal = false;  // a refusal an allow rule would lift has a valid host
  d.unbound_credential = "LOCAL_KEY";
  d.count = 1;
  d.bytes_up = 10;
  d.bytes_down = 20;
  d.duration_ms = 5;
  return d;
}

}  // namespace

TEST_CASE("a filter's decision comes back to the supervisor byte for byte, jail bytes included") {
  auto d = sample_decision();
  auto back = decode_from_filter(bytes_of(FromFilter(DecisionMessage{d})), no_fds());
  REQUIRE(back.ok());
  const auto& got = std::get<DecisionMessage>(*back).decision;
  CHECK(got.time == d.time);
  CHECK(got.last == d.last);
  CHECK(got.protocol == netproxy::Protocol::socks5);
  CHECK(got.host == d.host);
  CHECK(got.port == 443);
  CHECK(got.address == d.address);
  CHECK_FALSE(got.allowed);
  CHECK(got.reason == d.reason);
  CHECK_FALSE(got.rule_refusal);
  CHECK(got.unbound_credential == "LOCAL_KEY");  // the summary's bind line needs it
  CHECK(got.count == 1);
  CHECK(got.bytes_up == 10);
  CHECK(got.bytes_down == 20);
  CHECK(got.duration_ms == 5);
}

TEST_CASE("a decision's jail-supplied host is cut to the recorder's bound before it is sent") {
  auto d = sample_decision();
  d.host = std::string(100000, 'a');
  auto back = decode_from_filter(bytes_of(FromFilter(DecisionMessage{d})), no_fds());
  REQUIRE(back.ok());
  CHECK(std::get<DecisionMessage>(*back).decision.host == netproxy::bounded(d.host));
}

TEST_CASE("every supervisor message comes back to the filter as it went") {
  Settings s;
  s.connections_per_listener = 7;
  s.handshake = std::chrono::milliseconds(250);
  s.test_resolve.push_back({"api.example.com:443", ip("127.0.0.1"), 8443});
  s.test_probe_after_lockdown = true;
  s.test_misbehave = Settings::Misbehave::stop_reading;
  auto got_settings = decode_from_supervisor(bytes_of(FromSupervisor(s)), no_fds());
  REQUIRE(got_settings.ok());
  const auto& gs = std::get<Settings>(*got_settings);
  CHECK(gs.connections_per_listener == 7);
  CHECK(gs.handshake == std::chrono::milliseconds(250));
  REQUIRE(gs.test_resolve.size() == 1);
  CHECK(gs.test_resolve[0].addr == ip("127.0.0.1"));
  CHECK(gs.test_resolve[0].port == 8443);
  CHECK(gs.test_probe_after_lockdown);
  CHECK(gs.test_misbehave == Settings::Misbehave::stop_reading);

  auto rule =
      decode_from_supervisor(bytes_of(FromSupervisor(RuleMessage{RuleMessage::Kind::deny, "*.example.com:443",
                                                                 "policy.toml:3:1", net::PrivateRanges::allowed})),
                             no_fds());
  REQUIRE(rule.ok());
  CHECK(std::get<RuleMessage>(*rule).kind == RuleMessage::Kind::deny);
  CHECK(std::get<RuleMessage>(*rule).pattern == "*.example.com:443");
  CHECK(std::get<RuleMessage>(*rule).private_ranges == net::PrivateRanges::allowed);

  credentials::Binding b{"ANTHROPIC_API_KEY",
                         "sk-ant-PLACEHOLDER",
                         std::string("sk-ant-\xfe real", 13),
                         {{"api.anthropic.com", 443}, {"::1", 8443}},
                         credentials::Carriage::token_exchange,
                         "Authorization"};
  auto binding = decode_from_supervisor(bytes_of(FromSupervisor(BindingMessage{b})), no_fds());
  REQUIRE(binding.ok());
  const auto& gb = std::get<BindingMessage>(*binding).binding;
  CHECK(gb.real == b.real);
  CHECK(gb.hosts == b.hosts);
  CHECK(gb.carriage == credentials::Carriage::token_exchange);
  CHECK(gb.header == "Authorization");

  // A local model server's binding keeps its plain HTTP wire: it must not
  // be spoken to as TLS.
  credentials::Binding local{"OLLAMA_API_KEY", "ph", "real", {{"127.0.0.1", 11434, netproxy::Wire::plain_http}}};
  auto plain = decode_from_supervisor(bytes_of(FromSupervisor(BindingMessage{local})), no_fds());
  REQUIRE(plain.ok());
  CHECK(std::get<BindingMessage>(*plain).binding.hosts == local.hosts);

  NameAnswer a{42, {ip("192.0.2.1"), ip("2001:db8::1")}, ""};
  auto answer = decode_from_supervisor(bytes_of(FromSupervisor(std::move(a))), no_fds());
  REQUIRE(answer.ok());
  CHECK(std::get<NameAnswer>(*answer).id == 42);
  REQUIRE(std::get<NameAnswer>(*answer).addrs.size() == 2);
  CHECK(std::get<NameAnswer>(*answer).addrs[1] == ip("2001:db8::1"));
}

TEST_CASE("the upstream proxy travels in the settings, credentials and NO_PROXY included, and is checked") {
  Settings s;
  auto url = net::parse_proxy_url("http://svc:p%40ss@proxy.corp:3128");
  REQUIRE(url.ok());
  s.upstream_proxy = Settings::UpstreamProxy{*url, {ip("192.0.2.10"), ip("2001:db8::10")}, "corp.example,10.0.0.0/8"};
  auto got = decode_from_supervisor(bytes_of(FromSupervisor(s)), no_fds());
  REQUIRE(got.ok());
  const auto& up = std::get<Settings>(*got).upstream_proxy;
  REQUIRE(up);
  CHECK(up->url == *url);
  CHECK(up->url.password == "p@ss");
  REQUIRE(up->addrs.size() == 2);
  CHECK(up->addrs[1] == ip("2001:db8::10"));
  CHECK(up->no_proxy == "corp.example,10.0.0.0/8");
  CHECK_FALSE(
      std::get<Settings>(*decode_from_supervisor(bytes_of(FromSupervisor(Settings{})), no_fds())).upstream_proxy);

  auto refused = [&](Settings bad) {
    auto d = decode_from_supervisor(bytes_of(FromSupervisor(std::move(bad))), no_fds());
    REQUIRE_FALSE(d.ok());
    return d.error().message();
  };
  Settings no_addrs = s;
  no_addrs.upstream_proxy->addrs.clear();
  CHECK(refused(no_addrs).find("upstream_proxy addresses: none") != std::string::npos);
  Settings raw_host = s;
  raw_host.upstream_proxy->url.host = "Proxy.Corp";
  CHECK(refused(raw_host).find("upstream_proxy host: not a normalised") != std::string::npos);
  Settings odd_list = s;
  odd_list.upstream_proxy->no_proxy = ".corp.example, <local>";
  CHECK(refused(odd_list).find("upstream_proxy no_proxy: not a normalised NO_PROXY list") != std::string::npos);
  Settings long_password = s;
  long_password.upstream_proxy->url.password = std::string(kMaxText + 1, 'x');
  CHECK(refused(long_password).find("upstream_proxy password") != std::string::npos);
}

TEST_CASE("the credential configuration comes back to the filter as it went") {
  auto back = [](FromSupervisor m) {
    auto r = decode_from_supervisor(bytes_of(std::move(m)), no_fds());
    REQUIRE(r.ok());
    return std::move(*r);
  };
  auto ca = back(RunCa{"-----BEGIN PRIVATE KEY-----\nk\n", "-----BEGIN CERTIFICATE-----\nc\n"});
  CHECK(std::get<RunCa>(ca).key_pem == "-----BEGIN PRIVATE KEY-----\nk\n");
  auto slot = back(SlotMessage{"ph", "anthropic", "refresh", credentials::Origin::renewal});
  CHECK(std::get<SlotMessage>(slot).entry == "anthropic");
  CHECK(std::get<SlotMessage>(slot).origin == credentials::Origin::renewal);
  auto endpoint = back(TokenEndpointMessage{"anthropic", "127.0.0.1", 8443, "/v1/oauth/token"});
  CHECK(std::get<TokenEndpointMessage>(endpoint).port == 8443);
  auto host = back(CredentialHostMessage{"anthropic", "llm.corp.example", "policy.toml:3:1"});
  CHECK(std::get<CredentialHostMessage>(host).host == "llm.corp.example");
  auto watched = back(WatchedMessage{{"ph", "auth.json ollama.key", "ollama"}});
  CHECK(std::get<WatchedMessage>(watched).watched.credential == "ollama");
  auto login = back(LoginEndpointMessage{"platform.claude.com", 443});
  CHECK(std::get<LoginEndpointMessage>(login).host == "platform.claude.com");
  CHECK(std::get<LoginEndpointMessage>(login).port == 443);

  // What is not a key, a certificate, a secret field or a path is refused.
  CHECK_FALSE(
      decode_from_supervisor(bytes_of(FromSupervisor(RunCa{"key", "-----BEGIN CERTIFICATE-----"})), no_fds()).ok());
  CHECK_FALSE(decode_from_supervisor(
                  bytes_of(FromSupervisor(SlotMessage{"ph", "anthropic", "type", credentials::Origin::host})), no_fds())
                  .ok());
  CHECK_FALSE(
      decode_from_supervisor(bytes_of(FromSupervisor(TokenEndpointMessage{"x", "h", 1, "no-slash"})), no_fds()).ok());
  CHECK_FALSE(decode_from_supervisor(bytes_of(FromSupervisor(LoginEndpointMessage{"h", 0})), no_fds()).ok());
  CHECK_FALSE(decode_from_supervisor(bytes_of(FromSupervisor(LoginEndpointMessage{"", 443})), no_fds()).ok());
}

TEST_CASE("a token exchange's additions come back to the supervisor as they went, and only from the filter") {
  credentials::Binding b{
      "token response anthropic.access_token", "sk-ant-oat01-PH", "sk-ant-oat01-real", {{"api.anthropic.com", 443}}};
  auto added = decode_from_filter(bytes_of(FromFilter(AddedBinding{b})), no_fds());
  REQUIRE(added.ok());
  CHECK(std::get<AddedBinding>(*added).binding.real == b.real);
  auto slot = decode_from_filter(bytes_of(FromFilter(AddedSlot{"sk-ant-oat01-PH", "access"})), no_fds());
  REQUIRE(slot.ok());
  CHECK(std::get<AddedSlot>(*slot).field == "access");
  CHECK(decision_error(bytes_of(FromFilter(AddedSlot{"ph", "type"}))).find("field: not a secret field") !=
        std::string::npos);
  // The supervisor's messages are not the filter's, nor the other way.
  CHECK_FALSE(decode_from_supervisor(bytes_of(FromFilter(AddedBinding{b})), no_fds()).ok());
  CHECK_FALSE(
      decode_from_filter(bytes_of(FromSupervisor(RunCa{"-----BEGIN PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----"})),
                         no_fds())
          .ok());
}

// What a message's holder wipes once it sent it or took its values
// (filterlink::wipe_secrets): its secrets, and nothing else of it. The
// bytes of the records themselves are util::SecretStrings, whose blocks
// are wiped as they are freed (secret_test.cc shows that); a refused
// message's secrets are wiped inside the decoder, where no test can look
// without reading freed memory.
static_assert(std::is_same_v<decltype(Record::bytes), util::SecretString>);
static_assert(std::is_same_v<decltype(std::declval<wire::Writer&>().str()), util::SecretString&>);

TEST_CASE("a message's secrets, and only they, are wiped by its holder, each way") {
  const std::string key = "-----BEGIN PRIVATE KEY-----\nsecret-key-bytes\n", real = "sk-ant-api03-real-value-xyz";
  auto url = net::parse_proxy_url("http://svc-user:p%40ss-word@proxy.corp:3128");
  REQUIRE(url.ok());
  Settings s;
  s.upstream_proxy = Settings::UpstreamProxy{*url, {ip("192.0.2.10")}, "corp.example"};
  FromSupervisor settings(std::move(s));
  FromSupervisor ca(RunCa{key, "-----BEGIN CERTIFICATE-----\nc\n"});
  credentials::Binding b{"TEST_KEY", "sk-ant-api03-PH", real, {{"api.anthropic.com", 443}}};
  FromSupervisor binding(BindingMessage{b});
  auto encoded = [](const FromSupervisor& m) {
    auto rec = encode(m);
    REQUIRE(rec.ok());
    return std::string(rec->bytes);
  };
  for (auto* m : {&settings, &ca, &binding}) {
    const std::string before = encoded(*m);
    wipe_secrets(*m);
    const std::string after = encoded(*m);
    CHECK(after.size() < before.size());
    for (const std::string& secret : {std::string("svc-user"), std::string("p@ss-word"), key, real})
      CHECK(after.find(secret) == std::string::npos);
  }
  const auto& up = std::get<Settings>(settings).upstream_proxy;
  CHECK(up->url.user == "");
  CHECK(up->url.password.empty());
  CHECK(up->url.host == "proxy.corp");
  CHECK(up->no_proxy == "corp.example");
  CHECK(std::get<RunCa>(ca).key_pem.empty());
  CHECK(std::get<RunCa>(ca).cert_pem == "-----BEGIN CERTIFICATE-----\nc\n");
  CHECK(std::get<BindingMessage>(binding).binding.real.empty());
  CHECK(std::get<BindingMessage>(binding).binding.placeholder == "sk-ant-api03-PH");

  FromFilter update(TokenUpdate{credentials::ExchangeKind::renewal, "anthropic", true, "access-token-value",
                                "refresh-token-value", 1, "a@example.com", "api.anthropic.com", "/v1/oauth/token"});
  FromFilter added(AddedBinding{b});
  wipe_secrets(update);
  wipe_secrets(added);
  CHECK(std::get<TokenUpdate>(update).access == "");
  CHECK(std::get<TokenUpdate>(update).refresh == "");
  CHECK(std::get<TokenUpdate>(update).account == "a@example.com");
  CHECK(std::get<AddedBinding>(added).binding.real.empty());
  CHECK(std::get<AddedBinding>(added).binding.name == "TEST_KEY");

  // A holder's guard wipes on its way out.
  FromSupervisor held(RunCa{key, "-----BEGIN CERTIFICATE-----\nc\n"});
  { const SecretsWiped wiped(held); }
  CHECK(std::get<RunCa>(held).key_pem.empty());
}

TEST_CASE("a listener travels with its descriptor, and its forward target") {
  ListenerMessage m;
  m.kind = ListenerMessage::Kind::forward;
  m.target = ListenerMessage::Target{ip("::1"), 11434, "localhost", "--allow-net localhost:11434"};
  m.fd = std::move(one_fd()[0]);
  auto rec = encode(FromSupervisor(std::move(m)));
  REQUIRE(rec.ok());
  REQUIRE(rec->fds.size() == 1);
  auto back = decode_from_supervisor(rec->bytes, one_fd());
  REQUIRE(back.ok());
  const auto& l = std::get<ListenerMessage>(*back);
  CHECK(l.fd.valid());
  REQUIRE(l.target);
  CHECK(l.target->addr == ip("::1"));
  CHECK(l.target->port == 11434);
}

TEST_CASE("a run-time listen travels with its descriptor and its target; unlisten and unlistened by its id") {
  ListenMessage m{7, {ip("127.0.0.1"), 53692, "127.0.0.1", "profile pi: login callback 53692"}, {}};
  m.fd = std::move(one_fd()[0]);
  auto rec = encode(FromSupervisor(std::move(m)));
  REQUIRE(rec.ok());
  REQUIRE(rec->fds.size() == 1);
  auto back = decode_from_supervisor(rec->bytes, one_fd());
  REQUIRE(back.ok());
  const auto& l = std::get<ListenMessage>(*back);
  CHECK(l.id == 7);
  CHECK(l.fd.valid());
  CHECK(l.target.addr == ip("127.0.0.1"));
  CHECK(l.target.port == 53692);
  CHECK(l.target.source == "profile pi: login callback 53692");
  ListenMessage v6{8, {ip("::1"), 1455, "::1", ""}, {}};
  v6.fd = std::move(one_fd()[0]);
  auto rec6 = encode(FromSupervisor(std::move(v6)));
  REQUIRE(rec6.ok());
  CHECK(decode_from_supervisor(rec6->bytes, one_fd()).ok());

  auto un = decode_from_supervisor(bytes_of(FromSupervisor(UnlistenMessage{7})), no_fds());
  REQUIRE(un.ok());
  CHECK(std::get<UnlistenMessage>(*un).id == 7);
  auto done = decode_from_filter(bytes_of(FromFilter(Unlistened{7})), no_fds());
  REQUIRE(done.ok());
  CHECK(std::get<Unlistened>(*done).id == 7);
}

TEST_CASE("a listen to anywhere but the jail's loopback, or without its id or descriptor, is refused both ways") {
  auto listen_to = [](const char* addr, std::uint64_t id = 1, std::uint16_t port = 53692,
                      std::string host = "") -> util::Status {
    ListenMessage m{id, {ip(addr), port, host.empty() ? ip(addr).str() : host, "s"}, {}};
    m.fd = std::move(one_fd()[0]);
    auto rec = encode(FromSupervisor(std::move(m)));
    if (!rec) return rec.take_error();
    return {};
  };
  CHECK(listen_to("127.0.0.1").ok());
  for (const char* addr : {"127.0.0.2", "10.0.0.1", "0.0.0.0", "::", "2001:db8::1"}) {
    CAPTURE(addr);
    auto st = listen_to(addr);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message() == "listen message: target: not the jail's 127.0.0.1 or ::1");
  }
  CHECK_FALSE(listen_to("127.0.0.1", 0).ok());
  CHECK_FALSE(listen_to("127.0.0.1", 1, 0).ok());
  CHECK_FALSE(listen_to("127.0.0.1", 1, 53692, "localhost").ok());  // the host names the address itself

  // The decoder holds the same rule against a record made by hand.
  wire::Writer w;
  w.u64(1);
  w.u8(4);
  w.raw(std::string("\x0a\x00\x00\x01", 4));  // 10.0.0.1
  w.u64(53692);
  w.bytes("10.0.0.1");
  w.bytes("s");
  auto hand = decode_from_supervisor(record(16, w.str()), one_fd());
  REQUIRE_FALSE(hand.ok());
  CHECK(hand.error().message() == "listen message: target: not the jail's 127.0.0.1 or ::1");
  wire::Writer zero;
  zero.u64(0);
  auto unlisten0 = decode_from_supervisor(record(17, zero.str()), no_fds());
  REQUIRE_FALSE(unlisten0.ok());
  CHECK(unlisten0.error().message() == "unlisten message: id: out of range (1 to 18446744073709551615)");
  CHECK(decision_error(record(74, zero.str())).find("unlistened message: id: out of range") != std::string::npos);
  CHECK(decision_error(record(74, zero.str() + "x")).find("unlistened message") != std::string::npos);

  // Its descriptor is required, and only one.
  ListenMessage m{1, {ip("127.0.0.1"), 53692, "127.0.0.1", "s"}, {}};
  CHECK(encode(FromSupervisor(ListenMessage{1, m.target, {}})).error().message() == "listen message: no descriptor");
  m.fd = std::move(one_fd()[0]);
  auto rec = encode(FromSupervisor(std::move(m)));
  REQUIRE(rec.ok());
  auto none = decode_from_supervisor(rec->bytes, no_fds());
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("0 descriptors, 1 expected") != std::string::npos);
  auto fds = one_fd();
  fds.push_back(std::move(one_fd()[0]));
  CHECK_FALSE(decode_from_supervisor(rec->bytes, std::move(fds)).ok());

  // Each direction's own: the filter cannot send listen or unlisten, nor
  // the supervisor unlistened.
  CHECK(decision_error(bytes_of(FromSupervisor(UnlistenMessage{1}))).find("unknown from the filter") !=
        std::string::npos);
  CHECK(decision_error(rec->bytes).find("unknown from the filter") != std::string::npos);
  auto wrong = decode_from_supervisor(bytes_of(FromFilter(Unlistened{1})), no_fds());
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("unknown from the supervisor") != std::string::npos);
}

TEST_CASE("the supervisor refuses a record whose header is not the protocol's") {
  auto good = bytes_of(FromFilter(Usage{1, 2, 3}));
  CHECK(decision_error(good.substr(0, 5)).find("shorter than its header") != std::string::npos);
  CHECK(decision_error(record(68, good.substr(kHeaderSize), 0x12345678)).find("magic") != std::string::npos);
  // Another version, older or newer: the two sides are one executable.
  CHECK(decision_error(record(68, good.substr(kHeaderSize), kMagic, kVersion - 1)).find("version 3, not 4") !=
        std::string::npos);
  CHECK(decision_error(record(68, good.substr(kHeaderSize), kMagic, kVersion + 1)).find("version 5, not 4") !=
        std::string::npos);
  CHECK(decision_error(record(68, good.substr(kHeaderSize), kMagic, kVersion, 25)).find("header says 25") !=
        std::string::npos);
  CHECK(decision_error(std::string(kMaxRecord + 1, 'x')).find("more than") != std::string::npos);
}

TEST_CASE("the supervisor refuses an unknown type, and a type only it may send") {
  CHECK(decision_error(record(999, "")).find("type 999, unknown from the filter") != std::string::npos);
  // A filter cannot send the supervisor's own messages (stop, a listener).
  CHECK(decision_error(bytes_of(FromSupervisor(Stop{}))).find("unknown from the filter") != std::string::npos);
  // Nor the reverse.
  auto r = decode_from_supervisor(bytes_of(FromFilter(Ready{})), no_fds());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("unknown from the supervisor") != std::string::npos);
}

TEST_CASE("the supervisor refuses every truncation of a decision, and bytes after its last field") {
  auto good = bytes_of(FromFilter(DecisionMessage{sample_decision()}));
  for (size_t cut = kHeaderSize; cut < good.size(); ++cut) {
    auto payload = good.substr(kHeaderSize, cut - kHeaderSize);
    auto r = decode_from_filter(record(66, payload), no_fds());
    CHECK_FALSE(r.ok());
  }
  CHECK(decision_error(record(66, good.substr(kHeaderSize) + "x")).find("bytes after the last field") !=
        std::string::npos);
}

TEST_CASE("a string's length prefix beyond its bound or the record is refused, not read") {
  wire::Writer w;
  w.u64(1);
  w.u32(0xffffffffu);  // the host's length
  CHECK(decision_error(record(65, w.str())).find("name_question message: host: missing or past its bound") !=
        std::string::npos);
}

TEST_CASE("the supervisor refuses a decision timed past what the clock holds, never overflowing it") {
  auto good = bytes_of(FromFilter(DecisionMessage{sample_decision()}));
  for (size_t at : {kHeaderSize, kHeaderSize + 8}) {
    std::string bad = good;
    for (size_t i = 0; i < 8; ++i) bad[at + i] = i == 7 ? '\x74' : '\x6f';  // 8387161697385017455 ms
    CHECK(decision_error(bad).find("out of range") != std::string::npos);
    // 140238465099899 ms (the year 6413): before 9999, yet past 2262,
    // the last year system_clock's nanoseconds hold.
    const std::uint64_t year_6413 = 140238465099899;
    for (size_t i = 0; i < 8; ++i) bad[at + i] = static_cast<char>((year_6413 >> (8 * i)) & 0xff);
    CHECK(decision_error(bad).find("out of range") != std::string::npos);
  }
}

TEST_CASE("the supervisor refuses a decision with an enum or flag out of range") {
  auto good = bytes_of(FromFilter(DecisionMessage{sample_decision()}));
  std::string bad_protocol = good;
  bad_protocol[kHeaderSize + 16] = 6;  // after two 8-byte times
  CHECK(decision_error(bad_protocol).find("protocol: not a known value") != std::string::npos);

  auto d = sample_decision();
  d.address = "not-an-address";
  CHECK(decision_error(bytes_of(FromFilter(DecisionMessage{d}))).find("address: not an IP address") !=
        std::string::npos);
  d = sample_decision();
  d.count = 0;
  CHECK(decision_error(bytes_of(FromFilter(DecisionMessage{d}))).find("count: out of range") != std::string::npos);
}

TEST_CASE("a rule refusal, whose host:port the summary suggests allowing, comes only for a valid one") {
  auto d = sample_decision();
  d.rule_refusal = true;
  d.host = "api.example.com";
  CHECK(decode_from_filter(bytes_of(FromFilter(DecisionMessage{d})), no_fds()).ok());
  d.host = "203.0.113.7";
  CHECK(decode_from_filter(bytes_of(FromFilter(DecisionMessage{d})), no_fds()).ok());
  for (const std::string& host : {std::string("ex\xff\x01mple.com", 12), std::string("a b"), std::string("")}) {
    d.host = host;
    CHECK(decision_error(bytes_of(FromFilter(DecisionMessage{d}))).find("rule_refusal: for no valid host:port") !=
          std::string::npos);
  }
  d.host = "api.example.com";
  d.port = 0;
  CHECK(decision_error(bytes_of(FromFilter(DecisionMessage{d}))).find("rule_refusal") != std::string::npos);
}

TEST_CASE("a filter's request for a socket in the jail comes back as it went, for either family") {
  for (int family : {AF_INET, AF_INET6}) {
    CAPTURE(family);
    auto back = decode_from_filter(bytes_of(FromFilter(JailSocketRequest{42, family})), no_fds());
    REQUIRE(back.ok());
    CHECK(std::get<JailSocketRequest>(*back).id == 42);
    CHECK(std::get<JailSocketRequest>(*back).family == family);
  }
  CHECK_FALSE(decode_from_filter(bytes_of(FromFilter(JailSocketRequest{42, AF_UNIX})), no_fds()).ok());
}

TEST_CASE("the supervisor resolves only normalised names the filter asks for, never literals") {
  CHECK(decode_from_filter(bytes_of(FromFilter(NameQuestion{1, "api.example.com"})), no_fds()).ok());
  for (const char* host : {"API.example.com", "127.0.0.1", "example.com.", "a b", ""}) {
    CAPTURE(host);
    CHECK(decision_error(bytes_of(FromFilter(NameQuestion{1, host}))).find("name_question message: host") !=
          std::string::npos);
  }
}

TEST_CASE("the supervisor refuses a token update it could not write safely to auth.json") {
  TokenUpdate t;
  t.kind = credentials::ExchangeKind::renewal;
  t.entry = "anthropic";
  t.access = "sk-ant-oat-new";
  t.expires_ms = 1700000000000;
  t.host = "platform.claude.com";
  t.path = "/v1/oauth/token";
  auto good = decode_from_filter(bytes_of(FromFilter(t)), no_fds());
  REQUIRE(good.ok());
  CHECK(std::get<TokenUpdate>(*good).access == t.access);
  CHECK_FALSE(std::get<TokenUpdate>(*good).refresh);

  auto bad = t;
  bad.entry = "../anthropic";
  CHECK(decision_error(bytes_of(FromFilter(bad))).find("entry: not an auth.json key") != std::string::npos);
  bad = t;
  bad.access = "tok\r\nX-Injected: 1";
  CHECK(decision_error(bytes_of(FromFilter(bad))).find("holds CR, LF or NUL") != std::string::npos);
  bad = t;
  bad.access = "";
  CHECK(decision_error(bytes_of(FromFilter(bad))).find("access: empty") != std::string::npos);
  bad = t;
  bad.expires_ms = -1;
  CHECK(decision_error(bytes_of(FromFilter(bad))).find("expires_ms: negative") != std::string::npos);
}

TEST_CASE("descriptors a message does not carry are refused and closed") {
  auto fds = one_fd();
  int raw = fds[0].get();
  auto r = decode_from_filter(bytes_of(FromFilter(Usage{})), std::move(fds));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("1 descriptors, 0 expected") != std::string::npos);
  CHECK_FALSE(fd_open(raw));

  // A listener without its socket.
  ListenerMessage m;
  m.fd = std::move(one_fd()[0]);
  auto rec = encode(FromSupervisor(std::move(m)));
  REQUIRE(rec.ok());
  auto none = decode_from_supervisor(rec->bytes, no_fds());
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("0 descriptors, 1 expected") != std::string::npos);
  // A jail socket that failed carries none.
  auto failed = encode(FromSupervisor(JailSocket{3, EMFILE, {}}));
  REQUIRE(failed.ok());
  CHECK(failed->fds.empty());
  CHECK_FALSE(decode_from_supervisor(failed->bytes, one_fd()).ok());
  CHECK(decode_from_supervisor(failed->bytes, no_fds()).ok());
}

TEST_CASE("a message that must carry a descriptor is not encoded without one") {
  auto rec = encode(FromSupervisor(ListenerMessage{}));
  REQUIRE_FALSE(rec.ok());
  CHECK(rec.error().message() == "listener message: no descriptor");
}

TEST_CASE("a listener's target is required for a forward and refused for a proxy port") {
  ListenerMessage fwd;
  fwd.kind = ListenerMessage::Kind::forward;
  fwd.fd = std::move(one_fd()[0]);
  auto rec = encode(FromSupervisor(std::move(fwd)));
  REQUIRE(rec.ok());
  auto r = decode_from_supervisor(rec->bytes, one_fd());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "listener message: target: missing");
}

TEST_CASE("every single-byte change of a record decodes or is refused, never read out of bounds") {
  TokenUpdate t{credentials::ExchangeKind::login,
                "openai-codex",
                true,
                "a",
                "r",
                5,
                "user@example.com",
                "auth.openai.com",
                "/oauth/token"};
  for (const auto& good : {bytes_of(FromFilter(DecisionMessage{sample_decision()})), bytes_of(FromFilter(t)),
                           bytes_of(FromFilter(ProbeResult{{{"open /etc/passwd", EACCES}}}))}) {
    size_t refused = 0;
    for (size_t i = 0; i < good.size(); ++i)
      for (int v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
        std::string b = good;
        b[i] = static_cast<char>(v);
        if (!decode_from_filter(b, no_fds()).ok()) ++refused;
      }
    CHECK(refused > 0);
  }
}

TEST_CASE("a record past the largest size is refused when it is encoded") {
  ProbeResult p;
  for (int i = 0; i < 64; ++i) p.attempts.push_back({std::string(kMaxText, 'x'), 0});
  auto rec = encode(FromFilter(p));
  REQUIRE_FALSE(rec.ok());
  CHECK(rec.error().message().find("more than 65536") != std::string::npos);
}

TEST_CASE("a list's count past its bound is refused before a single item is read") {
  wire::Writer w;
  w.u64(0xffffffffffffffffULL);  // attempts
  auto r = decode_from_filter(record(71, w.str()), no_fds());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "probe_result message: attempts: out of range (0 to 64)");
}

TEST_CASE("every seed of the fuzz target's corpus is a record of this version that decodes") {
  size_t seeds = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(PJ_SOURCE_DIR) + "/tests/fuzz/corpus/filterlink")) {
    CAPTURE(e.path().string());
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool decodes = decode_from_filter(bytes, no_fds()).ok() || decode_from_supervisor(bytes, no_fds()).ok() ||
                         decode_from_supervisor(bytes, one_fd()).ok();
    CHECK(decodes);
    ++seeds;
  }
  CHECK(seeds >= 15);
}
