// The network filter's bounded record: aggregation, caps, the log's rate
// limit, the resolver's bounded and cancellable queue, and the end-of-run
// summary.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "netproxy/decisions.h"
#include "netproxy/resolver.h"
#include "run.h"

using namespace pj;
using namespace std::chrono_literals;

namespace {

netproxy::Decision refused(std::string host, int port, bool by_rule = true) {
  netproxy::Decision d;
  d.time = std::chrono::system_clock::now();
  d.protocol = netproxy::Protocol::http_connect;
  d.host = std::move(host);
  d.port = port;
  d.reason = "no rule allows " + d.host + ":" + std::to_string(port);
  d.rule_refusal = by_rule;
  return d;
}

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("bounded: cut at a character boundary, marked with what was cut") {
  CHECK(netproxy::bounded("short") == "short");
  std::string long_name(1000, 'x');
  auto b = netproxy::bounded(long_name, 64);
  CHECK(b.size() <= 64);
  CHECK(b.ends_with("bytes]"));
  std::string utf8;
  for (int i = 0; i < 100; ++i) utf8 += "\xc3\xa9";  // é
  auto u = netproxy::bounded(utf8, 40);
  CHECK(u.size() <= 40);
  size_t body = u.find("...[+");
  REQUIRE(body != std::string::npos);
  CHECK(body % 2 == 0);  // whole characters only
}

TEST_CASE("decisions: aggregated per (protocol, host, port, verdict), distinct entries capped") {
  netproxy::DecisionRecorder rec(-1);
  for (int i = 0; i < 6; ++i) rec.add(refused("pypi.org", 443));
  auto ok = refused("pypi.org", 443);
  ok.allowed = true;
  ok.bytes_up = 10;
  ok.bytes_down = 20;
  rec.add(ok);
  rec.add(ok);
  const auto& t = rec.table();
  REQUIRE(t.entries.size() == 2);
  CHECK(t.entries[0].count == 6);
  CHECK(t.entries[1].count == 2);
  CHECK(t.entries[1].bytes_down == 40);
  for (int i = 0; i < 2000; ++i) rec.add(refused(std::to_string(i) + std::string(16000, 'h'), 443));
  CHECK(t.entries.size() == netproxy::kMaxEntries);
  CHECK(t.unlisted.refused == 2002 - netproxy::kMaxEntries);
  for (const auto& e : t.entries) {
    CHECK(e.host.size() <= netproxy::kMaxJailText);
    CHECK(e.reason.size() <= netproxy::kMaxJailText);
  }
}

TEST_CASE("decisions: the log is rate-limited, and says how much it left out") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  ::fcntl(p[1], F_SETFL, O_NONBLOCK);
  ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  auto t0 = std::chrono::steady_clock::now();
  {
    netproxy::DecisionRecorder rec(p[1], {10, 5});  // 10 at once, then 5 a second
    for (int i = 0; i < 100; ++i) rec.add(refused("a" + std::to_string(i) + std::string(5000, 'x'), 443), t0);
    CHECK(rec.table().log_suppressed == 90);
    for (int i = 0; i < 100; ++i) rec.add(refused("b.example", 443), t0 + 1s);  // 5 more tokens
    CHECK(rec.table().log_suppressed == 90 + 95);
    rec.flush();
  }
  std::string log = read_all(p[0]);
  ::close(p[0]);
  ::close(p[1]);
  CHECK(lines(log) == 10 + 1 + 5 + 1);  // the suppressed counts come before the next line, and at the end
  CHECK(log.find("\"suppressed\": 90") != std::string::npos);
  CHECK(log.find("\"suppressed\": 95") != std::string::npos);
  CHECK(log.size() < 17 * 1024);
}

TEST_CASE("resolver: one look-up per name, a bounded queue, and cancelled work leaves it") {
  netproxy::Resolver r(2, 0);  // no workers: everything stays queued
  REQUIRE(r.fd() >= 0);
  for (std::uint64_t c = 1; c <= 1000; ++c) CHECK(r.submit(c, "a.test"));
  CHECK(r.pending() == 1);
  CHECK(r.submit(1001, "b.test"));
  CHECK_FALSE(r.submit(1002, "c.test"));  // full
  for (std::uint64_t c = 1; c <= 1000; ++c) r.cancel(c, "a.test");
  CHECK(r.pending() == 1);
  CHECK(r.submit(1002, "c.test"));
}

namespace {

// Threads of this process (Linux: /proc/self/task), -1 elsewhere.
int threads_now() {
#if defined(__linux__)
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
#else
  return -1;
#endif
}

}  // namespace

