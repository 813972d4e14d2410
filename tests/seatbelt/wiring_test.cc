// The Seatbelt backend's wiring, on Linux: pi-jail-seatbelt (the macOS
// supervisor, built here) runs commands, and its network filter process,
// through a stand-in for sandbox-exec (pj-fake-sandbox-exec) that
// ENFORCES NOTHING. These tests show what the supervisor hands to
// sandbox-exec and how it supervises the command (exit codes, signals,
// terminal, TMPDIR, the network filter's process, leftovers, report).
// They prove no containment: only a Mac can.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "harness.h"
#include "job_control.h"
#include "seatbelt/filter_profile.h"
#include "seatbelt/plan.h"

using namespace pj::test;

namespace {

std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run through tests/run)");
  return v;
}

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) throw std::runtime_error("realpath " + path);
  return buf;
}

// One test's layout (Sandbox: base/{ws,home,outside}) and its stand-in:
// base/sandbox-exec, a wrapper that records into base/record.
struct Wiring {
  Sandbox box;
  std::string record = box.base + "/record";
  std::string standin = box.base + "/sandbox-exec";

  Wiring() {
    write_file(standin, "#!/bin/sh\nexec '" + env_or_die("PJ_FAKE_SANDBOX_EXEC") + "' '" + record + "' \"$@\"\n");
    ::chmod(standin.c_str(), 0755);
  }

  // pi-jail-seatbelt [opts...] -- args..., from the workspace, HOME=home.
  std::vector<std::string> argv(const std::vector<std::string>& args, const std::vector<std::string>& opts = {},
                                const std::string& ws = "") const {
    std::vector<std::string> v{"/usr/bin/env", "-C", ws.empty() ? box.ws : ws,
                               pi_jail(),      "-q", "--unsafe-test-sandbox-exec",
                               standin,        "-w", ws.empty() ? box.ws : ws};
    v.insert(v.end(), opts.begin(), opts.end());
    v.push_back("--");
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }
  Outcome jail(const std::vector<std::string>& args, const std::vector<std::string>& opts = {},
               const std::string& ws = "") const {
    return run(argv(args, opts, ws), {"HOME=" + box.home});
  }
  Outcome sh(const std::string& script, const std::vector<std::string>& opts = {}) const {
    return jail({"/bin/sh", "-c", script}, opts);
  }

  // What sandbox-exec was given for the command, argument by argument
  // (for the network filter: record + ".filter"; the environments:
  // + ".env").
  std::vector<std::string> recorded() const { return split_record(record); }
  static std::vector<std::string> split_record(const std::string& file) {
    std::string all = read_file(file);
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == '\0') {
        out.push_back(all.substr(start, i - start));
        start = i + 1;
      }
    return out;
  }
  std::string profile() const {
    auto r = recorded();
    REQUIRE(r.size() >= 2);
    REQUIRE(r[0] == "-p");
    return r[1];
  }
  std::multimap<std::string, std::string> params() const {
    std::multimap<std::string, std::string> out;
    auto r = recorded();
    for (size_t i = 0; i + 1 < r.size() && r[i] != "--"; ++i)
      if (r[i] == "-D") {
        auto eq = r[i + 1].find('=');
        out.emplace(r[i + 1].substr(0, eq), r[i + 1].substr(eq + 1));
      }
    return out;
  }
  std::vector<std::string> command() const {
    auto r = recorded();
    for (size_t i = 0; i < r.size(); ++i)
      if (r[i] == "--") return {r.begin() + static_cast<long>(i) + 1, r.end()};
    return {};
  }
  bool has_param(const std::string& name, const std::string& value) const {
    auto all = params();
    auto [a, b] = all.equal_range(name);
    for (auto it = a; it != b; ++it)
      if (it->second == value) return true;
    return false;
  }
  bool any_param_value(const std::string& value) const {
    for (const auto& [n, v] : params())
      if (v == value) return true;
    return false;
  }
};

// The validator's complaint about `report`, or "" when it validates.
std::string report_problems(const std::string& report) {
  auto o = pj::test::validate_report(report);
  return o.status == 0 ? "" : o.out + o.err;
}

bool process_gone(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

}  // namespace

