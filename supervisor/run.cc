#include "run.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <algorithm>

#include <fmt/format.h>

#include "net/address.h"
#include "netproxy/resolver.h"
#include "policy/layer.h"
#include "runtime/request.h"
#include "util/dir_names.h"
#include "util/escape.h"
#include "util/file_lock.h"
#include "util/json.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/random.h"
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::supervisor {

SignalResponse SignalPolicy::respond(int sig, bool on_pty) {
  SignalResponse r;
  switch (sig) {
    case SIGINT:
    case SIGTERM:
    case SIGHUP:
    case SIGQUIT:
      r.forced = ++terminations_ >= 2;
      r.deliver = r.forced ? SIGKILL : sig;
      r.start_grace = !r.forced;
      return r;
    case SIGCONT:
      r.resume = on_pty;
      r.deliver = SIGCONT;
      return r;
    case SIGTSTP:  // from pi-jail's terminal when it is not raw, or `kill -TSTP`: the command's group stops
      r.deliver = SIGTSTP;
      return r;
    case SIGWINCH:
      if (on_pty)
        r.sync_size = true;  // the kernel tells the PTY's foreground group
      else
        r.deliver = SIGWINCH;
      return r;
    case SIGCHLD: return r;  // the backend's loop looks at the command's status
    default: r.deliver = sig; return r;
  }
}

void say_setup_failed(std::string_view step, std::string_view fix, bool jail_stopped) {
  util::error("jail setup failed, {}\n  step: {}{}{}", jail_stopped ? "the jail was stopped" : "nothing was run", step,
              fix.empty() ? "" : "\n  fix: ", fix);
}

RunOutcome setup_failed(std::string step, std::string_view fix) {
  return ended_by(said_setup_failure(std::move(step), fix));
}

util::Error said_setup_failure(std::string step, std::string_view fix) {
  say_setup_failed(step, fix);
  return util::Error::invalid(std::move(step));
}

util::Error request_refused(std::string why) {
  util::error("{}", why);
  return util::Error::invalid(std::move(why));
}

RunOutcome ended_by(const util::Error& e) {
  RunOutcome out;
  out.exit_code = e.exit_status();
  out.failure = e.message();
  if (e.exit_kind() == util::Exit::not_found || e.exit_kind() == util::Exit::not_executable)
    out.ending = RunOutcome::Ending::not_executed;
  return out;
}

RunOutcome command_ended(int status, bool timed_out) {
  RunOutcome out;
  out.command_status = out.exit_code = status;
  out.ending = status > 128 ? RunOutcome::Ending::signaled : RunOutcome::Ending::exited;
  if (timed_out) {
    out.ending = RunOutcome::Ending::timed_out;
    out.exit_code = 124;
  }
  return out;
}

namespace {

// The filter looks nothing up before it serves: the proxy's name is
// resolved here, once, for the run.
util::Result<std::shared_ptr<const netproxy::UpstreamProxy>> resolved_upstream(
    const std::optional<policy::Policy::UpstreamProxy>& up) {
  if (!up || !up->url) return std::shared_ptr<const netproxy::UpstreamProxy>();
  auto p = std::make_shared<netproxy::UpstreamProxy>(netproxy::UpstreamProxy{*up->url, {}, up->no_proxy});
  if (auto ip = net::parse_ip(p->url.host)) {
    p->addrs = {*ip};
  } else {
    auto answer = netproxy::look_up(p->url.host);
    if (answer.addrs.empty())
      return util::Error::invalid(fmt::format("the upstream proxy {} ({}{}): cannot resolve {}: {}", p->name(),
                                              up->from_env ? up->url_var + ", upstream_proxy = \"env\" at " : "",
                                              up->src.str(), p->url.host,
                                              answer.error.empty() ? "no address" : answer.error));
    p->addrs = std::move(answer.addrs);
  }
  return std::shared_ptr<const netproxy::UpstreamProxy>(std::move(p));
}

}  // namespace

util::Result<RunOptions> run_options(const cli::RunInput& inv, const netproxy::Rules& rules,
                                     const std::optional<policy::Policy::UpstreamProxy>& upstream) {
  RunOptions opts;
  opts.timeout = inv.timeout;
  opts.grace = inv.grace;
  opts.rules = rules;
#ifdef PJ_TEST_SWITCHES
  opts.test_fail_network_filter = inv.test_fail_network_filter;
  opts.test_filter_probe = inv.test_filter_probe;
  opts.test_filter_misbehave = inv.test_filter_misbehave;
  if (inv.test_net_timeouts) {
    opts.proxy_limits.handshake = inv.test_net_timeouts->first;
    opts.proxy_limits.idle = inv.test_net_timeouts->second;
  }
  for (const auto& t : inv.test_resolve) {  // test builds only: HOST:PORT=IP:PORT2
    auto eq = t.find('=');
    auto from = eq == std::string::npos ? std::nullopt : net::parse_host_port(std::string_view(t).substr(0, eq));
    auto to = from ? net::parse_host_port(std::string_view(t).substr(eq + 1)) : std::nullopt;
    auto ip = to ? net::parse_ip(to->host) : std::nullopt;
    if (!ip) return util::Error::invalid(fmt::format("--test-resolve {}: HOST:PORT=IP:PORT2 expected", t));
    opts.proxy_limits.test_resolve.push_back({t.substr(0, eq), {*ip, static_cast<uint16_t>(to->port)}});
  }
#endif
  auto proxy = resolved_upstream(upstream);
  if (!proxy) return proxy.take_error();
  opts.upstream_proxy = std::move(*proxy);
  auto log = open_net_log(inv.net_log);
  if (!log) return log.take_error();
  opts.net_log = std::move(*log);
  return opts;
}

util::Result<util::UniqueFd> listen_on_host_loopback(bool v6, int port) {
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *a;
  }
  util::UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return util::Error::from_errno("socket", errno);
  int one = 1;
  // Past TIME_WAIT only, never a listener: and so that the port can be
  // bound again while a connection this listener accepted is still open.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return util::Error::from_errno("bind", errno);
  if (::listen(fd.get(), 128) != 0) return util::Error::from_errno("listen", errno);
  return fd;
}

