// What a signal to pi-jail does (SignalPolicy), how a run's end becomes
// an exit status (command_ended), the --report JSON (render_report)
// checked against man/pi-jail-report.schema.json, and a run's options.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <utility>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "json_helpers.h"
#include "temp_dir.h"
#include "report.h"
#include "run.h"
#include "supervise.h"

using pj::supervisor::command_ended;
using pj::supervisor::Report;
using pj::supervisor::RunOutcome;
using pj::supervisor::SignalPolicy;
using pj::supervisor::SignalResponse;
using pj::supervisor::Supervision;
namespace json = pj::util::json;

TEST_CASE("the first termination signal is passed on with the grace period; a second of any kind kills at once") {
  for (int first : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    for (int second : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
      CAPTURE(first);
      CAPTURE(second);
      SignalPolicy p;
      SignalResponse a = p.respond(first, false);
      CHECK(a.deliver == first);
      CHECK(a.start_grace);
      CHECK_FALSE(a.forced);
      SignalResponse b = p.respond(second, false);
      CHECK(b.deliver == SIGKILL);
      CHECK(b.forced);
      CHECK_FALSE(b.start_grace);
      SignalResponse c = p.respond(first, true);  // and every one after
      CHECK(c.deliver == SIGKILL);
      CHECK(c.forced);
    }
  }
}

TEST_CASE("signals between termination signals do not count towards the second") {
  SignalPolicy p;
  CHECK(p.respond(SIGTERM, true).start_grace);
  for (int other : {SIGCONT, SIGWINCH, SIGTSTP, SIGUSR1, SIGUSR2, SIGCHLD}) CHECK_FALSE(p.respond(other, true).forced);
  CHECK(p.respond(SIGINT, true).forced);
}

TEST_CASE("SIGCONT resumes the command, and takes the terminal back only when the command is on a PTY") {
  SignalPolicy p;
  SignalResponse on_pty = p.respond(SIGCONT, true);
  CHECK(on_pty.deliver == SIGCONT);
  CHECK(on_pty.resume);
  SignalResponse streams = p.respond(SIGCONT, false);
  CHECK(streams.deliver == SIGCONT);
  CHECK_FALSE(streams.resume);
  CHECK_FALSE(streams.start_grace);
}

TEST_CASE("SIGWINCH resizes the PTY (the kernel tells its group), or is passed on when there is none") {
  SignalPolicy p;
  SignalResponse on_pty = p.respond(SIGWINCH, true);
  CHECK(on_pty.sync_size);
  CHECK(on_pty.deliver == 0);
  SignalResponse streams = p.respond(SIGWINCH, false);
  CHECK_FALSE(streams.sync_size);
  CHECK(streams.deliver == SIGWINCH);
}

TEST_CASE("SIGTSTP, SIGUSR1 and SIGUSR2 are passed on as they are; SIGCHLD is the backend's and sends nothing") {
  SignalPolicy p;
  for (int sig : {SIGTSTP, SIGUSR1, SIGUSR2}) {
    CAPTURE(sig);
    SignalResponse r = p.respond(sig, true);
    CHECK(r.deliver == sig);
    CHECK_FALSE(r.start_grace);
    CHECK_FALSE(r.resume);
    CHECK_FALSE(r.sync_size);
  }
  SignalResponse chld = p.respond(SIGCHLD, true);
  CHECK(chld.deliver == 0);
  CHECK_FALSE(chld.start_grace);
  CHECK_FALSE(chld.resume);
  CHECK_FALSE(chld.sync_size);
}

TEST_CASE("a command's status is pi-jail's exit status, except after --timeout: 124") {
  RunOutcome exited = command_ended(3, false);
  CHECK(exited.ending == RunOutcome::Ending::exited);
  CHECK(exited.exit_code == 3);
  CHECK(exited.command_status == 3);
  RunOutcome signaled = command_ended(128 + SIGKILL, false);
  CHECK(signaled.ending == RunOutcome::Ending::signaled);
  CHECK(signaled.exit_code == 128 + SIGKILL);
  RunOutcome timed_out = command_ended(128 + SIGTERM, true);
  CHECK(timed_out.ending == RunOutcome::Ending::timed_out);
  CHECK(timed_out.exit_code == 124);
  CHECK(timed_out.command_status == 128 + SIGTERM);
  CHECK(command_ended(0, true).exit_code == 124);  // the command ended well, but only after the timeout
  CHECK(command_ended(0, false).ending == RunOutcome::Ending::exited);
}