TEST_CASE("the command runs under sandbox-exec with the planned profile and every parameter it names") {
  Wiring w;
  auto o = w.jail({"/bin/echo", "ran"});
  INFO(o.err);
  REQUIRE(o.status == 0);  // the stand-in refuses (65) a malformed profile or a missing parameter
  CHECK(o.out == "ran\n");
  std::string profile = w.profile();
  CHECK(profile.starts_with(std::string(pj::seatbelt::base_profile())));
  CHECK(profile.find("(deny default)") != std::string::npos);
  CHECK(w.has_param("ROOT_0", real(w.box.ws)));
  CHECK(w.command() == std::vector<std::string>{real("/bin/echo"), "ran"});
  // No path is text of the profile: each is a parameter.
  CHECK(profile.find(w.box.base) == std::string::npos);
  // The private TMPDIR and the network filter's ports are parameters too.
  bool tmp = false;
  for (const auto& [n, v] : w.params()) tmp = tmp || v.find("/pi-jail.") != std::string::npos;
  CHECK(tmp);
  CHECK(w.params().count("PROXY_HTTP") == 1);
  CHECK(w.params().count("PROXY_SOCKS") == 1);
  CHECK(w.params().find("PROXY_HTTP")->second.starts_with("localhost:"));
}

TEST_CASE("a workspace named with quotes, parentheses and newlines reaches sandbox-exec as one parameter") {
  Wiring w;
  std::string odd = w.box.base + "/we\"ird (allow default)\n(deny x) ;ws";
  std::filesystem::create_directories(odd);
  auto o = w.jail({"/bin/true"}, {}, odd);
  INFO(o.err);
  REQUIRE(o.status == 0);
  CHECK(w.has_param("ROOT_0", real(odd)));
  std::string profile = w.profile();
  CHECK(profile.find("we\"ird") == std::string::npos);
  CHECK(profile.find("(allow default)") == std::string::npos);
}

TEST_CASE("exit statuses: the command's code, 128+N for a signal, 124 on timeout, 127 for a missing command") {
  Wiring w;
  CHECK(w.sh("exit 7").status == 7);
  CHECK(w.sh("kill -TERM $$").status == 128 + SIGTERM);
  auto t = w.jail({"/bin/sleep", "30"}, {"--timeout", "1", "--grace", "1"});
  CHECK(t.status == 124);
  std::filesystem::remove(w.record);
  auto missing = w.jail({"no-such-command-" + unique_token()});
  CHECK(missing.status == 127);
  CHECK_FALSE(exists(w.record));  // nothing was launched
}

