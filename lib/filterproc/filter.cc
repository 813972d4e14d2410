#include "filterproc/filter.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>

#include <fmt/format.h>

#include "credentials/token_exchange.h"
#include "filterproc/lockdown.h"
#include "filterlink/channel.h"
#include "credentials/interceptor.h"
#include "netproxy/proxy.h"
#include "util/secret.h"
#include "util/untrusted.h"

namespace pj::filterproc {

namespace {

using filterlink::FromSupervisor;

constexpr int kSetupFailed = 125;
// The trust anchors the filter reads from a descriptor it is sent.
constexpr size_t kMaxAnchorsFile = 16 << 20;

struct Config {
  filterlink::Settings settings;
  bool have_settings = false;
  netproxy::Rules rules;
  credentials::Intercept intercept;
  util::UniqueFd upstream_ca, trust_roots;  // read once the bindings are known
  std::optional<credentials::CaPems> ca;
  // The token exchange's copy of the bound part of the supervisor's table.
  std::vector<filterlink::SlotMessage> slots;
  credentials::Settings exchange_settings;
  std::vector<netproxy::Watched> watched;
};

// Whether fd 3 is what the supervisor gives: a SOCK_SEQPACKET socket, or
// a SOCK_STREAM one where AF_UNIX has no SOCK_SEQPACKET (filterlink/channel.h).
bool is_control_socket(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && (type == SOCK_SEQPACKET || type == SOCK_STREAM);
}

util::Result<FromSupervisor> receive(int sock, int flags = 0) {
  auto rec = filterlink::receive_record(sock, flags);
  if (!rec) return rec.take_error();
  if (!*rec) return util::Error::invalid("the supervisor closed the control socket");
  return filterlink::decode_from_supervisor((*rec)->bytes, std::move((*rec)->fds));
}

// One configuration message into `c` (what it holds moved there); false
// at config_done.
util::Result<bool> take_config(Config& c, FromSupervisor& m) {
  if (auto* s = std::get_if<filterlink::Settings>(&m)) {
    if (c.have_settings) return util::Error::invalid("settings sent twice");
#ifndef PJ_TEST_SWITCHES
    if (!s->test_resolve.empty() || s->test_probe_after_lockdown ||
        s->test_misbehave != filterlink::Settings::Misbehave::none)
      return util::Error::invalid("test switches sent to a filter built without them");
#endif
    c.settings = std::move(*s);
    c.have_settings = true;
    return true;
  }
  if (!c.have_settings) return util::Error::invalid("configuration before the settings");
  if (auto* r = std::get_if<filterlink::RuleMessage>(&m)) {
    auto st = r->kind == filterlink::RuleMessage::Kind::allow ? c.rules.allow(r->pattern, r->source, r->private_ranges)
                                                              : c.rules.deny(r->pattern, r->source);
    if (!st) return st.take_error();
    return true;
  }
  if (auto* b = std::get_if<filterlink::BindingMessage>(&m)) {
    c.intercept.bindings.push_back(std::move(b->binding));
    return true;
  }
  if (auto* e = std::get_if<filterlink::MintingMessage>(&m)) {
    c.intercept.refused.push_back(std::move(e->endpoint));
    return true;
  }
  if (auto* e = std::get_if<filterlink::LoginEndpointMessage>(&m)) {
    c.intercept.login_endpoints.push_back({std::move(e->host), e->port, credentials::Wire::tls});
    return true;
  }
  if (auto* ca = std::get_if<filterlink::UpstreamCa>(&m)) {
    c.upstream_ca = std::move(ca->pem);
    return true;
  }
  if (auto* roots = std::get_if<filterlink::TrustRoots>(&m)) {
    if (c.trust_roots.valid()) return util::Error::invalid("the trust roots sent twice");
    c.trust_roots = std::move(roots->pem);
    return true;
  }
  if (auto* ca = std::get_if<filterlink::RunCa>(&m)) {
    if (c.ca) return util::Error::invalid("the run's CA sent twice");
    c.ca = credentials::CaPems{std::move(ca->key_pem), std::move(ca->cert_pem)};
    return true;
  }
  if (auto* slot = std::get_if<filterlink::SlotMessage>(&m)) {
    c.slots.push_back(std::move(*slot));
    return true;
  }
  if (auto* t = std::get_if<filterlink::TokenEndpointMessage>(&m)) {
    auto stand_in = credentials::stand_in_endpoint(t->id, std::move(t->host), t->port, std::move(t->path));
    if (!stand_in) return util::Error::invalid("a token endpoint of no provider");
    c.exchange_settings.test_token_endpoints.push_back(std::move(*stand_in));
    return true;
  }
  if (auto* h = std::get_if<filterlink::CredentialHostMessage>(&m)) {
    c.exchange_settings.extra_hosts.push_back({std::move(h->credential), policy::Entry{std::move(h->host), {}}});
    return true;
  }
  if (auto* w = std::get_if<filterlink::WatchedMessage>(&m)) {
    c.watched.push_back(std::move(w->watched));
    return true;
  }
  if (std::holds_alternative<filterlink::ConfigDone>(m)) return false;
  return util::Error::invalid("a run-time message before the configuration's end");
}

util::Result<Config> receive_config(int sock) {
  Config c;
  while (true) {
    auto m = receive(sock);
    if (!m) return m.take_error();
    // What is left of its secrets: none once taken, all when refused.
    const filterlink::SecretsWiped wiped(*m);
    auto more = take_config(c, *m);
    if (!more) return more.take_error();
    if (!*more) return c;
  }
}

netproxy::ProxyLimits limits_of(const filterlink::Settings& s) {
  netproxy::ProxyLimits l;
  l.connections_per_listener = s.connections_per_listener;
  l.resolver_names = s.resolver_names;
  l.handshake = s.handshake;
  l.idle = s.idle;
  l.relay_slice = s.relay_slice;
  for (const auto& t : s.test_resolve) l.test_resolve.push_back({t.host_port, {t.addr, t.port}});
  return l;
}

// The filter once configured: the relay and the control socket.
class Filter {
public:
  Filter(int sock, std::unique_ptr<netproxy::Proxy> proxy, bool abort_mid_request)
      : sock_(sock), proxy_(std::move(proxy)) {
    proxy_->resolve_through([this, abort_mid_request](std::uint64_t id, const std::string& host) {
      // Test builds: a crash while a request of the jail waits for its name.
      if (abort_mid_request) std::abort();
      return filterlink::send_message(sock_, filterlink::FromFilter(filterlink::NameQuestion{id, host})).ok();
    });
    proxy_->on_decision([this](const netproxy::Decision& d) {
      // A supervisor that is gone ends the loop at the next wait.
      (void)filterlink::send_message(sock_, filterlink::FromFilter(filterlink::DecisionMessage{d}));
    });
    proxy_->set_jail_sockets([this](int family) { return jail_socket(family); });
  }