util::Result<std::vector<PublishedPort>> bind_published(const std::vector<runtime::Request::Published>& ports) {
  std::vector<PublishedPort> out;
  for (const auto& p : ports) {
    const std::string where = fmt::format("publish {} ({})", p.spec.str(), p.why);
    auto fd = listen_on_host_loopback(p.spec.host_addr == "::1", p.spec.host_port);
    if (!fd && fd.error().what() == "bind") {
      int err = fd.error().err();
      std::string fix =
          err == EADDRINUSE
              ? fmt::format(
                    "stop what listens on the host's port {}, or publish another host port "
                    "(--publish {}:{})",
                    p.spec.host_port, p.spec.host_port == 65535 ? 65534 : p.spec.host_port + 1, p.spec.jail_port)
          : err == EACCES ? "ports below 1024 need privileges on the host: publish a higher host port"
                          : "publish on 127.0.0.1";
      return util::Error::invalid(fmt::format("{}: cannot listen on the host's port {}: {} ({})\n  fix: {}", where,
                                              p.spec.host_port, std::strerror(err), util::errno_name(err), fix));
    }
    if (!fd) return std::move(fd.take_error()).context(where);
    out.push_back({std::move(*fd), p.spec, p.why});
  }
  return out;
}

#ifdef PJ_TEST_SWITCHES
namespace {

// A line of PJ_TEST_BIND: NAME=PLACEHOLDER=VALUE@HOST:PORT
util::Result<credentials::Binding> parse_test_binding(const std::string& text) {
  auto bad = [&] { return util::Error::invalid("PJ_TEST_BIND: each line NAME=PLACEHOLDER=VALUE@HOST:PORT expected"); };
  size_t eq1 = text.find('='), eq2 = eq1 == std::string::npos ? eq1 : text.find('=', eq1 + 1);
  size_t at = text.rfind('@');
  if (eq2 == std::string::npos || at == std::string::npos || at < eq2) return bad();
  auto hostport = net::parse_host_port(std::string_view(text).substr(at + 1));
  if (!hostport) return bad();
  credentials::Binding b;
  b.name = text.substr(0, eq1);
  b.placeholder = text.substr(eq1 + 1, eq2 - eq1 - 1);
  b.real = text.substr(eq2 + 1, at - eq2 - 1);
  b.hosts.push_back({hostport->host, static_cast<uint16_t>(hostport->port)});
  if (b.name.empty() || b.placeholder.empty() || b.real.empty()) return bad();
  return b;
}

}  // namespace
#endif

util::Result<std::shared_ptr<credentials::Interceptor>> make_interceptor(
    [[maybe_unused]] const cli::InterceptorInput& inv, credentials::Intercept intercept) {
#ifdef PJ_TEST_SWITCHES
  for (const auto& t : inv.test_bind) {
    auto b = parse_test_binding(t);
    if (!b) return b.take_error();
    intercept.bindings.push_back(std::move(*b));
  }
  if (inv.test_upstream_ca) intercept.upstream.extra_ca_file = *inv.test_upstream_ca;
#endif
  if (intercept.empty()) return std::shared_ptr<credentials::Interceptor>();
  auto made = credentials::Interceptor::to_hand_over(std::move(intercept));
  if (!made) return std::move(made.take_error()).context("the credential filter");
  return std::move(*made);
}