TEST_CASE("a stand-in that cannot be run stops the run with 125, naming the step and the errno") {
  Wiring w;
  std::vector<std::string> args = w.argv({"/bin/true"});
  for (auto& a : args)
    if (a == w.standin) a = w.box.base + "/no-such-sandbox-exec";
  auto o = run(args, {"HOME=" + w.box.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("Seatbelt launcher") != std::string::npos);
  CHECK(o.err.find("ENOENT") != std::string::npos);
}

TEST_CASE("a resource limit the Seatbelt jail cannot enforce stops the run with 125 before anything runs") {
  Wiring w;
  for (const auto& limit : {std::vector<std::string>{"--memory", "64M"}, {"--cpus", "1"}, {"--pids", "64"}}) {
    CAPTURE(limit[0]);
    auto o = w.jail({"/bin/true"}, limit);
    CHECK(o.status == 125);
    CHECK(o.err.find("cannot be enforced by the macOS Seatbelt jail; fix: remove it, or run on Linux") !=
          std::string::npos);
    CHECK(o.err.find("(" + limit[0] + ")") != std::string::npos);
    CHECK_FALSE(exists(w.record));  // nothing was launched
  }
  CHECK(w.jail({"/bin/true"}).status == 0);  // the default process limit is not applied there
}

TEST_CASE("a socket grant or a published port stops the run with 125 on macOS, saying so; nothing is launched") {
  Wiring w;
  auto publish = run(w.argv({"/bin/true"}, {"--publish", "3000"}), {"HOME=" + w.box.home});
  CHECK(publish.status == 125);
  CHECK(publish.err.find("publish 127.0.0.1:3000:3000 (--publish): published ports are not supported on macOS") !=
        std::string::npos);
  std::string config = w.box.base + "/operator.toml";
  write_file(config, "[filesystem]\nsockets = [\"" + w.box.outside + "/agent.sock\"]\n");
  auto socket = run(w.argv({"/bin/true"}, {"--config", config}), {"HOME=" + w.box.home});
  CHECK(socket.status == 125);
  CHECK(socket.err.find("socket grants are not supported on macOS") != std::string::npos);
  CHECK_FALSE(exists(w.record));
}

TEST_CASE("a TMPDIR where the run's private directory cannot be made stops the run with 125") {
  Wiring w;
  auto o = run(w.argv({"/bin/true"}), {"HOME=" + w.box.home, "TMPDIR=" + w.box.base + "/no-such-dir"});
  CHECK(o.status == 125);
  CHECK(o.err.find("step: make the run's private TMPDIR " + w.box.base + "/no-such-dir/pi-jail.XXXXXX") !=
        std::string::npos);
  CHECK(o.err.find("ENOENT") != std::string::npos);
  CHECK(o.err.find("fix: ") != std::string::npos);
  CHECK_FALSE(exists(w.record));
}

TEST_CASE("a profile that sandbox-exec refuses is not run around: the command never starts") {
  // The stand-in refuses what sandbox-exec would: here, a parameter the
  // profile names but was not given (the wrapper drops every -D of the
  // command's; the network filter's go through).
  Wiring w;
  write_file(w.standin,
             "#!/bin/bash\nargs=() skip=0\nfor a in \"$@\"; do\n"
             "  if [ $skip = 1 ]; then skip=0; continue; fi\n"
             "  if [ \"$a\" = -D ] && [ \"${@: -1}\" != --network-filter ]; then skip=1; continue; fi\n"
             "  args+=(\"$a\")\ndone\n"
             "exec '" +
                 env_or_die("PJ_FAKE_SANDBOX_EXEC") + "' '" + w.record + "' \"${args[@]}\"\n");
  auto o = w.sh("echo SHOULD-NOT-RUN");
  CHECK(o.status == 65);
  CHECK(o.out.find("SHOULD-NOT-RUN") == std::string::npos);
  CHECK(o.err.find("is not a parameter of this profile") != std::string::npos);
}

TEST_CASE("a network filter profile that sandbox-exec refuses stops the run with 125 before the command starts") {
  Wiring w;
  std::string ran = w.box.ws + "/ran";
  write_file(w.standin,
             "#!/bin/bash\nargs=() skip=0\nfor a in \"$@\"; do\n"
             "  if [ $skip = 1 ]; then skip=0; continue; fi\n"
             "  if [ \"$a\" = -D ] && [ \"${@: -1}\" = --network-filter ]; then skip=1; continue; fi\n"
             "  args+=(\"$a\")\ndone\n"
             "exec '" +
                 env_or_die("PJ_FAKE_SANDBOX_EXEC") + "' '" + w.record + "' \"${args[@]}\"\n");
  auto o = w.jail({"/usr/bin/touch", ran});
  CHECK(o.status == 125);
  CHECK(o.err.find("step: start the network filter: start the network filter process: ") != std::string::npos);
  CHECK(o.err.find("the network filter process exited with status 65") != std::string::npos);
  CHECK(exists(w.record + ".filter"));  // it was tried
  CHECK_FALSE(exists(w.record));        // the command never was
  CHECK_FALSE(exists(ran));
}

TEST_CASE("the command gets a private TMPDIR (0700), removed at the end, and the network filter's variables") {
  Wiring w;
  auto o = w.sh(
      "echo \"$TMPDIR\"; stat -c %a \"$TMPDIR\"; echo x > \"$TMPDIR/f\"; mkdir \"$TMPDIR/d\"; "
      "ln -s / \"$TMPDIR/d/root\"; echo \"$HTTPS_PROXY\"; echo \"$ALL_PROXY\"; echo \"$PI_JAIL\"");
  INFO(o.err);
  REQUIRE(o.status == 0);
  std::vector<std::string> lines;
  for (size_t s = 0, e; (e = o.out.find('\n', s)) != std::string::npos; s = e + 1)
    lines.push_back(o.out.substr(s, e - s));
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].find("/pi-jail.") != std::string::npos);
  CHECK(lines[1] == "700");
  CHECK_FALSE(exists(lines[0]));  // removed, without following the symlink to /
  CHECK(exists("/etc/passwd"));
  CHECK(w.has_param("ROOT_1", lines[0]));
  auto http = w.params().find("PROXY_HTTP")->second;
  auto socks = w.params().find("PROXY_SOCKS")->second;
  CHECK(lines[2] == "http://127.0.0.1:" + http.substr(http.find(':') + 1));
  CHECK(lines[3] == "socks5h://127.0.0.1:" + socks.substr(socks.find(':') + 1));
  CHECK(lines[4] == "1");
}

