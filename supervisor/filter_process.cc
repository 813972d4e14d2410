#include "filter_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "filterlink/channel.h"
#include "credentials/interceptor.h"
#include "credentials/tls_ca.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/secret.h"

namespace pj::supervisor {

namespace {

using filterlink::FromFilter;
using filterlink::FromSupervisor;

// A guard against a filter that hangs before it is ready or after it was
// told to stop (not a timing anything depends on).
constexpr int kReadyGuardMs = 30000;
constexpr int kStopGuardMs = 5000;
// The system's trust anchors (and a test's extra ones), sent to a filter
// that opens no file.
constexpr off_t kMaxRootsFile = 16 << 20;
// How long a send may wait for room on the control socket while the jail
// runs: a filter that stops reading would hold this process (and with it
// --timeout, signals and write-back) on a blocking send.
constexpr int kSendGuardMs = 2000;
constexpr int kJailSocketsPerSecond = 256;
// Messages taken from the filter per wake-up, so that a chatty filter
// cannot keep the supervisor from the jail's own events.
constexpr int kMessagesPerWake = 64;
// Wake-ups' worth of messages read from a filter that ended.
constexpr int kLastWakes = 64;
// What one token exchange may add before its update (a response's tokens,
// and echoes of ones already bound).
constexpr size_t kMaxAddedPerExchange = 16;

// A file of trust anchors, opened for the filter to read: a regular file
// of at most kMaxRootsFile bytes. O_NONBLOCK: a FIFO in its place fails
// the check instead of holding the run at open(2). The error says why.
util::Result<util::UniqueFd> open_anchors(const std::string& file) {
  util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return util::Error::invalid(fmt::format("cannot be opened ({})", util::errno_name(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return util::Error::invalid(fmt::format("cannot be read ({})", util::errno_name(errno)));
  if (!S_ISREG(st.st_mode)) return util::Error::invalid("not a regular file");
  if (st.st_size > kMaxRootsFile) return util::Error::invalid(fmt::format("more than {} bytes", kMaxRootsFile));
  return fd;
}

util::Result<FromFilter> receive(int sock, int flags) {
  auto rec = filterlink::receive_record(sock, flags);
  if (!rec) return rec.take_error();
  if (!*rec) return util::Error::invalid("the network filter process closed its control socket");
  return filterlink::decode_from_filter((*rec)->bytes, std::move((*rec)->fds));
}

filterlink::Settings settings_of(const RunOptions& opts) {
  const auto& l = opts.proxy_limits;
  filterlink::Settings s;
  s.connections_per_listener = l.connections_per_listener;
  s.resolver_names = l.resolver_names;
  s.handshake = l.handshake;
  s.idle = l.idle;
  s.relay_slice = l.relay_slice;
  for (const auto& [host_port, to] : l.test_resolve) s.test_resolve.push_back({host_port, to.first, to.second});
  if (const auto& up = opts.upstream_proxy) {
    filterlink::Settings::UpstreamProxy m{up->url, up->addrs, up->no_proxy.str()};
    if (m.addrs.size() > filterlink::kMaxAddresses) m.addrs.resize(filterlink::kMaxAddresses);  // never all tried
    s.upstream_proxy = std::move(m);
  }
#ifdef PJ_TEST_SWITCHES
  s.test_probe_after_lockdown = opts.test_filter_probe;
  using Misbehave = filterlink::Settings::Misbehave;
  const std::string& m = opts.test_filter_misbehave;
  s.test_misbehave = m == "abort"          ? Misbehave::abort_mid_request
                     : m == "stop-reading" ? Misbehave::stop_reading
                     : m == "jail-socket"  ? Misbehave::ask_jail_socket
                                           : Misbehave::none;
#endif
  return s;
}

// A name the filter may ask: what the rules' normalisation gives, and a
// name (a literal needs no resolver; the filter knows it).
bool askable(const std::string& host) {
  auto n = net::normalise_host(host);
  return n && *n == host && !net::parse_ip(host);
}

}  // namespace

std::string describe_filter_end(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
#ifdef __GLIBC__
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), name ? name : "?");
#else
    return fmt::format("was killed by signal {}", WTERMSIG(status));
#endif
  }
  return "ended";
}

FilterProcess::FilterProcess(std::unique_ptr<FilterChild> child, util::UniqueFd sock, const RunOptions& opts)
    : child_(std::move(child)),
      sock_(std::move(sock)),
      recorder_(opts.net_log.get(), opts.proxy_limits.log),
      resolver_(opts.proxy_limits.resolver_names) {}

FilterProcess::~FilterProcess() { kill_and_reap(); }

util::Result<std::unique_ptr<FilterProcess>> FilterProcess::configure(std::unique_ptr<FilterChild> child,
                                                                      util::UniqueFd sock, const RunOptions& opts) {
  std::unique_ptr<FilterProcess> f(new FilterProcess(std::move(child), std::move(sock), opts));
  if (auto st = f->send_config(opts); !st)
    return std::move(st.take_error()).context("start the network filter process");
  return f;
}

util::Status FilterProcess::send_config(const RunOptions& opts) {
  auto config = [this](FromSupervisor m) { return send(std::move(m), kReadyGuardMs); };
  auto settings = settings_of(opts);
  if (const auto& up = settings.upstream_proxy) {
    // What the filter's decoder would refuse, said here with the fix.
    if (up->no_proxy.size() > filterlink::kMaxNoProxy)
      return util::Error::invalid(
          fmt::format("the upstream proxy's NO_PROXY list is {} bytes once normalised, more than {}: shorten it",
                      up->no_proxy.size(), filterlink::kMaxNoProxy));
    if ((up->url.user && up->url.user->size() > filterlink::kMaxText) || up->url.password.size() > filterlink::kMaxText)
      return util::Error::invalid(fmt::format("the upstream proxy {}: a user or password longer than {} bytes",
                                              up->url.authority(), filterlink::kMaxText));
  }
  if (auto st = config(std::move(settings)); !st) return st;
  using Kind = filterlink::RuleMessage::Kind;
  for (const auto& r : opts.rules.allows())
    if (auto st = config(filterlink::RuleMessage{Kind::allow, r.text(), r.source, r.private_ranges}); !st) return st;
  for (const auto& r : opts.rules.denies())
    if (auto st = config(filterlink::RuleMessage{Kind::deny, r.text(), r.source, r.private_ranges}); !st) return st;
  if (auto st = send_credentials(opts); !st) return st;
  // Only a credential filter checks servers' certificates: against the
  // system's trust anchors, opened here and sent (the filter opens no file
  // by name, and its environment is empty: $SSL_CERT_FILE is this one's).
  if (opts.interceptor)
    if (auto st = send_roots(); !st) return st;
  if (auto st = config(filterlink::ConfigDone{}); !st) return st;
  while (!ready_) {
    pollfd p{sock_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, kReadyGuardMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return util::Error::invalid("the network filter process did not say it was ready");
    auto m = receive(sock_.get(), 0);
    if (!m) return std::move(gone(m.take_error())).context("before it was ready");
    if (auto st = handle(std::move(*m)); !st) return st;
  }
  return {};
}

// The bound credentials and what the filter's token exchange starts
// from, then the placeholders to look for.
util::Status FilterProcess::send_credentials(const RunOptions& opts) {
  if (opts.interceptor) {
    if (auto st = send_bindings(*opts.interceptor); !st) return st;
    if (opts.exchange)
      if (auto st = send_exchange_seed(opts.exchange, *opts.interceptor->bindings()); !st) return st;
  }
  for (const auto& w : opts.watched) {
    watched_.push_back(w.credential);
    if (auto st = send(filterlink::WatchedMessage{w}, kReadyGuardMs); !st) return st;
  }
  return {};
}

// The run's CA (made here: its certificate is already in the jail's trust
// bundle), each binding, the refused minting endpoints, the token
// endpoints a login reaches, the operator's upstream CA file (opened here:
// the filter opens no file).
util::Status FilterProcess::send_bindings(credentials::Interceptor& in) {
  auto config = [this](FromSupervisor m) { return send(std::move(m), kReadyGuardMs); };
  auto ca = in.hand_over_ca();
  if (!ca) return ca.take_error();
  ca_pem_ = ca->cert_pem;
  // The key's last copy in this process (the Interceptor kept none),
  // wiped once sent.
  if (auto st = config(filterlink::RunCa{std::move(ca->key_pem), std::move(ca->cert_pem)}); !st) return st;
  for (const auto& b : *in.bindings())
    if (auto st = config(filterlink::BindingMessage{b}); !st) return st;
  for (const auto& m : in.refused())
    if (auto st = config(filterlink::MintingMessage{m}); !st) return st;
  for (const auto& h : in.login_endpoints())
    if (auto st = config(filterlink::LoginEndpointMessage{h.name, h.port}); !st) return st;
  if (const std::string& file = in.upstream_extra_ca_file(); !file.empty()) {
    auto fd = open_anchors(file);
    if (!fd) return util::Error::invalid(fmt::format("the upstream CA file {}: {}", file, fd.error().message()));
    if (auto st = config(filterlink::UpstreamCa{std::move(*fd)}); !st) return st;
  }
  return {};
}

// The file OpenSSL's default paths name for the system's trust anchors
// (in this process: $SSL_CERT_FILE, else the built-in path): a regular
// file, or the run stops.
util::Status FilterProcess::send_roots() {
  const std::string file = credentials::system_roots_file();
  auto fix = [&file](std::string why) {
    return util::Error::invalid(
        fmt::format("the system's trust anchors {} (for the credential filter's upstream servers): {}; install the CA "
                    "certificates OpenSSL uses, or set SSL_CERT_FILE to a PEM file of them",
                    file, why));
  };
  auto fd = open_anchors(file);
  if (!fd) return fix(fd.error().message());
  return send(FromSupervisor(filterlink::TrustRoots{std::move(*fd)}), kReadyGuardMs);
}

// What the filter's copy of the token exchange starts from: the slots of
// the bound placeholders, the token endpoint stand-ins, the operator's
// hosts. The exchange then takes the filter's reports.
util::Status FilterProcess::send_exchange_seed(const std::shared_ptr<credentials::OAuthExchange>& exchange,
                                               const std::vector<credentials::Binding>& bound) {
  auto config = [this](FromSupervisor m) { return send(std::move(m), kReadyGuardMs); };
  exchange_ = exchange;
  auto seed = exchange->seed(bound);
  for (const auto& s : seed.slots)
    if (auto st = config(filterlink::SlotMessage{s.placeholder, s.slot.entry, s.slot.field, s.origin}); !st) return st;
  for (const auto& t : seed.test_token_endpoints)
    if (auto st = config(filterlink::TokenEndpointMessage{t.id, t.host, t.port, t.path}); !st) return st;
  for (const auto& h : seed.extra_hosts)
    if (auto st = config(filterlink::CredentialHostMessage{h.credential, h.host.text, h.host.src.str()}); !st)
      return st;
  return {};
}

// A token exchange's end, with the bindings and slots it sent before:
// taken by the run's exchange as untrusted (OAuthExchange::accept), or
// the filter is ended. Its tokens and real values are moved into the
// report, and wiped once the exchange has taken what it keeps.
util::Status FilterProcess::take_token_update(filterlink::TokenUpdate& u) {
  credentials::ExchangeReport e;
  e.kind = u.kind;
  e.host = u.host;
  e.path = u.path;
  e.entry = u.entry;
  e.ok = u.ok;
  e.tokens = {std::move(u.access), std::move(u.refresh), u.expires_ms, util::printable(u.account)};
  e.bindings = std::exchange(added_bindings_, {});
  e.slots = std::exchange(added_slots_, {});
  auto st = exchange_->accept(e);
  for (auto* token : {&e.tokens.access, &e.tokens.refresh})
    if (*token) util::wipe(**token);
  for (auto& b : e.bindings) util::wipe(b.real);
  return st;
}

util::Status FilterProcess::add_listener(util::UniqueFd fd, netproxy::ListenerKind kind,
                                         std::optional<netproxy::Rules::Forward> target) {
  filterlink::ListenerMessage l;
  l.kind = kind;
  if (target)
    l.target = filterlink::ListenerMessage::Target{target->addr, static_cast<std::uint16_t>(target->port), target->host,
                                                   target->source};
  l.fd = std::move(fd);
  return send(FromSupervisor(std::move(l)), kSendGuardMs);
}

util::Result<std::uint64_t> FilterProcess::listen(util::UniqueFd fd, const netproxy::Rules::Forward& target) {
  if (served_.size() + closing_.size() >= filterlink::kMaxListens)
    return util::Error::invalid(fmt::format("the network filter holds {} listeners already", filterlink::kMaxListens));
  filterlink::ListenMessage l;
  l.id = next_listen_++;
  l.target = {target.addr, static_cast<std::uint16_t>(target.port), target.host, target.source};
  l.fd = std::move(fd);
  const std::uint64_t id = l.id;
  if (auto st = send(FromSupervisor(std::move(l)), kSendGuardMs); !st) return st.take_error();
  served_.insert(id);
  return id;
}

util::Status FilterProcess::unlisten(std::uint64_t id) {
  if (!served_.erase(id))
    return util::Error::invalid(fmt::format("unlisten {}: the filter serves no such listener", id));
  closing_.insert(id);
  return send(FromSupervisor(filterlink::UnlistenMessage{id}), kSendGuardMs);
}

// Sends without blocking: a full control socket is waited on for at most
// `guard_ms`; a filter that does not read it by then is killed, and one
// that closed it is said gone (gone()).
util::Status FilterProcess::send(FromSupervisor m, int guard_ms) {
  const filterlink::SecretsWiped wiped(m);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(guard_ms);
  while (true) {
    auto st = filterlink::send_message(sock_.get(), m, MSG_DONTWAIT);
    if (st) return st;
    // Its end of the socket is closed: said as how it ended.
    if (st.error().err() == EPIPE || st.error().err() == ECONNRESET) return gone(st.take_error());
    // A stream took part of the record and the filter read no more.
    if (st.error().err() == ETIMEDOUT) {
      kill_and_reap();
      return util::Error::invalid(
          fmt::format("the network filter process did not read its control socket for {} ms; it was killed",
                      filterlink::kRestGuard.count()));
    }
    if (st.error().err() != EAGAIN) return st;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{sock_.get(), POLLOUT, 0};
    int n = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return util::Error::from_errno("wait to send to the network filter process", errno);
    if (n == 0) {
      kill_and_reap();
      return util::Error::invalid(
          fmt::format("the network filter process did not read its control socket for {} ms; it was killed", guard_ms));
    }
  }
}

// A socket of the jail's network namespace, for a published port's
// connection; only in a run that publishes one or serves login callbacks
// (a connection to one may still ask after it was closed: it tries the
// jail's ::1 when 127.0.0.1 refused), and a bounded number a second
// (each is a fork into the jail's namespaces).
util::Status FilterProcess::answer_jail_socket(const filterlink::JailSocketRequest& r) {
  if (!jail_sockets_) {
    kill_and_reap();
    return util::Error::invalid(
        "the network filter process asked for a socket in the jail, and this run publishes no port and serves no "
        "login callback");
  }
  filterlink::JailSocket s{r.id, EAGAIN, {}};
  const auto now = std::chrono::steady_clock::now();
  if (now - jail_socket_second_ >= std::chrono::seconds(1)) jail_socket_second_ = now, jail_sockets_this_second_ = 0;
  if (++jail_sockets_this_second_ <= kJailSocketsPerSecond) {
    int fd = jail_sockets_(r.family);
    s.err = fd < 0 ? -fd : 0;
    if (fd >= 0) s.fd.reset(fd);
  }
  return send(FromSupervisor(std::move(s)), kSendGuardMs);
}

// One message from the filter, as untrusted input: only what it may say
// now is taken; anything else ends it.
util::Status FilterProcess::handle(FromFilter m) {
  // A token exchange's tokens and real values, once taken (or refused).
  const filterlink::SecretsWiped wiped(m);
  auto refuse = [this](std::string why) {
    kill_and_reap();
    return util::Error::invalid("the network filter process " + why);
  };
  if (auto* f = std::get_if<filterlink::Failure>(&m)) {
    kill_and_reap();
    return util::Error::from_errno(fmt::format("{} ({})", util::printable(f->step), util::printable(f->message)),
                                   f->err);
  }
  if (std::holds_alternative<filterlink::Ready>(m)) {
    if (ready_) return refuse("said ready twice");
    // The CA it was given, or none when nothing is bound.
    if (std::get<filterlink::Ready>(m).ca_pem != ca_pem_) return refuse("said it serves with a CA it was not given");
    ready_ = true;
    return {};
  }
#ifdef PJ_TEST_SWITCHES
  // Sent once it is locked down, before it says ready.
  if (auto* p = std::get_if<filterlink::ProbeResult>(&m)) {
    for (const auto& a : p->attempts)
      util::error("network filter probe: {}: {}", util::printable(a.what),
                  a.err ? util::errno_name(a.err) : std::string("succeeded"));
    return {};
  }
#endif
  if (!ready_) return refuse("sent a run-time message before it was ready");
  if (auto* q = std::get_if<filterlink::NameQuestion>(&m)) {
    if (!askable(q->host) || !resolver_.submit(q->id, q->host)) {
      auto why = askable(q->host) ? "too many names are being looked up" : "not a host name";
      return send(FromSupervisor(filterlink::NameAnswer{q->id, {}, why}), kSendGuardMs);
    }
    return {};
  }
  if (auto* d = std::get_if<filterlink::DecisionMessage>(&m)) {
    // The bind line the summary suggests names only a credential it was
    // given to look for.
    const std::string& unbound = d->decision.unbound_credential;
    if (!unbound.empty() && std::find(watched_.begin(), watched_.end(), unbound) == watched_.end())
      return refuse("reported a placeholder of a credential it was not given");
    // One connection, timed by this side's clock; the recorder bounds its
    // strings again and aggregates.
    d->decision.time = d->decision.last = std::chrono::system_clock::now();
    d->decision.count = 1;
    recorder_.add(std::move(d->decision));
    return {};
  }
  if (auto* r = std::get_if<filterlink::JailSocketRequest>(&m)) {
    if (r->family != AF_INET && r->family != AF_INET6) return refuse("asked for a socket of an unknown family");
    return answer_jail_socket(*r);
  }
  if (std::holds_alternative<filterlink::Usage>(m)) return {};
  if (auto* u = std::get_if<filterlink::Unlistened>(&m)) {
    if (!closing_.erase(u->id)) return refuse("said it closed a listener it was not told to close");
    return {};
  }
  // A token exchange's report: only where one was given, each bounded.
  if (exchange_) {
    if (auto* b = std::get_if<filterlink::AddedBinding>(&m)) {
      if (added_bindings_.size() >= kMaxAddedPerExchange) return refuse("added too many bindings in one exchange");
      added_bindings_.push_back(std::move(b->binding));
      return {};
    }
    if (auto* a = std::get_if<filterlink::AddedSlot>(&m)) {
      if (added_slots_.size() >= kMaxAddedPerExchange) return refuse("added too many slots in one exchange");
      added_slots_.emplace_back(std::move(a->placeholder), std::move(a->field));
      return {};
    }
    if (auto* u = std::get_if<filterlink::TokenUpdate>(&m)) {
      if (auto st = take_token_update(*u); !st)
        return refuse("sent a token update that was refused: " + st.error().message());
      return {};
    }
  }
  // A probe result comes only from a test build's filter, and only before
  // it is ready.
  return refuse("sent a message it may not send");
}

util::Status FilterProcess::read_messages() {
  for (int i = 0; i < kMessagesPerWake; ++i) {
    auto m = receive(sock_.get(), MSG_DONTWAIT);
    if (!m && m.error().err() == EAGAIN) return {};
    if (!m) return gone(m.take_error());
    if (auto st = handle(std::move(*m)); !st) return st;
  }
  return {};
}

util::Status FilterProcess::answer_names() {
  for (auto& a : resolver_.take()) {
    if (a.addrs.size() > filterlink::kMaxAddresses) a.addrs.resize(filterlink::kMaxAddresses);
    if (a.error.size() > filterlink::kMaxText) a.error.resize(filterlink::kMaxText);
    auto st = send(FromSupervisor(filterlink::NameAnswer{a.conn, std::move(a.addrs), a.error}), kSendGuardMs);
    if (!st) return st;
  }
  return {};
}

// The control socket ended or failed: said as how the filter ended when
// it did (a crash closes the socket a moment before the process can be
// reaped), else as `e`, the filter then killed.
util::Error FilterProcess::gone(util::Error e) {
  auto status = child_->reaped() ? std::nullopt : child_->wait_for(std::chrono::milliseconds(kStopGuardMs));
  if (!status) {
    kill_and_reap();
    return e;
  }
  return util::Error::invalid("the network filter process " + describe_filter_end(*status));
}

util::Status FilterProcess::on_ready() {
  if (child_->reaped()) return util::Error::invalid("the network filter process is gone");
  if (auto st = answer_names(); !st) return st;
  if (auto st = read_messages(); !st) return st;
  pollfd p{child_->exit_fd(), POLLIN, 0};
  if (p.fd >= 0 && ::poll(&p, 1, 0) == 1) {
    // Its last decisions and reports (bounded: a dying filter cannot hold
    // the supervisor): a token exchange's report may be what the host's
    // auth.json needs.
    for (int i = 0; i < kLastWakes; ++i)
      if (!read_messages()) break;
    return gone(util::Error::invalid("the network filter process ended"));
  }
  return {};
}

void FilterProcess::shutdown() {
  if (child_->reaped()) return;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kStopGuardMs);
  (void)send(FromSupervisor(filterlink::Stop{}), kStopGuardMs);
  // Its connections close, each recorded, then it exits (EOF); it gets
  // one guard for all of that, however it trickles them.
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{sock_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    auto m = receive(sock_.get(), 0);
    if (!m) break;
    // Decisions, and a token exchange's report: the provider may have
    // rotated a token the host must get. Nothing else is answered now.
    const bool take = std::holds_alternative<filterlink::DecisionMessage>(*m) ||
                      std::holds_alternative<filterlink::AddedBinding>(*m) ||
                      std::holds_alternative<filterlink::AddedSlot>(*m) ||
                      std::holds_alternative<filterlink::TokenUpdate>(*m);
    if (take && !handle(std::move(*m))) break;
  }
  recorder_.flush();
  kill_and_reap();
}

}  // namespace pj::supervisor