namespace {

// A backend that records the signals the core sends.
struct FakeJail final : pj::supervisor::JailControl {
  std::vector<int> sent;
  void signal(int sig) override { sent.push_back(sig); }
  std::string_view everything() const override { return "the fake jail"; }
  std::string_view stopped() const override { return "the fake jail"; }
  std::vector<int> take() { return std::exchange(sent, {}); }
};

using std::chrono::seconds;
const Supervision::Clock::time_point t0{seconds(1000)};

pj::supervisor::RunOptions options(std::optional<std::chrono::milliseconds> timeout) {
  pj::supervisor::RunOptions o;
  o.timeout = timeout;
  o.grace = seconds(5);
  return o;
}

}  // namespace

TEST_CASE("--timeout: TERM and CONT when it is reached, KILL after --grace, and the run ends with 124") {
  FakeJail jail;
  auto opts = options(seconds(10));
  Supervision core(jail, opts, 0, t0);
  core.tick(t0 + seconds(9));
  CHECK(jail.take().empty());
  CHECK(core.poll_timeout(t0 + seconds(9), -1) == 1001);  // sleeps until just past the deadline
  CHECK(core.poll_timeout(t0 + seconds(9), 200) == 200);
  core.tick(t0 + seconds(10));
  CHECK(jail.take() == std::vector<int>{SIGTERM, SIGCONT});
  CHECK(core.timed_out());
  CHECK(core.stopped_by() == 0);  // no signal to pi-jail stopped it
  CHECK(core.poll_timeout(t0 + seconds(10), -1) == 5001);
  core.tick(t0 + seconds(14));
  CHECK(jail.take().empty());
  core.tick(t0 + seconds(15));
  CHECK(jail.take() == std::vector<int>{SIGKILL});
  core.tick(t0 + seconds(60));
  CHECK(jail.take().empty());  // each fires once
  CHECK(core.poll_timeout(t0 + seconds(60), -1) == -1);
  RunOutcome out = core.ended(128 + SIGKILL);
  CHECK(out.exit_code == 124);
  CHECK(out.ending == RunOutcome::Ending::timed_out);
  CHECK(out.command_status == 128 + SIGKILL);
}

TEST_CASE("a termination signal is passed on with CONT, KILL follows after --grace, a second kills at once") {
  FakeJail jail;
  auto opts = options(std::nullopt);
  Supervision core(jail, opts, 0, t0);
  CHECK(core.poll_timeout(t0, -1) == -1);  // nothing due: sleep until something happens
  CHECK(core.poll_timeout(t0, 1000) == 1000);
  core.on_signal(SIGINT, t0);
  CHECK(jail.take() == std::vector<int>{SIGINT, SIGCONT});
  CHECK(core.stopped_by() == SIGINT);
  CHECK(core.poll_timeout(t0, -1) == 5001);
  core.on_signal(SIGHUP, t0 + seconds(1));
  CHECK(jail.take() == std::vector<int>{SIGKILL});
  CHECK(core.stopped_by() == SIGINT);  // the first one
  core.tick(t0 + seconds(5));
  CHECK(jail.take() == std::vector<int>{SIGKILL});  // the grace still ends: KILL is never taken back
  RunOutcome out = core.ended(128 + SIGINT);
  CHECK(out.exit_code == 128 + SIGINT);
  CHECK(out.ending == RunOutcome::Ending::signaled);
  CHECK(out.stopped_by == SIGINT);
  CHECK_FALSE(core.timed_out());
}