TEST_CASE("the network filter listens on the host's loopback and refuses what the policy does not allow") {
  Wiring w;
  std::string report = w.box.base + "/report.json";
  auto o = w.jail({"/bin/bash", "-c",
                   "p=${HTTP_PROXY##*:}; exec 3<>/dev/tcp/127.0.0.1/$p || exit 9; "
                   "printf 'CONNECT blocked.example:443 HTTP/1.1\\r\\nHost: blocked.example:443\\r\\n\\r\\n' >&3; "
                   "head -n 1 <&3"},
                  {"--report", report});
  INFO(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out.starts_with("HTTP/1.1 403"));
  std::string r = read_file(report);
  CHECK(report_problems(report) == "");
  CHECK(r.find("\"backend\": \"macos-seatbelt\"") != std::string::npos);
  CHECK(r.find("\"host\": \"blocked.example\"") != std::string::npos);
  CHECK(r.find("\"allowed\": false") != std::string::npos);
  CHECK(r.find("\"sandbox\": \"seatbelt\"") != std::string::npos);
}

namespace {

// A stand-in reached through a symlink: the fake records into
// STAND-IN.record (and .filter, .env) and nothing comes between
// pi-jail-seatbelt and it to add to the environment (a wrapper script's
// shell would add PWD).
struct LinkedStandIn {
  std::string path;
  explicit LinkedStandIn(const Wiring& w) : path(w.box.base + "/sandbox-exec-link") {
    REQUIRE(::symlink(env_or_die("PJ_FAKE_SANDBOX_EXEC").c_str(), path.c_str()) == 0);
  }
  std::vector<std::string> argv(const Wiring& w, const std::vector<std::string>& args,
                                const std::vector<std::string>& opts = {}) const {
    auto v = w.argv(args, opts);
    for (auto& a : v)
      if (a == w.standin) a = path;
    return v;
  }
  std::vector<std::string> filter_args() const { return Wiring::split_record(path + ".record.filter"); }
  std::vector<std::string> filter_env() const { return Wiring::split_record(path + ".record.filter.env"); }
  std::vector<std::string> command_args() const { return Wiring::split_record(path + ".record"); }
};

std::multimap<std::string, std::string> params_in(const std::vector<std::string>& r) {
  std::multimap<std::string, std::string> out;
  for (size_t i = 0; i + 1 < r.size() && r[i] != "--"; ++i)
    if (r[i] == "-D") {
      auto eq = r[i + 1].find('=');
      out.emplace(r[i + 1].substr(0, eq), r[i + 1].substr(eq + 1));
    }
  return out;
}

}  // namespace

TEST_CASE("the network filter runs as pi-jail exec'd afresh under sandbox-exec, with its own profile, no environment") {
  Wiring w;
  LinkedStandIn s(w);
  auto o = run(s.argv(w, {"/bin/true"}, {"--allow-net", "127.0.0.1:5432"}), {"HOME=" + w.box.home});
  INFO(o.err);
  REQUIRE(o.status == 0);
  auto f = s.filter_args();
  REQUIRE(f.size() >= 3);
  REQUIRE(f[0] == "-p");
  const std::string& profile = f[1];
  // Its own profile: not the command's, denying by default, granting no
  // process, no write, no lookup of a Mach service.
  CHECK(profile.starts_with(std::string(pj::seatbelt::filter_base_profile())));
  CHECK(profile != s.command_args().at(1));
  CHECK(profile.find("(deny default)") != std::string::npos);
  for (const char* never : {"(allow process-fork", "file-write", "(allow mach-lookup", "(allow default"}) {
    CAPTURE(never);
    CHECK(profile.find(never) == std::string::npos);
  }
  CHECK(profile.find(w.box.base) == std::string::npos);  // paths are parameters
  // Its command: this executable and the filter's argument, nothing else.
  const std::string exe = real(pi_jail());
  CHECK(std::vector<std::string>(f.end() - 3, f.end()) == std::vector<std::string>{"--", exe, "--network-filter"});
  auto params = params_in(f);
  CHECK(params.find("FILTER_EXE")->second == exe);
  // It serves the ports the command's profile lets the command reach.
  auto command = params_in(s.command_args());
  CHECK(params.find("PROXY_HTTP")->second == command.find("PROXY_HTTP")->second);
  CHECK(params.find("PROXY_SOCKS")->second == command.find("PROXY_SOCKS")->second);
  // It connects out on the rules' ports: the pi profile's hosts (443, 80)
  // and the one allowed here.
  std::set<std::string> outbound;
  for (const auto& [n, v] : params)
    if (n.starts_with("OUTBOUND_")) outbound.insert(v);
  CHECK(outbound.count("*:5432") == 1);
  CHECK(outbound.count("*:443") == 1);
  // What the loader maps for it, each by its real path (here, glibc's).
  bool libc = false;
  for (const auto& [n, v] : params)
    libc = libc || (n.starts_with("LIBRARY_") && v.find("/libc.so") != std::string::npos);
  CHECK(libc);
  // Exec'd with an empty environment (the command's has the jail's).
  CHECK(s.filter_env().empty());
  CHECK_FALSE(Wiring::split_record(s.path + ".record.env").empty());
}