namespace {

constexpr std::string_view kBundlePrefix = "ca-bundle-", kBundleSuffix = ".pem", kMakingSuffix = ".pem.new";

// The bundles of runs that are gone (a run killed with SIGKILL cannot
// remove its own): a live run holds a lock on its bundle until it ends.
// A bundle still being made (".new", before it is locked and named) is
// taken only once it is a minute old: its run was killed in between.
void remove_abandoned_bundles(int state) {
  std::vector<std::string> names;
  (void)util::for_each_name(state, [&](std::string_view n) {
    if (n.starts_with(kBundlePrefix) && (n.ends_with(kBundleSuffix) || n.ends_with(kMakingSuffix)))
      names.emplace_back(n);
    return true;
  });
  const auto now = std::chrono::system_clock::now();
  for (const std::string& name : names) {
    util::UniqueFd fd(::openat(state, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto changed = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtime));
    if (name.ends_with(kMakingSuffix) && now - changed < std::chrono::minutes(1)) continue;
    if (util::try_lock_file(fd.get())) ::unlinkat(state, name.c_str(), 0);
  }
}

}  // namespace

util::Result<CaBundleFile> CaBundleFile::begin(const std::string& dir) {
  std::string system;
  for (auto p : runtime::kCaBundlePaths) {
    auto text = util::read_untrusted_file(p, 16 << 20);
    if (text && *text) {
      system = std::move(**text);
      break;
    }
  }
  if (system.empty())
    return util::Error::invalid(
        "no system CA bundle (/etc/ssl/certs/ca-certificates.crt, ...) to add the run's CA "
        "to; install ca-certificates");
  if (!system.ends_with("\n")) system += "\n";
  auto d = util::make_private_dir(dir);
  if (!d) return std::move(d.take_error()).context("pi-jail's state directory");
  remove_abandoned_bundles(d->get());
  const std::string name = fmt::format("{}{}-{:016x}{}", kBundlePrefix, ::getpid(), util::random_u64(), kBundleSuffix);
  // Made under a name the sweep above never takes, locked, then named: a
  // run starting now cannot take it for an abandoned one.
  const std::string making = name + ".new";
  static_assert(kMakingSuffix == std::string_view(".pem.new"));
  util::UniqueFd fd(::openat(d->get(), making.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) return util::Error::from_errno("create " + dir + "/" + making, errno);
  if (!util::try_lock_file(fd.get())) {
    const int err = errno;
    ::unlinkat(d->get(), making.c_str(), 0);
    return util::Error::from_errno("lock " + dir + "/" + making, err);
  }
  if (auto named = util::replace_entry(d->get(), making, name); !named) {
    ::unlinkat(d->get(), making.c_str(), 0);
    return std::move(named.take_error()).context(dir);
  }
  CaBundleFile out(dir + "/" + name);
  if (::fchmod(fd.get(), 0644) != 0) return util::Error::from_errno("chmod " + out.path_, errno);
  if (auto st = util::write_all(fd.get(), system, out.path_); !st) return st.take_error();
  out.fd_ = std::move(fd);
  return out;
}

util::Status CaBundleFile::finish(const std::string& ca_pem) {
  if (!fd_.valid() || finished_) return util::Error::invalid("the run's CA bundle " + path_ + " is finished already");
  if (ca_pem.empty()) return util::Error::invalid("the run's CA bundle " + path_ + ": no CA to add");
  finished_ = true;
  return util::write_all(fd_.get(), "# pi-jail: this run's CA (credentials stay outside the jail)\n" + ca_pem, path_);
}

util::Result<CaBundleFile> CaBundleFile::write(const std::string& dir, const std::string& ca_pem) {
  auto out = begin(dir);
  if (!out) return out.take_error();
  if (auto st = out->finish(ca_pem); !st) return st.take_error();
  return out;
}

CaBundleFile::~CaBundleFile() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

#ifdef PJ_TEST_SWITCHES
util::Result<std::unique_ptr<netproxy::Proxy>> test_failed_filter() {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return util::Error::invalid("failing on purpose (--test-fail-network-filter)");
}
#endif

std::string state_dir() {
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  return state && *state == '/' ? std::string(state) + "/pi-jail"
         : home && *home == '/' ? std::string(home) + "/.local/state/pi-jail"
                                : "";
}

util::Result<util::UniqueFd> open_net_log(const std::optional<std::string>& path) {
  if (path) {
    auto fd = util::open_output_file(*path, util::OutputMode::append, 0600);
    if (!fd) return std::move(fd.take_error()).context("--net-log");
    return fd;
  }
  const std::string dir = state_dir();
  if (dir.empty()) return util::UniqueFd();
  (void)util::make_private_dir(dir);  // a failure shows in the open below
  std::string file = dir + "/network.jsonl";
  auto fd = util::open_output_file(file, util::OutputMode::append, 0600);
  if (!fd) {
    util::warn("cannot open the network log: {}; decisions go to --report and stderr only", fd.error().message());
    return util::UniqueFd();
  }
  return std::move(*fd);
}

namespace {

// The preset that names `host` on `port` (a preset's hosts are on 443),
// or nullptr: the summary proposes the preset rather than its host alone.
const policy::NetPreset* preset_of(std::string_view host, int port) {
  if (port != 443) return nullptr;
  for (const auto& p : policy::net_presets())
    if (std::find(p.hosts.begin(), p.hosts.end(), host) != p.hosts.end()) return &p;
  return nullptr;
}

// Whether a refusal is Pi's own download of fd and rg, whose fix is to
// install them, which the note at start says: no rule is proposed for it.
bool tools_download(const netproxy::Decision& d, const SummaryHints& hints) {
  return hints.pi_downloads_tools && d.host == "github.com" && d.port == 443;
}

}  // namespace

std::string allow_flag(const netproxy::Decision& d, const SummaryHints& hints) {
  if (d.allowed || !d.rule_refusal || tools_download(d, hints)) return "";
  if (const auto* p = preset_of(d.host, d.port)) return "--allow-net-preset " + std::string(p->name);
  return fmt::format("--allow-net {}:{}", util::printable(netproxy::bounded(d.host, 80)), d.port);
}

std::vector<std::string> refusal_summary(const netproxy::DecisionTable& table, const SummaryHints& hints) {
  struct Row {
    const netproxy::Decision* d;
    std::uint64_t count = 0;
  };
  // One row per destination (protocols together), most refused first.
  std::vector<Row> rows;
  std::uint64_t refused = table.unlisted.refused;
  // A published port's failures are the host's clients finding no server
  // in the jail (yet): said apart, never as the filter refusing the jail.
  std::vector<std::string> published;
  for (const auto& d : table.entries) {
    if (d.allowed) continue;
    if (d.protocol == netproxy::Protocol::publish) {
      if (published.size() < kSummaryLines)
        published.push_back(
            fmt::format("published port: {} connection{} from the host found nothing at the jail's "
                        "port {}: {}",
                        d.count, d.count == 1 ? "" : "s", d.port, util::printable(netproxy::bounded(d.reason, 160))));
      continue;
    }
    refused += d.count;
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const Row& r) { return r.d->host == d.host && r.d->port == d.port; });
    if (it == rows.end())
      rows.push_back({&d, d.count});
    else
      it->count += d.count;
  }
  if (refused == 0) return published;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.count > b.count; });
  // Jail-supplied text: escaped, and cut to what a line can show.
  auto shown = [](std::string_view s, size_t max) { return util::printable(netproxy::bounded(s, max)); };
  std::vector<std::string> out;
  out.push_back(fmt::format("the network filter refused {} connection{} to {} destination{}:", refused,
                            refused == 1 ? "" : "s", rows.size() + (table.unlisted.refused ? 1 : 0),
                            rows.size() == 1 && !table.unlisted.refused ? "" : "s"));
  std::vector<std::string> fixes, presets;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& d = *rows[i].d;
    std::string dest = d.host.empty() ? "(no destination: " + std::string(netproxy::protocol_name(d.protocol)) + ")"
                                      : fmt::format("{}:{}", shown(d.host, 80), d.port);
    if (i < kSummaryLines)
      out.push_back(fmt::format("  {} refused {}\u00d7: {}", dest, rows[i].count, shown(d.reason, 160)));
    if (!d.rule_refusal || tools_download(d, hints)) continue;
    if (const auto* p = preset_of(d.host, d.port)) {
      if (std::find(presets.begin(), presets.end(), p->name) == presets.end()) presets.emplace_back(p->name);
    } else if (fixes.size() < kSummaryLines) {
      fixes.push_back(fmt::format("{}:{}", shown(d.host, 80), d.port));
    }
  }
  if (rows.size() > kSummaryLines)
    out.push_back(fmt::format("  ... and {} more destinations (all in --report and the network log)",
                              rows.size() - kSummaryLines));
  if (table.unlisted.refused)
    out.push_back(fmt::format("  ... and {} refused connections past the filter's {} distinct entries (counted only)",
                              table.unlisted.refused, netproxy::kMaxEntries));
  if (!fixes.empty() || !presets.empty()) {
    std::string flags, toml, toml_presets;
    for (const auto& p : presets) {
      flags += " --allow-net-preset " + p;
      toml_presets += (toml_presets.empty() ? "\"" : ", \"") + p + "\"";
    }
    for (const auto& f : fixes) {
      flags += " --allow-net " + f;
      toml += (toml.empty() ? "\"" : ", \"") + f + "\"";
    }
    std::string keys;
    if (!presets.empty()) keys = fmt::format("presets = [{}]", toml_presets);
    if (!fixes.empty()) keys += fmt::format("{}allow = [{}]", keys.empty() ? "" : " and ", toml);
    out.push_back(fmt::format("  to allow, if you trust them:{}", flags));
    out.push_back(fmt::format("  or for good, in ~/.config/pi-jail/policy.toml: [network] {}", keys));
    out.push_back(
        "  (a project's .pi/jail.toml may ask for them too, only within the operator's [limits]; "
        "see pi-jail.toml(5))");
  }
  out.insert(out.end(), published.begin(), published.end());
  return out;
}