TEST_CASE("resolver: workers start when a name is queued, not before, and answer it") {
  // Four idle workers used to start with every network filter,
  // on every run, resolving nothing for most of them.
  const int before = threads_now();
  netproxy::Resolver r(8, 4);
  REQUIRE(r.fd() >= 0);
  CHECK(threads_now() == before);  // none yet
  REQUIRE(r.submit(1, "localhost"));
  REQUIRE(r.submit(2, "127.0.0.1"));
  REQUIRE(r.submit(3, "localhost"));  // joins the first look-up
#if defined(__linux__)
  CHECK(threads_now() > before);
  CHECK(threads_now() <= before + 2);  // one per name at most
#endif
  std::vector<netproxy::Resolver::Answer> got;
  for (int guard = 0; guard < 100 && got.size() < 3; ++guard) {
    pollfd p{r.fd(), POLLIN, 0};
    ::poll(&p, 1, 100);  // a guard, not a timing
    for (auto& a : r.take()) got.push_back(std::move(a));
  }
  REQUIRE(got.size() == 3);
  for (const auto& a : got) {
    CAPTURE(a.conn);
    CAPTURE(a.error);
    CHECK(a.error.empty());
    CHECK_FALSE(a.addrs.empty());
  }
  CHECK(r.pending() == 0);
}

TEST_CASE("resolver: a filter that may not open files asks for each name once, and answers reach every waiter") {
  netproxy::Resolver r(2, 4);
  REQUIRE(r.fd() >= 0);
  int before = threads_now();
  std::vector<std::pair<std::uint64_t, std::string>> asked;
  r.ask_by([&](std::uint64_t id, const std::string& host) {
    asked.emplace_back(id, host);
    return true;
  });
  REQUIRE(r.submit(1, "a.test"));
  REQUIRE(r.submit(2, "a.test"));  // joins the question already out
  REQUIRE(r.submit(3, "b.test"));
  CHECK_FALSE(r.submit(4, "c.test"));  // two names at most
  CHECK(threads_now() == before);      // no look-up of its own
  REQUIRE(asked.size() == 2);
  CHECK(asked[0].second == "a.test");
  r.answer(asked[0].first, {*net::parse_ip("192.0.2.7")}, "");
  r.answer(asked[0].first, {*net::parse_ip("192.0.2.8")}, "");  // a second answer is dropped
  r.answer(999, {*net::parse_ip("192.0.2.9")}, "");             // so is one never asked
  r.cancel(3, "b.test");
  r.answer(asked[1].first, {}, "no such name");  // nobody waits for it any more
  pollfd p{r.fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 0) == 1);
  auto got = r.take();
  REQUIRE(got.size() == 2);
  for (const auto& a : got) {
    REQUIRE(a.addrs.size() == 1);
    CHECK(a.addrs[0] == *net::parse_ip("192.0.2.7"));
  }
  CHECK(r.pending() == 0);
}

TEST_CASE("resolver: a question that could not be sent fails its name at once") {
  netproxy::Resolver r(2, 0);
  r.ask_by([](std::uint64_t, const std::string&) { return false; });
  REQUIRE(r.submit(1, "a.test"));
  auto got = r.take();
  REQUIRE(got.size() == 1);
  CHECK(got[0].error == "the name could not be asked of the supervisor");
}

TEST_CASE("summary: one line per destination with its count, then the exact fix") {
  netproxy::DecisionRecorder rec(-1);
  for (int i = 0; i < 6; ++i) rec.add(refused("api.example.com", 443));
  rec.add(refused("10.0.0.1", 80, false));
  auto lines = supervisor::refusal_summary(rec.table());
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0] == "the network filter refused 7 connections to 2 destinations:");
  CHECK(lines[1].starts_with("  api.example.com:443 refused 6\u00d7: no rule allows api.example.com:443"));
  CHECK(lines[2].starts_with("  10.0.0.1:80 refused 1\u00d7"));
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  CHECK(all.find("--allow-net api.example.com:443\n") != std::string::npos);
  CHECK(all.find("[network] allow = [\"api.example.com:443\"]") != std::string::npos);
  CHECK(all.find("--allow-net 10.0.0.1") == std::string::npos);  // not an allow-rule refusal
}

TEST_CASE("summary: hosts of a preset are proposed as the preset, once, beside other hosts") {
  netproxy::DecisionRecorder rec(-1);
  rec.add(refused("registry.npmjs.org", 443));
  rec.add(refused("registry.yarnpkg.com", 443));
  rec.add(refused("files.pythonhosted.org", 443));
  rec.add(refused("registry.npmjs.org", 8443));  // not the preset's port
  rec.add(refused("api.example.com", 443));
  std::string all;
  for (const auto& l : supervisor::refusal_summary(rec.table())) all += l + "\n";
  CAPTURE(all);
  CHECK(all.find("to allow, if you trust them: --allow-net-preset npm --allow-net-preset pypi --allow-net "
                 "registry.npmjs.org:8443 --allow-net api.example.com:443\n") != std::string::npos);
  CHECK(all.find("[network] presets = [\"npm\", \"pypi\"] and allow = [\"registry.npmjs.org:8443\", "
                 "\"api.example.com:443\"]") != std::string::npos);
  CHECK(all.find("--allow-net registry.npmjs.org:443") == std::string::npos);
}