TEST_CASE("killing the network filter's process stops the command and ends the run with 125; auth.json is intact") {
  Wiring w;
  LinkedStandIn s(w);
  std::string survived = w.box.ws + "/survived";
  const std::string agent = w.box.home + "/.pi/agent", auth = "{\"note\": \"left as it was\"}\n";
  std::filesystem::create_directories(agent);
  write_file(agent + "/auth.json", auth);
  // The command finds the filter (the supervisor's child running
  // --network-filter), shows its environment's size, and kills it.
  auto o = run(s.argv(w, {"/bin/bash", "-c",
                          "sup=$(awk '{print $4}' /proc/$PPID/stat); f=; "
                          "for p in /proc/[0-9]*; do "
                          "  [ \"$(awk '{print $4}' $p/stat 2>/dev/null)\" = \"$sup\" ] || continue; "
                          "  [ \"$(tr '\\0' '\\n' < $p/cmdline 2>/dev/null | tail -n 1)\" = --network-filter ] && "
                          "f=${p#/proc/}; "
                          "done; "
                          "echo \"filter=$f supervisor=$sup environ=$(wc -c < /proc/$f/environ)\"; "
                          "kill -KILL \"$f\"; sleep 30; touch '" +
                              survived + "'"}),
               {"HOME=" + w.box.home});
  INFO(o.out);
  INFO(o.err);
  CHECK(o.status == 125);
  CHECK(o.out.find("filter=") != std::string::npos);
  CHECK(o.out.find("filter= ") == std::string::npos);  // found: a process of its own
  CHECK(o.out.find("environ=0") != std::string::npos);
  CHECK(o.err.find("the network filter process was killed by signal 9 (KILL); the command was stopped") !=
        std::string::npos);
  CHECK_FALSE(exists(survived));
  CHECK(read_file(agent + "/auth.json") == auth);
}

TEST_CASE("a network filter that aborts, asks what it may not, or stops reading ends the run with 125") {
  Wiring w;
  // It aborts on the first name it must have resolved.
  auto aborted =
      w.jail({"/bin/bash", "-c",
              "p=${HTTP_PROXY##*:}; exec 3<>/dev/tcp/127.0.0.1/$p || exit 9; "
              "printf 'CONNECT aborts.example.test:443 HTTP/1.1\\r\\nHost: aborts.example.test:443\\r\\n\\r\\n'"
              " >&3; head -n 1 <&3; sleep 30; echo ran-on"},
             {"--allow-net", "aborts.example.test:443", "--test-filter-misbehave", "abort"});
  CHECK(aborted.status == 125);
  CHECK(aborted.err.find("the network filter process was killed by signal 6 (ABRT); the command was stopped") !=
        std::string::npos);
  CHECK(aborted.out.find("ran-on") == std::string::npos);
  for (const auto& m : {std::pair{"jail-socket", "the network filter process asked for a socket in the jail"},
                        std::pair{"stop-reading", "the network filter process did not read its control socket"}}) {
    CAPTURE(m.first);
    auto o = w.sh("sleep 30; echo ran-on", {"--test-filter-misbehave", m.first});
    CAPTURE(o.err);
    CHECK(o.status == 125);
    CHECK(o.err.find(m.second) != std::string::npos);
    CHECK(o.out.find("ran-on") == std::string::npos);
  }
}