TEST_CASE(
    "a termination signal after --timeout fired kills at once only if it is the second signal; the grace is not "
    "extended") {
  FakeJail jail;
  auto opts = options(seconds(10));
  Supervision core(jail, opts, 0, t0);
  core.tick(t0 + seconds(10));
  CHECK(jail.take() == std::vector<int>{SIGTERM, SIGCONT});
  core.on_signal(SIGTERM, t0 + seconds(12));  // the operator's first: passed on
  CHECK(jail.take() == std::vector<int>{SIGTERM, SIGCONT});
  core.tick(t0 + seconds(15));  // the grace armed by the timeout, not 12 + 5
  CHECK(jail.take() == std::vector<int>{SIGKILL});
  CHECK(core.ended(0).exit_code == 124);
  CHECK(core.ended(0).stopped_by == SIGTERM);
}

TEST_CASE("without a terminal: other signals are passed on, and a stopped command waits for SIGCONT") {
  FakeJail jail;
  auto opts = options(std::nullopt);
  Supervision core(jail, opts, 0, t0);
  CHECK_FALSE(core.on_pty());
  for (int sig : {SIGUSR1, SIGUSR2, SIGWINCH, SIGTSTP}) core.on_signal(sig, t0);
  CHECK(jail.take() == std::vector<int>{SIGUSR1, SIGUSR2, SIGWINCH, SIGTSTP});
  core.on_command_stop(SIGTSTP);  // no shell to hand the terminal to: pi-jail does not stop
  CHECK(jail.take().empty());
  core.on_signal(SIGCONT, t0);
  CHECK(jail.take() == std::vector<int>{SIGCONT});
  CHECK(core.poll_timeout(t0, -1) == -1);  // no grace was started
  RunOutcome out = core.ended(0);
  CHECK(out.exit_code == 0);
  CHECK(out.stopped_by == 0);
}

namespace {

// The subset of JSON Schema pi-jail's schemas use (the one
// tests/containment/validate_json.py checks): type, enum, required,
// properties, additionalProperties: false, items, oneOf.
bool type_ok(const json::Value& v, const std::string& name) {
  if (name == "integer") return v.as_number() && v.as_number()->is_integer();
  if (name == "number") return v.as_number() != nullptr;
  if (name == "string") return v.as_string() != nullptr;
  if (name == "boolean") return v.as_bool() != nullptr;
  if (name == "object") return v.as_object() != nullptr;
  if (name == "array") return v.as_array() != nullptr;
  if (name == "null") return v.is_null();
  return false;
}

void check_schema(const json::Value& v, const json::Value& schema, const std::string& where,
                  std::vector<std::string>& problems) {
  for (const auto& m : *schema.as_object()) {
    static const std::vector<std::string> known = {"$schema",  "title",      "description",          "type",  "enum",
                                                   "required", "properties", "additionalProperties", "items", "oneOf"};
    if (std::find(known.begin(), known.end(), m.key) == known.end())
      problems.push_back(where + ": schema keyword " + m.key + " is not checked here");
  }
  if (const auto* alts = schema.find("oneOf")) {
    int matched = 0;
    for (const auto& alt : *alts->as_array()) {
      std::vector<std::string> p;
      check_schema(v, alt, where, p);
      matched += p.empty();
    }
    if (matched != 1) problems.push_back(fmt::format("{}: matches {} of oneOf's alternatives", where, matched));
    return;
  }
  if (const auto* t = schema.find("type")) {
    bool ok = false;
    if (t->as_string())
      ok = type_ok(v, *t->as_string());
    else
      for (const auto& n : *t->as_array()) ok = ok || type_ok(v, *n.as_string());
    if (!ok) {
      problems.push_back(where + ": wrong type (" + json::stringify(v).substr(0, 60) + ")");
      return;
    }
  }
  if (const auto* e = schema.find("enum")) {
    bool ok = false;
    for (const auto& x : *e->as_array()) ok = ok || x == v;
    if (!ok) problems.push_back(where + ": not one of the enum's values");
  }
  if (const auto* obj = v.as_object()) {
    if (const auto* req = schema.find("required"))
      for (const auto& k : *req->as_array())
        if (!v.find(*k.as_string())) problems.push_back(where + ": lacks " + *k.as_string());
    const auto* props = schema.find("properties");
    const auto* extra = schema.find("additionalProperties");
    for (const auto& m : *obj) {
      const json::Value* sub = props ? props->find(m.key) : nullptr;
      if (sub)
        check_schema(m.value, *sub, where + "." + m.key, problems);
      else if (extra && extra->as_bool() && !*extra->as_bool())
        problems.push_back(where + ": unexpected " + m.key);
    }
  }
  if (const auto* arr = v.as_array()) {
    if (const auto* items = schema.find("items"))
      for (size_t i = 0; i < arr->size(); ++i)
        check_schema((*arr)[i], *items, fmt::format("{}[{}]", where, i), problems);
  }
}

json::Value report_schema() {
  std::ifstream in(std::string(PJ_SOURCE_DIR) + "/man/pi-jail-report.schema.json");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return pj::test::parsed(text.str());
}

// render_report(c) parsed, and its problems against the schema (none:
// valid). Built in place: no json::Value is assigned (GCC 12 under ASan
// warns, falsely, on a moved-from variant).
struct Checked {
  json::Value doc;
  std::vector<std::string> problems;
};
Checked checked(const std::string& text) {
  Checked out{pj::test::parsed(text), {}};
  check_schema(out.doc, report_schema(), "report", out.problems);
  return out;
}
Checked checked(const Report::Content& c) { return checked(pj::supervisor::render_report(c)); }

Report::Content base_content() {
  Report::Content c;
  c.backend = "linux";
  c.command = {"pi", "--print", "hi"};
  c.started = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764547200123));
  c.ended = c.started + std::chrono::milliseconds(2500);
  return c;
}

