// The network filter's record of what it decided, bounded whatever the
// jail sends: decisions are aggregated per (protocol, host, port, verdict)
// with counts and byte totals; the number of distinct entries and the
// bytes kept of every jail-supplied string are capped; the JSON-lines log
// is rate-limited (a token bucket), and what it leaves out is counted.
//
// Bounds (README "Network", pi-jail(1)): at most kMaxEntries entries
// (beyond them only counts and byte totals); host and reason at most
// kMaxJailText bytes each; the log at most LogLimits::burst lines at once,
// then LogLimits::per_second a second, each line under 1 KiB.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace pj::netproxy {

inline constexpr size_t kMaxJailText = 256;
inline constexpr size_t kMaxEntries = 512;

// `s` cut to at most `max` bytes (at a UTF-8 character boundary) with the
// cut marked "...[+N bytes]"; unchanged when it fits.
std::string bounded(std::string_view s, size_t max = kMaxJailText);

// How a connection reached the filter (or, for `credential`, the
// credential filter's own records). Named only at the output edges: the
// net log, the report and the summary (protocol_name()).
enum class Protocol { http, http_connect, socks5, forward, publish, credential };
// "http", "http-connect", "socks5", "forward", "publish", "credential".
const char* protocol_name(Protocol p);

struct Decision {
  std::chrono::system_clock::time_point time;  // the first connection
  std::chrono::system_clock::time_point last;  // the last one
  Protocol protocol = Protocol::http;
  std::string host;  // bounded()
  int port = 0;
  std::string address;  // the address connected to (the first), when one was
  bool allowed = false;
  std::string reason;  // bounded()
  // Refused at the rule check for a valid name or address: an allow rule
  // for exactly host:port would let it through (the summary's fix).
  bool rule_refusal = false;
  // A placeholder went out unsubstituted to a host loopback port no
  // binding covers: the credential's name for [credentials] bind (the
  // summary's fix: a plain-HTTP binding of that port). Bounded like `host`.
  std::string unbound_credential;
  std::uint64_t count = 1;
  std::uint64_t bytes_up = 0, bytes_down = 0;  // totals
  std::int64_t duration_ms = 0;                // the longest connection
  std::string json() const;                    // one log line (this connection)
};

// What did not fit in kMaxEntries entries.
struct Unlisted {
  std::uint64_t allowed = 0, refused = 0;
  std::uint64_t bytes_up = 0, bytes_down = 0;
};

struct DecisionTable {
  std::vector<Decision> entries;  // in order of first sight
  Unlisted unlisted;
  std::uint64_t log_suppressed = 0;  // decisions the log's rate limit left out
};

struct LogLimits {
  double burst = 100;      // lines written at once
  double per_second = 20;  // and then, on average
};

class DecisionRecorder {
public:
  // `log_fd`: JSON lines are appended there (-1: none).
  explicit DecisionRecorder(int log_fd, LogLimits limits = {});
  // One connection's decision (count 1); its strings are bounded here.
  void add(Decision d, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // Called with every decision add() takes, bounded as recorded.
  void set_sink(std::function<void(const Decision&)> sink) { sink_ = std::move(sink); }
  // Write the count of suppressed lines, if any (at the end of a run).
  void flush();
  const DecisionTable& table() const { return table_; }

private:
  void log(const Decision& d, std::chrono::steady_clock::time_point now);
  void write_line(const std::string& line);
  int log_fd_;
  std::function<void(const Decision&)> sink_;
  LogLimits limits_;
  double tokens_;
  std::optional<std::chrono::steady_clock::time_point> refilled_;
  std::uint64_t pending_suppressed_ = 0;
  DecisionTable table_;
  std::map<std::tuple<Protocol, std::string, int, bool>, size_t> index_;
};

}  // namespace pj::netproxy