TEST_CASE("$PI_JAIL_REFUSALS names a read-only file at its host path, listing each refusal with its fix") {
  Wiring w;
  auto o = w.jail({"/bin/bash", "-c",
                   "p=${HTTP_PROXY##*:}; exec 3<>/dev/tcp/127.0.0.1/$p || exit 9; "
                   "printf 'CONNECT blocked.example:443 HTTP/1.1\\r\\nHost: blocked.example:443\\r\\n\\r\\n' >&3; "
                   "head -n 1 <&3 >/dev/null; "
                   "for i in $(seq 100); do grep -q blocked.example \"$PI_JAIL_REFUSALS\" && break; sleep 0.05; done; "
                   "echo \"$PI_JAIL_REFUSALS\"; cat \"$PI_JAIL_REFUSALS\""});
  INFO(o.err);
  REQUIRE(o.status == 0);
  const std::string file = o.out.substr(0, o.out.find('\n'));
  CHECK(file.ends_with("/refusals"));
  CHECK(file.starts_with(w.box.home + "/"));  // pi-jail's state directory, under HOME here
  CHECK(o.out.find("blocked.example:443") != std::string::npos);
  CHECK(o.out.find("--allow-net blocked.example:443") != std::string::npos);
  // Read-only in the profile's parameters, as the jail sees it: its own path.
  const std::string dir = file.substr(0, file.rfind('/'));
  CHECK(w.any_param_value(dir));
  CHECK_FALSE(exists(dir));  // removed with the run
}

TEST_CASE("a host-loopback service the policy names is a parameter of its own") {
  Wiring w;
  auto o = w.jail({"/bin/true"}, {"--allow-net", "127.0.0.1:5432"});
  INFO(o.err);
  REQUIRE(o.status == 0);
  CHECK(w.has_param("FORWARD_0", "localhost:5432"));
}

TEST_CASE("a pi profile run may listen on its login callback ports, each a parameter; another profile's nowhere") {
  Wiring w;
  auto o = w.jail({"/bin/true"});
  INFO(o.err);
  REQUIRE(o.status == 0);
  // runtime::Request::login_callbacks, as the pi profile's adapter names them.
  CHECK(w.has_param("LOGIN_CALLBACK_0", "localhost:53692"));
  CHECK(w.has_param("LOGIN_CALLBACK_1", "localhost:1455"));
  CHECK(w.has_param("LOGIN_CALLBACK_2", "localhost:1456"));
  CHECK(w.params().count("LOGIN_CALLBACK_3") == 0);
  CHECK(w.profile().find("(allow network-bind network-inbound\n  (local tcp (param \"LOGIN_CALLBACK_0\"))\n"
                         "  (local tcp (param \"LOGIN_CALLBACK_1\"))\n  (local tcp (param \"LOGIN_CALLBACK_2\")))") !=
        std::string::npos);

  auto other = w.jail({"/bin/true"}, {"--profile", "builtin"});
  INFO(other.err);
  REQUIRE(other.status == 0);
  for (const auto& param : w.params()) CHECK_FALSE(param.first.starts_with("LOGIN_CALLBACK"));
  CHECK(w.profile().find("network-bind") == std::string::npos);
  CHECK(w.profile().find("network-inbound") == std::string::npos);

  // explain says so, with what differs from Linux.
  auto v = run({"/usr/bin/env", "-C", w.box.ws, pi_jail(), "explain", "-v", "-w", w.box.ws}, {"HOME=" + w.box.home});
  CHECK(v.status == 0);
  CHECK(v.out.find("login-callback  host localhost:1455 (127.0.0.1, ::1): the jail may listen there itself, all run "
                   "long: OpenAI") != std::string::npos);
  CHECK(v.out.find("LOGIN_CALLBACK_0 = localhost:53692") != std::string::npos);
  CHECK(v.out.find("listening: on localhost (127.0.0.1 and ::1) at the login callback ports only") !=
        std::string::npos);
}