std::int64_t integer(const json::Value* v) {
  REQUIRE(v);
  REQUIRE(v->as_number());
  return std::stoll(v->as_number()->text());
}

}  // namespace

TEST_CASE("the schema check used below refuses what the schema forbids") {
  Report::Content c = base_content();
  std::string text = pj::supervisor::render_report(c);
  REQUIRE(checked(text).problems.empty());
  REQUIRE(text.starts_with("{"));
  CHECK(checked("{\"surprise\": true, " + text.substr(1)).problems.size() == 1);
  CHECK(checked(R"({"schema": 1})").problems.size() > 3);
}

TEST_CASE("a report of a run that failed before planning is valid: setup_failed, 125, the failure, null jail") {
  Report::Content c = base_content();
  c.outcome.failure = "cannot read /etc/pi-jail/missing.toml: No such file or directory (ENOENT)";
  Checked r = checked(c);
  const json::Value& doc = r.doc;
  CHECK_MESSAGE(r.problems.empty(), fmt::format("{}", fmt::join(r.problems, "\n")));
  const json::Value* exit = doc.find("exit");
  REQUIRE(exit);
  CHECK(integer(exit->find("code")) == 125);
  CHECK(*exit->find("ending")->as_string() == "setup_failed");
  CHECK(exit->find("command_status")->is_null());
  CHECK(exit->find("signal")->is_null());
  CHECK(*exit->find("failure")->as_string() == c.outcome.failure);
  CHECK(doc.find("layers")->is_null());
  CHECK(doc.find("policy")->is_null());
  CHECK(*doc.find("network")->find("filter")->as_string() == "not started");
  CHECK(integer(doc.find("duration_ms")) == 2500);
  CHECK(*doc.find("started")->as_string() == "2025-12-01T00:00:00.123Z");
  CHECK(*doc.find("ended")->as_string() == "2025-12-01T00:00:02.623Z");
  CHECK(*doc.find("backend")->as_string() == "linux");
  CHECK(doc.find("command")->as_array()->size() == 3);
}