  // Serve until stop, or until the supervisor is gone (an error then).
  util::Status serve() {
    // One wait a turn, for the relay's sockets and this one (its tick
    // wakes it before the limit).
    proxy_->wake_on(sock_);
    constexpr std::chrono::milliseconds kWaitAtMost{60000};
    while (true) {
      while (!backlog_.empty()) {
        auto m = std::move(backlog_.front());
        backlog_.pop_front();
        auto more = handle(std::move(m));
        if (!more) return more.take_error();
        if (!*more) return {};
      }
      if (!proxy_->run_for(kWaitAtMost)) continue;
      // Without waiting: the relay's turn may have taken what made the
      // socket readable (jail_socket() reads every message while it waits
      // for its answer), and nothing more may come.
      auto m = receive(sock_, MSG_DONTWAIT);
      if (!m && m.error().err() == EAGAIN) continue;
      if (!m) return m.take_error();
      backlog_.push_back(std::move(*m));
    }
  }

  void shutdown() { proxy_->shutdown(); }

#ifdef PJ_TEST_SWITCHES
  // Test builds: what a compromised filter might do once ready, for the
  // supervisor's side to survive. False: the supervisor is gone.
  bool misbehave(filterlink::Settings::Misbehave m) {
    using Misbehave = filterlink::Settings::Misbehave;
    if (m == Misbehave::stop_reading)
      for (std::uint64_t id = 1;; ++id)  // name questions, no answer read, until the supervisor ends it
        if (!filterlink::send_message(sock_, filterlink::FromFilter(filterlink::NameQuestion{id, "localhost"})))
          return false;
    if (m == Misbehave::ask_jail_socket) (void)jail_socket(AF_INET);
    return true;
  }
#endif

private:
  // One run-time message; false at stop.
  util::Result<bool> handle(FromSupervisor m) {
    if (auto* l = std::get_if<filterlink::ListenerMessage>(&m)) {
      std::optional<netproxy::Rules::Forward> target;
      if (l->target)
        target = netproxy::Rules::Forward{l->target->addr, l->target->port, l->target->host, l->target->source};
      if (auto st = proxy_->add_listener(std::move(l->fd), l->kind, std::move(target)); !st) return st.take_error();
      return true;
    }
    if (auto* a = std::get_if<filterlink::NameAnswer>(&m)) {
      proxy_->name_answer(a->id, std::move(a->addrs), std::move(a->error));
      return true;
    }
    if (auto* l = std::get_if<filterlink::ListenMessage>(&m)) {
      if (auto st = listen(std::move(*l)); !st) return st.take_error();
      return true;
    }
    if (auto* u = std::get_if<filterlink::UnlistenMessage>(&m)) {
      if (auto st = unlisten(u->id); !st) return st.take_error();
      return true;
    }
    if (std::holds_alternative<filterlink::Stop>(m)) return false;
    return util::Error::invalid("a configuration message after the configuration's end");
  }