TEST_CASE("what the command leaves in its process group is killed when it ends") {
  Wiring w;
  std::string pidfile = w.box.ws + "/pid";
  auto o = w.sh("sleep 300 & echo $! > '" + pidfile + "'; exit 0");
  REQUIRE(o.status == 0);
  pid_t pid = std::stoi(read_file(pidfile));
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // a guard while init reaps, not a timing assertion
    gone = process_gone(pid);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(gone);
  if (!gone) ::kill(pid, SIGKILL);
}

TEST_CASE("a termination signal to pi-jail reaches the command, which may exit on its own terms") {
  Wiring w;
  std::string ready = w.box.ws + "/ready";
  pid_t pid = spawn(w.argv({"/bin/sh", "-c", "trap 'exit 3' TERM; touch '" + ready + "'; while :; do sleep 0.1; done"}),
                    {"HOME=" + w.box.home});
  for (int i = 0; i < 200 && !exists(ready); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(exists(ready));
  ::kill(pid, SIGTERM);
  CHECK(wait_status(pid) == 3);
}

TEST_CASE("a command that stops itself with no terminal stops neither pi-jail nor --timeout") {
  Wiring w;
  std::string report = w.box.base + "/report.json";
  // The command handles TERM: only SIGCONT after the TERM lets the handler
  // run (exit 3); otherwise the KILL after the 30 s grace ends it.
  auto o =
      w.sh("trap 'exit 3' TERM; kill -STOP $$; echo after", {"--timeout", "2", "--grace", "30", "--report", report});
  INFO(o.err);
  CHECK(o.status == 124);
  CHECK(o.out.empty());
  CHECK(read_file(report).find("\"command_status\": 3") != std::string::npos);
}

TEST_CASE("on a terminal the command gets a PTY as its controlling terminal, named in the profile") {
  Wiring w;
  std::string out = w.box.ws + "/tty";
  std::string cmd;
  for (const auto& a : w.argv({"/bin/sh", "-c", "tty > '" + out + "'; test -t 0 && test -t 1 && echo PTY-OK; sleep 1"}))
    cmd += "'" + a + "' ";
  Tmux t("HOME='" + w.box.home + "' " + cmd + "; echo EXIT=$?; sleep 30");
  CHECK(t.wait_for("EXIT=0"));
  CHECK(t.screen().find("PTY-OK") != std::string::npos);
  std::string tty = trim(read_file(out));
  CHECK(tty.starts_with("/dev/pts/"));
  CHECK(w.has_param("TTY", tty));
}

TEST_CASE("with only stderr on a terminal the command gets a PTY there, never the real terminal") {
  Wiring w;
  std::string inner = w.box.ws + "/inner", outer = w.box.ws + "/outer";
  std::string cmd;
  for (const auto& a : w.argv({"/bin/sh", "-c", "readlink /proc/self/fd/2 > " + inner + "; stty -echo <&2"}))
    cmd += "'" + a + "' ";
  Tmux t("export HOME='" + w.box.home + "'; tty > " + outer + "; " + cmd + "</dev/null >/dev/null; echo EXIT=$?; " +
         "echo ECHO-STATE=$(stty -a | tr ' ' '\\n' | grep -x -e echo -e -echo); sleep 30");
  REQUIRE_MESSAGE(t.wait_for("EXIT=0"), t.screen());
  std::string tty = trim(read_file(inner));
  CHECK(tty.starts_with("/dev/pts/"));
  CHECK(tty != trim(read_file(outer)));
  CHECK(w.has_param("TTY", tty));
  CHECK_MESSAGE(t.wait_for("ECHO-STATE=echo"), t.screen());  // the outer terminal still echoes
}

TEST_CASE("explain names the backend and shows the parameters; doctor says no Seatbelt here") {
  Wiring w;
  auto j =
      run({"/usr/bin/env", "-C", w.box.ws, pi_jail(), "explain", "--json", "-w", w.box.ws}, {"HOME=" + w.box.home});
  CHECK(j.status == 0);
  CHECK(j.out.find("\"backend\": \"macos-seatbelt\"") != std::string::npos);
  auto v = run({"/usr/bin/env", "-C", w.box.ws, pi_jail(), "explain", "-v", "-w", w.box.ws}, {"HOME=" + w.box.home});
  CHECK(v.status == 0);
  CHECK(v.out.find("ROOT_0       = " + real(w.box.ws)) != std::string::npos);
  CHECK(v.out.find("(deny file-read* file-write*") != std::string::npos);  // the masks' rule
  auto d = run({pi_jail(), "doctor", "--unsafe-test-sandbox-exec", w.standin});
  CHECK(d.status == 1);
  CHECK(d.out.find("Seatbelt exists only on macOS") != std::string::npos);
  CHECK(d.out.find("ok       the base profile") != std::string::npos);  // the stand-in took it
}

TEST_CASE("Linux-only switches are refused, not ignored") {
  Wiring w;
  for (std::vector<std::string> sw : {std::vector<std::string>{"--unsafe-test-no-seccomp"},
                                      std::vector<std::string>{"--test-token-endpoint", "anthropic@127.0.0.1:1/t"}}) {
    CAPTURE(sw[0]);
    auto o = w.jail({"/bin/true"}, sw);
    CHECK(o.status == 125);
    CHECK(o.err.find("Linux backend switch") != std::string::npos);
    CHECK_FALSE(exists(w.record));
  }
}

TEST_CASE("if the network filter cannot start, sandbox-exec is never run: 125, naming the step") {
  Wiring w;
  std::string ran = w.box.ws + "/ran";
  auto o = w.jail({"/usr/bin/touch", ran}, {"--test-fail-network-filter"});
  CHECK(o.status == 125);
  CHECK(o.err.find("step: start the network filter: failing on purpose") != std::string::npos);
  CHECK_FALSE(exists(w.record));
  CHECK_FALSE(exists(ran));
}

TEST_CASE("after the run, what the command left in the repository for git to run is listed and reported") {
  Wiring w;
  std::string report = w.box.base + "/report.json";
  auto o =
      w.jail({"/bin/sh", "-c", "git init -q . && echo id > .git/hooks/post-merge && chmod +x .git/hooks/post-merge"},
             {"--report", report});
  INFO(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.err.find("Review them before running git") != std::string::npos);  // with -q too
  CHECK(o.err.find(".git/hooks/post-merge: a hook, new") != std::string::npos);
  CHECK(read_file(report).find("\"path\": \".git/hooks/post-merge\"") != std::string::npos);
  CHECK(report_problems(report) == "");
}

TEST_CASE("job control on the macOS supervisor's PTY: Ctrl-Z, fg, bg, self-stops, resize, pipes (stand-in)") {
  Wiring w;
  std::string prefix;
  for (const auto& a : w.argv({})) prefix += "'" + a + "' ";
  prefix.pop_back();  // ends with '--'
  job_control::Launcher l{"pi-jail-seatbelt", prefix, "HOME='" + w.box.home + "'", w.box.ws};
  const std::string warm = "warm-up-" + unique_token();
  job_control::ctrl_z_then_fg(l, {"cat", warm, warm, "after-fg-line", "after-fg-line", true});
  job_control::ctrl_z_then_fg(l, {"/usr/bin/python3 -c 'print(\"ready-\" + str(6*7)); print(\"got:\" + input())'", "",
                                  "ready-42", "answer", "got:answer"});
  job_control::bg_then_fg(l);
  job_control::fg_of_running_job_reads(l);
  job_control::stops_itself(l);
  job_control::ignores_ctrl_z(l);
  job_control::resize_while_stopped(l);
  job_control::pipe_has_no_staircase(l);
}

TEST_CASE("the command cannot shed pi-jail's signals: it leaves its process group, or stops on TERM, and still ends") {
  Wiring w;
  // Into the keeper's process group: --timeout's TERM still reaches it (by pid).
  auto moved = w.sh("exec /usr/bin/python3 -c 'import os, time; os.setpgid(0, os.getppid()); time.sleep(60)'",
                    {"--timeout", "2", "--grace", "1"});
  CHECK(moved.status == 124);
  // Stops itself on TERM: the grace's KILL ends it, and the run with it.
  auto stops = w.sh("trap 'kill -STOP $$' TERM; while :; do sleep 0.2; done", {"--timeout", "2", "--grace", "1"});
  CHECK(stops.status == 124);
  // Stopped and continued by its own child: the run ends with its code.
  auto resumed = w.sh("(sleep 1; kill -CONT $$) & kill -STOP $$; echo resumed; exit 5");
  CHECK(resumed.status == 5);
  CHECK(resumed.out == "resumed\n");
}