TEST_CASE("a report of a command killed by a signal after --timeout: 124, its status, the signal, no failure") {
  Report::Content c = base_content();
  c.backend = "macos-seatbelt";
  c.outcome = command_ended(128 + SIGKILL, true);
  c.network_filter = "proxy on the host's loopback";
  pj::netproxy::Decision d;
  d.time = d.last = c.started;
  d.protocol = pj::netproxy::Protocol::http_connect;
  d.host = "pypi.org";
  d.port = 443;
  d.reason = "no allow rule";
  d.count = 6;
  c.decisions.entries.push_back(d);
  c.decisions.unlisted.refused = 2;
  c.outcome.resources.limits.push_back({"memory", "512M", "--memory", "cgroup v2"});
  c.outcome.resources.cpu_ms = 1234;
  c.outcome.resources.cpu_from = "getrusage";
  pj::policy::Refusal refusal;
  refusal.request.file = "/w/.pi-jail.toml";
  refusal.request.line = 3;
  refusal.request.column = 10;
  refusal.what = "write ~/x";
  refusal.reason = "outside the write limit";
  c.refused.push_back(refusal);
  c.write_back = {"applied: settings.json"};
  Checked r = checked(c);
  const json::Value& doc = r.doc;
  CHECK_MESSAGE(r.problems.empty(), fmt::format("{}", fmt::join(r.problems, "\n")));
  const json::Value* exit = doc.find("exit");
  CHECK(integer(exit->find("code")) == 124);
  CHECK(*exit->find("ending")->as_string() == "timed_out");
  CHECK(integer(exit->find("command_status")) == 128 + SIGKILL);
  CHECK(integer(exit->find("signal")) == SIGKILL);
  CHECK(exit->find("failure")->is_null());
  const json::Value* decisions = doc.find("network")->find("decisions");
  REQUIRE(decisions->as_array()->size() == 1);
  CHECK(integer((*decisions->as_array())[0].find("count")) == 6);
  CHECK(integer(doc.find("network")->find("unlisted")->find("refused")) == 2);
  const json::Value* resources = doc.find("resources");
  CHECK(integer(resources->find("cpu_ms")) == 1234);
  CHECK(*resources->find("cpu_from")->as_string() == "getrusage");
  CHECK(resources->find("memory_peak_bytes")->is_null());
  CHECK(resources->find("memory_peak_from")->is_null());  // no source named for what was not measured
  CHECK(*(*doc.find("refused_requests")->as_array())[0].find("by")->as_string() == "project file");
  CHECK(doc.find("write_back")->as_array()->size() == 1);
}

TEST_CASE("a report of a command that could not be executed: its 127 is both codes, no signal even above 128") {
  Report::Content c = base_content();
  c.outcome.ending = RunOutcome::Ending::not_executed;
  c.outcome.exit_code = c.outcome.command_status = 127;
  c.outcome.failure = "exec: No such file or directory (ENOENT)";
  Checked r = checked(c);
  const json::Value& doc = r.doc;
  CHECK_MESSAGE(r.problems.empty(), fmt::format("{}", fmt::join(r.problems, "\n")));
  CHECK(*doc.find("exit")->find("ending")->as_string() == "not_executed");
  CHECK(integer(doc.find("exit")->find("code")) == 127);
  CHECK(doc.find("exit")->find("signal")->is_null());

  c.outcome.exit_code = c.outcome.command_status = 200;  // not a signal: nothing ran to be killed
  Checked r200 = checked(c);
  CHECK(r200.problems.empty());
  CHECK(r200.doc.find("exit")->find("signal")->is_null());
}

namespace {

// What `f` writes on stderr.
template <class F>
std::string stderr_of(F f) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp);
  int saved = ::dup(2);
  ::dup2(::fileno(tmp), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::rewind(tmp);
  std::string text;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) text.append(buf, n);
  std::fclose(tmp);
  return text;
}

}  // namespace

