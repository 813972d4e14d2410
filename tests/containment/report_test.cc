// --report: written for every ending, valid against the documented schema.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {}  // namespace

TEST_CASE("the report validates against the documented schema, for every way a run ends") {
  Sandbox sb;
  struct Case {
    std::vector<std::string> args;
    int status;
    const char* ending;
  } cases[] = {
      {{"--", "/bin/sh", "-c", "exit 3"}, 3, "\"ending\": \"exited\""},
      {{"--", "/bin/sh", "-c", "kill -TERM $$"}, 143, "\"signal\": 15"},
      {{"--timeout", "200ms", "--grace", "200ms", "--", "/bin/sleep", "30"}, 124, "\"ending\": \"timed_out\""},
      {{"--config", sb.base + "/missing.toml", "--", "/bin/true"}, 125, "\"ending\": \"setup_failed\""},
      {{"--", "no-such-program-" + unique_token()}, 127, "\"ending\": \"not_executed\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.ending);
    std::string report = sb.outside + "/report-" + unique_token() + ".json";
    std::vector<std::string> argv{pi_jail(), "-q", "-w", sb.ws, "--report", report};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto o = run(argv, {"HOME=" + sb.home});
    CHECK(o.status == c.status);
    std::string text = read_file(report);
    CHECK(text.find(c.ending) != std::string::npos);
    CHECK(text.find("\"code\": " + std::to_string(c.status)) != std::string::npos);
    auto v = validate_report(report);
    CHECK_MESSAGE(v.status == 0, v.out << v.err);
  }
}

TEST_CASE("the report names the layers, the view the run had and refused requests") {
  Sandbox sb;
  std::string report = sb.outside + "/r.json";
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", "[network]\nallow = [\"evil.example\"]\n");
  auto o = run({pi_jail(), "-q", "-w", sb.ws, "--report", report, "--", "/bin/true"}, {"HOME=" + sb.home});
  REQUIRE(o.status == 0);
  std::string text = read_file(report);
  CHECK(text.find("\"backend\": \"linux\"") != std::string::npos);  // which jail ran
  CHECK(text.find("\"enforced\": true") != std::string::npos);
  CHECK(text.find("\"terminal\": \"inherit\"") != std::string::npos);
  CHECK(text.find("\"path\": \"" + sb.ws + "\"") != std::string::npos);
  CHECK(text.find("\"why\": \"workspace\"") != std::string::npos);
  CHECK(text.find("\"what\": \"network evil.example\"") != std::string::npos);
  CHECK(text.find("\"reason\": \"outside the network limit\"") != std::string::npos);
  auto v = validate_report(report);
  CHECK_MESSAGE(v.status == 0, v.out << v.err);
}

TEST_CASE("an unwritable report path stops the run before anything runs") {
  Sandbox sb;
  std::string flag = sb.ws + "/ran";
  auto o = run({pi_jail(), "-w", sb.ws, "--report", sb.base + "/no/such/dir/r.json", "--", "/usr/bin/touch", flag},
               {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(o.err.starts_with("pi-jail: error: jail setup failed, nothing was run\n  step: --report"));  // the one wording
  CHECK_FALSE(exists(flag));
}

TEST_CASE("a host name the jail sends reaches the terminal escaped and the report and log as valid JSON") {
  Sandbox sb;
  std::string report = sb.outside + "/r.json";
  std::string log = sb.outside + "/net.jsonl";
  // "ev\x1b[2J\r\nil" + 0x9b (8-bit CSI) + 0xff + a cut-short "\xe2\x82" + ".example"
  std::string hex =
      "6576"
      "1b5b324a"
      "0d0a"
      "696c"
      "9b"
      "ff"
      "e282"
      "2e6578616d706c65";
  // Not Sandbox::jail: that passes -q, which hides the end-of-run warning.
  auto o = run({pi_jail(), "-w", sb.ws, "--allow-read", probe_dir(), "--report", report, "--net-log", log, "--",
                probe(), "socks5", hex, "443"},
               {"HOME=" + sb.home});
  CHECK(o.status == 0);
  CHECK(trim(o.out) == "reply 2");  // not allowed
  CAPTURE(o.err);
  CHECK(o.err.find("the network filter refused 1 connection") != std::string::npos);
  for (char raw : {'\x1b', '\r', '\x9b', '\xff', '\xe2'}) {
    CAPTURE(static_cast<int>(static_cast<unsigned char>(raw)));
    CHECK(o.err.find(raw) == std::string::npos);
  }
  CHECK(o.err.find("ev\\x1b[2J\\r\\nil\\x9b\\xff\\xe2\\x82.example:443") != std::string::npos);
  auto schema = validate_report(report);
  CHECK_MESSAGE(schema.status == 0, schema.out << schema.err);
  CHECK(read_file(report).find("ev\\u001b[2J\\r\\nil\\ufffd\\ufffd\\ufffd\\ufffd.example") != std::string::npos);
  // Every line of the log parses, read as strict UTF-8.
  auto lines = run({"/usr/bin/python3", "-c",
                    "import json, sys\n"
                    "text = open(sys.argv[1], 'rb').read().decode('utf-8')\n"
                    "rows = [json.loads(l) for l in text.splitlines()]\n"
                    "print(sum(1 for r in rows if not r['allowed']))\n",
                    log});
  CHECK_MESSAGE(lines.status == 0, lines.err);
  CHECK(trim(lines.out) == "1");
}

// What lies at --report or --net-log is checked before anything runs:
// only a regular file (or nothing) is written to; the rest is refused
// with 125 at once, never waited on (run() kills a hang after 60 s).
TEST_CASE("a FIFO or device or symlink at the report or network log path stops the run at once") {
  Sandbox sb;
  std::string fifo = sb.outside + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  std::string target = sb.outside + "/target";
  write_file(target, "precious\n");
  std::string link = sb.outside + "/link.json";
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  std::string dangling = sb.outside + "/dangling.json";
  REQUIRE(::symlink((sb.outside + "/created-through-link").c_str(), dangling.c_str()) == 0);
  struct Case {
    std::string option, path, problem;
  } cases[] = {
      {"--report", fifo, "is a FIFO"},          {"--net-log", fifo, "is a FIFO"},
      {"--report", "/dev/null", "is a device"}, {"--net-log", "/dev/null", "is a device"},
      {"--report", link, "is a symlink"},       {"--net-log", link, "is a symlink"},
      {"--report", dangling, "is a symlink"},   {"--report", sb.outside, "is a directory"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.option);
    CAPTURE(c.path);
    std::string flag = sb.ws + "/ran";
    std::filesystem::remove(flag);
    auto started = std::chrono::steady_clock::now();
    auto o = run({pi_jail(), "-w", sb.ws, c.option, c.path, "--", "/usr/bin/touch", flag}, {"HOME=" + sb.home});
    auto took = std::chrono::steady_clock::now() - started;
    CAPTURE(o.err);
    CHECK(o.status == 125);
    CHECK(took < std::chrono::seconds(30));  // a guard, not a timing assertion: a hang is 60 s
    CHECK(o.err.find(c.path + " " + c.problem) != std::string::npos);
    CHECK(o.err.find("nothing was run") != std::string::npos);
    CHECK_FALSE(exists(flag));
  }
  CHECK(read_file(target) == "precious\n");
  CHECK_FALSE(exists(sb.outside + "/created-through-link"));
}

TEST_CASE("a new report is private to its owner (0600, like the network log): it names hosts and paths") {
  Sandbox sb;
  std::string report = sb.outside + "/private-report.json";
  ::umask(022);
  auto o = run({pi_jail(), "-q", "-w", sb.ws, "--report", report, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(o.status == 0);
  struct stat st;
  REQUIRE(::stat(report.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}