namespace {

// `name` as a TOML key: bare when it can be, else a quoted string.
std::string toml_key(std::string_view name) {
  const bool bare = !name.empty() && name.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_-") == std::string_view::npos;
  return bare ? std::string(name) : util::json_escape(name);
}

}  // namespace

std::vector<std::string> unsubstituted_summary(const netproxy::DecisionTable& decisions) {
  std::vector<std::string> out;
  for (const auto& d : decisions.entries) {
    if (d.unbound_credential.empty() || out.size() >= 2 * kSummaryLines) continue;
    // The host was checked as a loopback name or literal; still escaped.
    const std::string host = util::printable(netproxy::bounded(d.host, 80));
    const std::string authority = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    out.push_back(fmt::format("{}:{} got a placeholder, not the key ({}\u00d7): {}", authority, d.port, d.count,
                              util::printable(netproxy::bounded(d.reason, 160))));
    out.push_back(
        fmt::format("  to send the real key there, in ~/.config/pi-jail/policy.toml: [credentials] bind = "
                    "{{ {} = [\"http://{}:{}\"] }}",
                    util::printable(toml_key(d.unbound_credential)), authority, d.port));
  }
  return out;
}

void summarise_refusals(const netproxy::DecisionTable& decisions, const SummaryHints& hints) {
  for (const auto& line : refusal_summary(decisions, hints)) util::warn("{}", line);
  for (const auto& line : unsubstituted_summary(decisions)) util::warn("{}", line);
}

