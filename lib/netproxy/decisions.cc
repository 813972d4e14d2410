#include "netproxy/decisions.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "util/json.h"

namespace pj::netproxy {

std::string bounded(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  std::string marker = fmt::format("...[+{} bytes]", s.size() - max);
  size_t keep = max > marker.size() ? max - marker.size() : 0;
  // Not in the middle of a UTF-8 sequence: back up over continuation bytes.
  while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
  return std::string(s.substr(0, keep)) + fmt::format("...[+{} bytes]", s.size() - keep);
}

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::http: return "http";
    case Protocol::http_connect: return "http-connect";
    case Protocol::socks5: return "socks5";
    case Protocol::forward: return "forward";
    case Protocol::publish: return "publish";
    case Protocol::credential: return "credential";
  }
  return "?";
}

std::string Decision::json() const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  std::string line = "{";
  line += fmt::format("\"time_ms\": {}, \"protocol\": {}, \"host\": {}, \"port\": {}, \"address\": {}, ", ms,
                      util::json_escape(protocol_name(protocol)), util::json_escape(host), port,
                      util::json_escape(address));
  line += fmt::format("\"allowed\": {}, \"reason\": {}, \"bytes_up\": {}, \"bytes_down\": {}, \"duration_ms\": {}}}",
                      allowed, util::json_escape(reason), bytes_up, bytes_down, duration_ms);
  return line;
}

DecisionRecorder::DecisionRecorder(int log_fd, LogLimits limits)
    : log_fd_(log_fd), limits_(limits), tokens_(limits.burst) {}

void DecisionRecorder::add(Decision d, std::chrono::steady_clock::time_point now) {
  d.host = bounded(d.host);
  d.reason = bounded(d.reason);
  d.address = bounded(d.address, 64);
  d.unbound_credential = bounded(d.unbound_credential, 80);
  d.count = 1;
  d.last = d.time;
  if (sink_) sink_(d);
  log(d, now);
  auto key = std::make_tuple(d.protocol, d.host, d.port, d.allowed);
  if (auto it = index_.find(key); it != index_.end()) {
    Decision& e = table_.entries[it->second];
    ++e.count;
    e.last = std::max(e.last, d.time);
    e.bytes_up += d.bytes_up;
    e.bytes_down += d.bytes_down;
    e.duration_ms = std::max(e.duration_ms, d.duration_ms);
    if (e.address.empty()) e.address = d.address;
    return;
  }
  if (table_.entries.size() >= kMaxEntries) {
    Unlisted& u = table_.unlisted;
    ++(d.allowed ? u.allowed : u.refused);
    u.bytes_up += d.bytes_up;
    u.bytes_down += d.bytes_down;
    return;
  }
  index_.emplace(std::move(key), table_.entries.size());
  table_.entries.push_back(std::move(d));
}

void DecisionRecorder::log(const Decision& d, std::chrono::steady_clock::time_point now) {
  if (log_fd_ < 0) return;
  if (!refilled_) refilled_ = now;  // the bucket starts full at the first decision
  double elapsed = std::chrono::duration<double>(now - *refilled_).count();
  if (elapsed > 0) {
    tokens_ = std::min(limits_.burst, tokens_ + elapsed * limits_.per_second);
    refilled_ = now;
  }
  if (tokens_ < 1) {
    ++pending_suppressed_;
    ++table_.log_suppressed;
    return;
  }
  tokens_ -= 1;
  flush();
  write_line(d.json() + "\n");
}

void DecisionRecorder::flush() {
  if (pending_suppressed_ == 0 || log_fd_ < 0) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  write_line(
      fmt::format("{{\"time_ms\": {}, \"suppressed\": {}, \"reason\": \"the log's rate limit left out {} "
                  "decisions; the report and the summary count them\"}}\n",
                  ms, pending_suppressed_, pending_suppressed_));
  pending_suppressed_ = 0;
}

void DecisionRecorder::write_line(const std::string& line) {
  ssize_t n = ::write(log_fd_, line.data(), line.size());
  (void)n;  // a full disk loses log lines, never the run
}

}  // namespace pj::netproxy
