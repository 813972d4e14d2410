#include "report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include <fmt/format.h>

#include "util/json.h"
#include "util/log.h"
#include "util/untrusted.h"

namespace pj::supervisor {

using util::Error;
using util::JsonWriter;

namespace {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

const char* ending_word(RunOutcome::Ending e) {
  switch (e) {
    case RunOutcome::Ending::exited: return "exited";
    case RunOutcome::Ending::signaled: return "signaled";
    case RunOutcome::Ending::timed_out: return "timed_out";
    case RunOutcome::Ending::setup_failed: return "setup_failed";
    case RunOutcome::Ending::not_executed: return "not_executed";
  }
  return "?";
}

void optional_number(JsonWriter& j, std::string_view k, const std::optional<std::uint64_t>& v) {
  if (v)
    j.field(k, static_cast<std::int64_t>(*v));
  else
    j.key(k).null();
}

void optional_text(JsonWriter& j, std::string_view k, const std::string& v) {
  if (!v.empty())
    j.field(k, v);
  else
    j.key(k).null();
}

void write_resources(JsonWriter& j, const ResourceUse& r) {
  j.key("resources").begin_object();
  j.key("limits").begin_array();
  for (const auto& l : r.limits) {
    j.begin_object();
    j.field("name", l.name);
    j.field("value", l.value);
    j.field("source", l.source);
    j.field("enforced_by", l.enforced_by);
    j.end_object();
  }
  j.end_array();
  optional_number(j, "memory_peak_bytes", r.memory_peak_bytes);
  optional_text(j, "memory_peak_from", r.memory_peak_bytes ? r.memory_peak_from : "");
  optional_number(j, "cpu_ms", r.cpu_ms);
  optional_text(j, "cpu_from", r.cpu_ms ? r.cpu_from : "");
  optional_number(j, "processes_peak", r.processes_peak);
  optional_number(j, "scratch_bytes", r.scratch_bytes);
  optional_number(j, "oom_kills", r.oom_kills);
  j.end_object();
}

}  // namespace

void write_environment(JsonWriter& j, const std::vector<std::string>& env) {
  j.key("environment").begin_array();
  for (const auto& e : env) j.value(std::string_view(e).substr(0, e.find('=')));
  j.end_array();
}

std::string render_report(const Report::Content& c) {
  JsonWriter j;
  j.begin_object();
  j.field("schema", "pi-jail-report/1");
  j.field("version", PI_JAIL_VERSION);
  j.field("backend", c.backend);
  j.key("command").begin_array();
  for (const auto& a : c.command) j.value(a);
  j.end_array();
  j.field("workspace", c.workspace);
  j.key("interpreter").begin_object();
  j.field("path", c.interpreter);
  j.field("path_first", c.path_first);
  j.end_object();
  j.field("started", rfc3339(c.started));
  j.field("ended", rfc3339(c.ended));
  j.field("duration_ms", static_cast<std::int64_t>(
                             std::chrono::duration_cast<std::chrono::milliseconds>(c.ended - c.started).count()));
  j.key("exit").begin_object();
  j.field("code", c.outcome.exit_code);
  j.field("ending", ending_word(c.outcome.ending));
  if (c.outcome.command_status >= 0)
    j.field("command_status", c.outcome.command_status);
  else
    j.key("command_status").null();
  if (c.outcome.command_status > 128 && c.outcome.ending != RunOutcome::Ending::not_executed)
    j.field("signal", c.outcome.command_status - 128);
  else
    j.key("signal").null();
  if (!c.outcome.failure.empty())
    j.field("failure", c.outcome.failure);
  else
    j.key("failure").null();
  j.end_object();
  if (c.write_jail) {
    c.write_jail(j, c.outcome);
  } else {
    j.key("layers").null();
    j.key("policy").null();
  }
  j.key("refused_requests").begin_array();
  for (const auto& r : c.refused) {
    j.begin_object();
    j.field("request", r.request.str());
    j.field("what", r.what);
    j.field("reason", r.reason);
    j.field("by", policy::authority_name(r.by));
    if (r.limit) j.field("limit", r.limit->str());
    j.end_object();
  }
  j.end_array();
  j.key("network").begin_object();
  j.field("filter", c.network_filter.empty() ? "not started" : c.network_filter);
  j.key("decisions").begin_array();
  for (const auto& d : c.decisions.entries) {
    j.begin_object();
    j.field("time", rfc3339(d.time));
    j.field("last", rfc3339(d.last));
    j.field("count", d.count);
    j.field("protocol", netproxy::protocol_name(d.protocol));
    j.field("host", d.host);
    j.field("port", d.port);
    j.field("address", d.address);
    j.field("allowed", d.allowed);
    j.field("reason", d.reason);
    j.field("bytes_up", d.bytes_up);
    j.field("bytes_down", d.bytes_down);
    j.field("duration_ms", d.duration_ms);
    j.end_object();
  }
  j.end_array();
  const auto& u = c.decisions.unlisted;
  j.key("unlisted").begin_object();
  j.field("allowed", u.allowed);
  j.field("refused", u.refused);
  j.field("bytes_up", u.bytes_up);
  j.field("bytes_down", u.bytes_down);
  j.end_object();
  j.field("log_suppressed", c.decisions.log_suppressed);
  j.end_object();
  git::audit::write_json(j, c.repository_audit);
  j.key("ssh_agent_refusals").begin_array();
  for (const auto& note : c.ssh_agent_refusals) j.value(note);
  j.end_array();
  j.key("write_back").begin_array();
  for (const auto& note : c.write_back) j.value(note);
  j.end_array();
  write_resources(j, c.outcome.resources);
  j.key("credentials").begin_object();
  if (c.write_credentials) {
    c.write_credentials(j);
  } else {
    j.key("bindings").begin_array();
    j.end_array();
  }
  j.end_object();
  j.end_object();
  return j.str();
}

util::Result<Report> Report::open(const std::string& path) {
  // 0600 like the network log: it names hosts, paths and refusals of the run.
  auto fd = util::open_output_file(path, util::OutputMode::replace_content, 0600);
  if (!fd) return std::move(fd.take_error()).context("--report");
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return Error::from_errno(fmt::format("stat the report file {}", path), errno);
  return Report(path, std::move(*fd), st.st_dev, st.st_ino);
}

util::Status Report::write(const Content& c) {
  std::string text = render_report(c);
  if (::ftruncate(fd_.get(), 0) != 0) return Error::from_errno(fmt::format("truncate {}", path_), errno);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::pwrite(fd_.get(), text.data() + off, text.size() - off, static_cast<off_t>(off));
    if (n < 0) return Error::from_errno(fmt::format("write the report {}", path_), errno);
    off += static_cast<size_t>(n);
  }
  struct stat st;  // lstat: a symlink put in its place is a replacement, not followed
  if (::lstat(path_.c_str(), &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_)
    return Error::invalid(
        fmt::format("{} was replaced during the run; the report went to the file opened at the "
                    "start (keep reports outside the workspace)",
                    path_));
  return {};
}

}  // namespace pj::supervisor