namespace {
std::string mib(std::uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
}  // namespace

void summarise_resources(const ResourceUse& r) {
  if (r.oom_kills && *r.oom_kills > 0)
    util::emit("WARNING",
               fmt::format("the jail reached its memory limit: the kernel killed {} process(es) in it", *r.oom_kills));
  if (util::verbosity() != util::Verbosity::verbose) return;
  std::vector<std::string> parts;
  if (r.memory_peak_bytes)
    parts.push_back(fmt::format("peak memory {} ({})", mib(*r.memory_peak_bytes), r.memory_peak_from));
  if (r.cpu_ms) parts.push_back(fmt::format("CPU {:.2f}s ({})", static_cast<double>(*r.cpu_ms) / 1000, r.cpu_from));
  if (r.processes_peak) parts.push_back(fmt::format("at most {} processes at once", *r.processes_peak));
  if (r.scratch_bytes) parts.push_back(fmt::format("{} left in scratch", mib(*r.scratch_bytes)));
  if (!parts.empty()) util::debug("resources used: {}", fmt::join(parts, ", "));
  for (const auto& l : r.limits) util::debug("limit {} {} ({}): {}", l.name, l.value, l.source, l.enforced_by);
}

void exec_unsandboxed(const std::string& path, const std::vector<std::string>& argv) {
  util::emit("WARNING",
             "--unsandboxed: running the command with NO isolation. It can read and change every file "
             "you can, use your credentials and reach the whole network.");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv(path.c_str(), args.data());
  int err = errno;
  util::error("cannot execute {}: {}", path, std::strerror(err));
  ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace pj::supervisor