TEST_CASE("summary: github.com refused while Pi lacks fd and rg is listed, with no rule proposed for it") {
  netproxy::DecisionRecorder rec(-1);
  rec.add(refused("github.com", 443));
  auto with_tools = supervisor::refusal_summary(rec.table());
  std::string all;
  for (const auto& l : with_tools) all += l + "\n";
  CHECK(all.find("--allow-net-preset github") != std::string::npos);
  all.clear();
  for (const auto& l : supervisor::refusal_summary(rec.table(), {.pi_downloads_tools = true})) all += l + "\n";
  CAPTURE(all);
  CHECK(all.find("github.com:443 refused 1\u00d7") != std::string::npos);
  CHECK(all.find("to allow") == std::string::npos);
  CHECK(all.find("allow-net") == std::string::npos);
  CHECK(all.find("presets") == std::string::npos);
}

TEST_CASE("summary: a flood of distinct huge names stays a few short lines") {
  netproxy::DecisionRecorder rec(-1);
  for (int i = 0; i < 10000; ++i) rec.add(refused(std::to_string(i) + std::string(16000, 'q'), 443, false));
  auto lines = supervisor::refusal_summary(rec.table());
  CHECK(lines.size() <= supervisor::kSummaryLines + 6);
  size_t bytes = 0;
  for (const auto& l : lines) bytes += l.size();
  CHECK(bytes < 8192);
  CHECK(lines[0].find("refused 10000 connections") != std::string::npos);
}

TEST_CASE("summary: nothing refused, nothing said") {
  netproxy::DecisionRecorder rec(-1);
  auto ok = refused("pypi.org", 443);
  ok.allowed = true;
  rec.add(ok);
  CHECK(supervisor::refusal_summary(rec.table()).empty());
}

TEST_CASE("summary: a published port's failed connections are said apart, never as the filter refusing the jail") {
  netproxy::DecisionRecorder rec(-1);
  auto d = refused("127.0.0.1", 3000, false);
  d.protocol = netproxy::Protocol::publish;
  d.reason = "cannot connect to 127.0.0.1:3000: Connection refused";
  for (int i = 0; i < 3; ++i) rec.add(d);
  auto lines = supervisor::refusal_summary(rec.table());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "published port: 3 connections from the host found nothing at the jail's port 3000: cannot "
        "connect to 127.0.0.1:3000: Connection refused");
  rec.add(refused("pypi.org", 443));
  lines = supervisor::refusal_summary(rec.table());
  REQUIRE(lines.size() >= 3);
  CHECK(lines[0] == "the network filter refused 1 connection to 1 destination:");
  CHECK(lines.back().starts_with("published port: 3 connections"));
}

TEST_CASE("decisions: the protocol is named only at the output edge, as the log and report always spelled it") {
  using netproxy::Protocol;
  const std::pair<Protocol, const char*> names[] = {
      {Protocol::http, "http"},       {Protocol::http_connect, "http-connect"}, {Protocol::socks5, "socks5"},
      {Protocol::forward, "forward"}, {Protocol::publish, "publish"},           {Protocol::credential, "credential"},
  };
  for (const auto& n : names) {
    const char* want = n.second;
    CAPTURE(want);
    CHECK(std::string(netproxy::protocol_name(n.first)) == want);
    auto d = refused("a.example", 443);
    d.protocol = n.first;
    d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(5));
    CHECK(d.json() == std::string("{\"time_ms\": 5, \"protocol\": \"") + want +
                          "\", \"host\": \"a.example\", \"port\": 443, \"address\": \"\", \"allowed\": false, "
                          "\"reason\": \"no rule allows a.example:443\", \"bytes_up\": 0, \"bytes_down\": 0, "
                          "\"duration_ms\": 0}");
  }
  // A decision with no destination is summarised by its protocol's name.
  netproxy::DecisionRecorder rec(-1);
  auto d = refused("", 0, false);
  d.protocol = Protocol::credential;
  d.reason = "a refreshed credential was not taken";
  rec.add(d);
  auto lines = supervisor::refusal_summary(rec.table());
  bool named = false;
  for (const auto& l : lines) named = named || l.find("(no destination: credential)") != std::string::npos;
  CHECK(named);
}