  // A run-time listener, served as a published port until unlisten: an id
  // the supervisor gave no other listener held now, within the bound.
  util::Status listen(filterlink::ListenMessage l) {
    if (listens_.count(l.id)) return util::Error::invalid(fmt::format("listen {}: that id is served already", l.id));
    if (listens_.size() >= filterlink::kMaxListens)
      return util::Error::invalid(fmt::format("listen {}: {} listeners held already", l.id, listens_.size()));
    const int fd = l.fd.get();
    netproxy::Rules::Forward target{l.target.addr, l.target.port, std::move(l.target.host), std::move(l.target.source)};
    if (auto st = proxy_->add_listener(std::move(l.fd), netproxy::ListenerKind::publish, std::move(target)); !st)
      return st;
    listens_.emplace(l.id, fd);
    return {};
  }

  // Closed at once (its port is free on the host), then said: the
  // supervisor binds that port again only after this answer.
  util::Status unlisten(std::uint64_t id) {
    auto it = listens_.find(id);
    if (it == listens_.end()) return util::Error::invalid(fmt::format("unlisten {}: no such listener", id));
    if (auto st = proxy_->remove_listener(it->second); !st) return st;
    listens_.erase(it);
    return filterlink::send_message(sock_, filterlink::FromFilter(filterlink::Unlistened{id}));
  }

  // A socket of the jail's network namespace, made by the supervisor (the
  // filter cannot enter it): asked and waited for, other messages kept
  // for the loop. The fd, or -errno.
  int jail_socket(int family) {
    std::uint64_t id = next_socket_++;
    if (!filterlink::send_message(sock_, filterlink::FromFilter(filterlink::JailSocketRequest{id, family})).ok())
      return -EPIPE;
    while (true) {
      auto m = receive(sock_);
      if (!m) return -EPIPE;
      auto* s = std::get_if<filterlink::JailSocket>(&*m);
      if (!s) {
        backlog_.push_back(std::move(*m));
        continue;
      }
      if (s->id != id) continue;  // an answer to a request given up on
      return s->err ? -s->err : s->fd.release();
    }
  }

  int sock_;
  std::unique_ptr<netproxy::Proxy> proxy_;
  std::deque<FromSupervisor> backlog_;
  std::uint64_t next_socket_ = 1;
  std::map<std::uint64_t, int> listens_;  // listen's id -> its socket, as the relay holds it
};

#ifdef PJ_TEST_SWITCHES
// The home directory to probe: the user's, else /tmp (which exists).
// Found before the lock-down (reading the user database needs files).
std::string home_to_probe() {
  const passwd* pw = ::getpwuid(::getuid());
  struct stat st;
  if (pw && pw->pw_dir && ::stat(pw->pw_dir, &st) == 0) return pw->pw_dir;
  return "/tmp";
}
#endif

// What the credential filter's TLS is made from at its first
// connection (most runs make none: no anchor parsed, no context made
// until then): the run's CA, and the trust anchors the supervisor opened
// (the operator's upstream CA, the system's, which a credential filter
// must have), read from their descriptors then: the filter opens no file
// by name, and reading an open one needs no right the lock-down removes.
struct LaterTls {
  credentials::CaPems ca;
  // Checked before the lock-down (fstat is not allowed after it).
  struct Anchors {
    util::UniqueFd fd;
    size_t size = 0;
    std::string_view what;
  };
  Anchors roots, extra;

  ~LaterTls() { util::wipe(ca.key_pem); }  // a run that intercepted nothing

  static util::Result<Anchors> check(util::UniqueFd fd, std::string_view what) {
    if (!fd.valid()) return Anchors{};
    auto size = util::check_open_file(fd.get(), kMaxAnchorsFile, what);
    if (!size) return size.take_error();
    return Anchors{std::move(fd), *size, what};
  }