TEST_CASE("every set-up failure is worded the same way: nothing was run, the step, the fix when there is one") {
  RunOutcome out;
  std::string err = stderr_of([&] {
    out = pj::supervisor::setup_failed("create the jail's namespaces (clone): No space left on device (ENOSPC)",
                                       "raise user.max_user_namespaces");
  });
  CHECK(err ==
        "pi-jail: error: jail setup failed, nothing was run\n"
        "  step: create the jail's namespaces (clone): No space left on device (ENOSPC)\n"
        "  fix: raise user.max_user_namespaces\n");
  CHECK(out.exit_code == 125);
  CHECK(out.ending == RunOutcome::Ending::setup_failed);
  CHECK(out.command_status == -1);
  CHECK(out.failure == "create the jail's namespaces (clone): No space left on device (ENOSPC)");

  err = stderr_of([&] { out = pj::supervisor::setup_failed("--report: cannot open /x/r.json"); });
  CHECK(err == "pi-jail: error: jail setup failed, nothing was run\n  step: --report: cannot open /x/r.json\n");
  CHECK(out.exit_code == 125);

  err = stderr_of([] { pj::supervisor::say_setup_failed("start the network filter: EMFILE", "report a bug", true); });
  CHECK(err ==
        "pi-jail: error: jail setup failed, the jail was stopped\n  step: start the network filter: EMFILE\n"
        "  fix: report a bug\n");
}

TEST_CASE("an error that ends a run before the command ran gives its exit status and ending, and says nothing") {
  using pj::util::CommandExit;
  using pj::util::Error;
  RunOutcome out;
  std::string err = stderr_of([&] {
    out = pj::supervisor::ended_by(Error::invalid("pi: command not found on PATH").with_exit(CommandExit::not_found));
  });
  CHECK(err.empty());
  CHECK(out.exit_code == 127);
  CHECK(out.ending == RunOutcome::Ending::not_executed);
  CHECK(out.command_status == -1);
  CHECK(out.failure == "pi: command not found on PATH");

  out = pj::supervisor::ended_by(Error::from_errno("/w/pi", EACCES).with_exit(CommandExit::not_executable));
  CHECK(out.exit_code == 126);
  CHECK(out.ending == RunOutcome::Ending::not_executed);
  CHECK(out.failure == "/w/pi: Permission denied (EACCES)");

  out = pj::supervisor::ended_by(Error::stopped_by_signal("stopped by signal 15 during the warm-up", SIGTERM));
  CHECK(out.exit_code == 128 + SIGTERM);
  CHECK(out.ending == RunOutcome::Ending::setup_failed);

  out = pj::supervisor::ended_by(Error::invalid("refusing workspace /"));
  CHECK(out.exit_code == 125);
  CHECK(out.ending == RunOutcome::Ending::setup_failed);
}

TEST_CASE("a run's options are made from the command line's run part alone") {
  using std::chrono::milliseconds;
  pj::test::TempDir dir;
  pj::cli::RunInput asked;
  asked.timeout = seconds(90);
  asked.grace = seconds(2);
  asked.net_log = dir.path + "/net.jsonl";
#ifdef PJ_TEST_SWITCHES
  asked.test_net_timeouts = std::pair{milliseconds(100), milliseconds(200)};
  asked.test_resolve = {"example.org:443=127.0.0.1:8443"};
#endif
  auto opts = pj::supervisor::run_options(asked, {});
  REQUIRE(opts.ok());
  CHECK(opts->timeout == seconds(90));
  CHECK(opts->grace == seconds(2));
  CHECK(opts->net_log.valid());
  CHECK(::access(asked.net_log->c_str(), F_OK) == 0);
#ifdef PJ_TEST_SWITCHES
  CHECK(opts->proxy_limits.handshake == milliseconds(100));
  CHECK(opts->proxy_limits.idle == milliseconds(200));
  REQUIRE(opts->proxy_limits.test_resolve.size() == 1);
  CHECK(opts->proxy_limits.test_resolve[0].first == "example.org:443");
  CHECK(opts->proxy_limits.test_resolve[0].second.first.str() == "127.0.0.1");
  CHECK(opts->proxy_limits.test_resolve[0].second.second == 8443);
  asked.test_resolve = {"example.org:443"};
  auto refused = pj::supervisor::run_options(asked, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message() == "--test-resolve example.org:443: HOST:PORT=IP:PORT2 expected");
#endif
}