  util::Result<std::unique_ptr<credentials::TlsAuthority>> make() {
    before_tls();
    credentials::UpstreamTrust up;
    if (extra.fd.valid()) {
      auto pem = util::read_checked_file(extra.fd.get(), extra.size, kMaxAnchorsFile, extra.what);
      if (!pem) return pem.take_error();
      up.extra_ca_pem = std::move(*pem);
    }
    auto pem = util::read_checked_file(roots.fd.get(), roots.size, kMaxAnchorsFile, roots.what);
    if (!pem) return pem.take_error();
    up.roots_pem = std::move(*pem);
    auto made = credentials::TlsAuthority::serving_with(ca, up);
    // Once, whatever came of it: the authority holds the key for the run.
    util::wipe(ca.key_pem);
    roots.fd.reset();
    extra.fd.reset();
    return made;
  }
};

// The token exchange of this filter: the supervisor's bound credentials
// and their slots, copied into a table of its own (no withheld secret,
// no host file), each exchange told to the supervisor, which writes
// auth.json, before its response reaches the jail.
std::shared_ptr<credentials::TokenExchange> token_exchange(int sock, const Config& c) {
  auto table = std::make_shared<credentials::Table>();
  for (const auto& b : c.intercept.bindings) table->add(b);
  (void)table->take_added();  // the Interceptor has these already
  for (const auto& s : c.slots) table->add_slot(s.placeholder, {s.entry, s.field}, s.origin);
  auto ex = std::make_shared<credentials::OAuthExchange>(table, c.exchange_settings, "", nullptr, nullptr);
  ex->report_to([sock](const credentials::ExchangeReport& e) -> util::Status {
    using filterlink::FromFilter;
    // What the supervisor's decoder would refuse (and end the run for) is
    // this exchange's failure: the jail gets 502.
    auto fits = [](const std::optional<std::string>& v) { return !v || v->size() <= filterlink::kMaxSecret; };
    bool small = fits(e.tokens.access) && fits(e.tokens.refresh) && e.host.size() <= filterlink::kMaxHostName &&
                 e.path.size() <= filterlink::kMaxText;
    for (const auto& b : e.bindings) small = small && fits(b.real) && fits(b.placeholder);
    if (!small)
      return util::Error::invalid(
          fmt::format("report {}'s token exchange: a value over {} bytes", e.entry, filterlink::kMaxSecret));
    auto told = [&](FromFilter m) {
      const filterlink::SecretsWiped wiped(m);
      return filterlink::send_message(sock, m);
    };
    for (const auto& b : e.bindings)
      if (auto st = told(filterlink::AddedBinding{b}); !st) return st;
    for (const auto& [placeholder, field] : e.slots)
      if (auto st = told(filterlink::AddedSlot{placeholder, field}); !st) return st;
    return told(filterlink::TokenUpdate{e.kind, e.entry, e.ok, e.tokens.access, e.tokens.refresh, e.tokens.expires_ms,
                                        e.tokens.account, e.host, e.path});
  });
  return ex;
}

// Descriptors for every listener's connections (six each: two sockets,
// two pipes), for as many listeners as a run has, and some to spare; and
// memory for each one's buffers (a 64 KiB sniff buffer and its state, at
// most) on top of the process's own.
// With credentials bound, each intercepted connection has a worker
// thread: glibc sizes its stack from RLIMIT_STACK (pthread_create(3);
// 8 MiB unless the user changed it), which RLIMIT_DATA counts whether
// touched or not (setrlimit(2)), and its TLS and token-body buffers. Up
// to twice kMaxIntercepted workers exist at once: those closed to make
// room end while new ones start (Interceptor::start).
LockdownLimits lockdown_limits(const filterlink::Settings& s, std::uint64_t intercepting_workers) {
  constexpr std::uint64_t kListeners = 8, kFdsPerConnection = 6, kSpare = 256;
  constexpr std::uint64_t kBase = 64ULL << 20, kPerConnection = 128ULL << 10, kPerWorkerBuffers = 4ULL << 20;
  const std::uint64_t connections = std::min<std::uint64_t>(s.connections_per_listener * kListeners, 1ULL << 16);
  rlimit stack{};
  const std::uint64_t stack_bytes =
      ::getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY ? stack.rlim_cur : 8ULL << 20;
  const std::uint64_t intercepted =
      intercepting_workers * (std::min<std::uint64_t>(stack_bytes, 1ULL << 30) + kPerWorkerBuffers);
  return {std::min<std::uint64_t>(connections * kFdsPerConnection + kSpare, std::uint64_t{1} << 20),
          kBase + connections * kPerConnection + intercepted};
}

// Tell the supervisor why the filter could not start, and stderr.
int fail(int sock, const std::string& step, const util::Error& e) {
  (void)filterlink::send_message(sock, filterlink::FromFilter(filterlink::Failure{step, e.err(), e.message()}));
  std::fprintf(stderr, "pi-jail-filter: %s: %s\n", step.c_str(), e.message().c_str());
  return kSetupFailed;
}

}  // namespace

int network_filter_main() {
  if (!is_control_socket(filterlink::kFilterControlFd)) {
    std::fprintf(stderr,
                 "pi-jail: --network-filter is started by pi-jail itself, with its control socket as fd 3; "
                 "run pi-jail COMMAND instead\n");
    return 2;
  }
  const int sock = filterlink::kFilterControlFd;
  auto config = receive_config(sock);
  if (!config) return fail(sock, "receive the configuration", config.error());
  std::shared_ptr<credentials::Interceptor> interceptor;
  std::string ca_pem;
  if (!config->intercept.empty()) {
    if (!config->ca)
      return fail(sock, "start the credential filter",
                  util::Error::invalid("bindings or login endpoints without the run's CA"));
    if (!config->trust_roots.valid())
      return fail(sock, "read the trust anchors", util::Error::invalid("the system's trust anchors were not sent"));
    config->intercept.exchange = token_exchange(sock, *config);
    auto roots = LaterTls::check(std::move(config->trust_roots), "the system's trust store");
    if (!roots) return fail(sock, "read the trust anchors", roots.error());
    auto extra = LaterTls::check(std::move(config->upstream_ca), "the upstream CA file");
    if (!extra) return fail(sock, "read the trust anchors", extra.error());
    ca_pem = config->ca->cert_pem;
    auto later = std::make_shared<LaterTls>();
    later->ca = std::move(*config->ca);
    later->roots = std::move(*roots);
    later->extra = std::move(*extra);
    auto made = credentials::Interceptor::serving_later(std::move(config->intercept), ca_pem,
                                                        [later] { return later->make(); });
    if (!made) return fail(sock, "start the credential filter", made.error());
    interceptor = std::move(*made);
    // OpenSSL reads its configuration now, while files can be opened: the
    // TLS made after the lock-down opens none. (Only that: its error
    // strings and algorithms are loaded when TLS is made.)
    if (OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG | OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS, nullptr) != 1)
      return fail(sock, "start the credential filter", util::Error::invalid("OpenSSL did not start"));
  }
  config->upstream_ca.reset();
  config->trust_roots.reset();
  config->ca.reset();
  auto proxy = netproxy::Proxy::start(std::move(config->rules), -1, limits_of(config->settings), interceptor);
  if (!proxy) return fail(sock, "start the relay", proxy.error());
  (*proxy)->watch_placeholders(std::move(config->watched));
  if (auto& up = config->settings.upstream_proxy) {
    (*proxy)->use_upstream_proxy(std::make_shared<const netproxy::UpstreamProxy>(
        netproxy::UpstreamProxy{up->url, std::move(up->addrs), net::NoProxy::parse(up->no_proxy)}));
    // This copy only: the relay holds the proxy's credentials for the run.
    if (up->url.user) util::wipe(*up->url.user);
    util::wipe(up->url.password);
    up.reset();
  }
#ifdef PJ_TEST_SWITCHES
  const std::string home = config->settings.test_probe_after_lockdown ? home_to_probe() : "";
#endif
  if (auto st = lock_down(lockdown_limits(config->settings, interceptor ? 2 * netproxy::kMaxIntercepted : 0)); !st)
    return fail(sock, "lock down", st.error());
#ifdef PJ_TEST_SWITCHES
  if (config->settings.test_probe_after_lockdown)
    if (auto st = filterlink::send_message(sock, filterlink::FromFilter(probe_lockdown(home))); !st)
      return fail(sock, "send the probe's result", st.error());
#endif
  using Misbehave = filterlink::Settings::Misbehave;
  const Misbehave misbehave = config->settings.test_misbehave;
  Filter filter(sock, std::move(*proxy), misbehave == Misbehave::abort_mid_request);
  if (auto st = filterlink::send_message(sock, filterlink::FromFilter(filterlink::Ready{ca_pem})); !st)
    return fail(sock, "say ready", st.error());
#ifdef PJ_TEST_SWITCHES
  if (!filter.misbehave(misbehave)) return 1;
#endif
  release_startup();  // what configured the filter is not run again
  auto served = filter.serve();
  filter.shutdown();
  if (!served) {
    std::fprintf(stderr, "pi-jail-filter: %s\n", served.error().message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace pj::filterproc
