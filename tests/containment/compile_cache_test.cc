// The compile cache (runtime/compile_cache.h) in real jails: made once by
// a warm-up jail that sees only the installation, read-only in every
// session, never shared between installations, never taken from a
// directory someone else could have planted. The "Node" here is a shell
// script standing in for node: in the warm-up (`SCRIPT --version`) it
// writes what it saw into NODE_COMPILE_CACHE, in a session it shows the
// cache and tries to change it.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;
namespace fs = std::filesystem;

namespace {

struct Install {
  std::string prefix, node, script, package_json;
};

// How the stand-in answers the warm-up's second part (node
// --input-type=module -e SCRIPT -- PROGRAM: import the program's modules).
enum class Modules { imported, fail };

Install make_install(const Sandbox& sb, const std::string& name = "inst", Modules modules = Modules::imported) {
  Install in;
  in.prefix = sb.base + "/" + name;
  in.node = in.prefix + "/bin/node";
  in.script = in.prefix + "/lib/node_modules/fakepi/dist/cli.js";
  in.package_json = in.prefix + "/lib/node_modules/fakepi/package.json";
  fs::create_directories(in.prefix + "/bin");
  fs::create_directories(in.prefix + "/lib/node_modules/fakepi/dist");
  write_file(in.node,
             "#!/bin/sh\n"
             "script=\"$1\"; shift\n"
             "c=\"$NODE_COMPILE_CACHE\"\n"
             "if [ \"$script\" = --input-type=module ] && [ \"$1\" = -e ] && [ \"$3\" = -- ]; then\n" +
                 std::string(modules == Modules::fail ? "  exit 7\n" : "") +
                 "  echo \"modules of $4\" > \"$c/v1/modules\"\n"
                 "  if ls " +
                 sb.ws +
                 " >/dev/null 2>&1; then echo ws-visible; else echo ws-hidden; fi >> \"$c/v1/modules\"\n"
                 "  exit 0\n"
                 "fi\n"
                 "if [ \"$1\" = --version ]; then\n"
                 "  mkdir -p \"$c/v1\" || exit 3\n"
                 "  echo \"warmed $$-$(date +%s%N)\" > \"$c/v1/entry\"\n"
                 "  env | sort > \"$c/v1/env\"\n"
                 "  if ls " +
                 sb.ws +
                 " >/dev/null 2>&1; then echo ws-visible; else echo ws-hidden; fi > \"$c/v1/ws\"\n"
                 "  if ls " +
                 sb.home +
                 "/.ssh >/dev/null 2>&1; then echo home-visible; else echo home-hidden; fi >> \"$c/v1/ws\"\n"
                 "  echo 1.0.0\n"
                 "  exit 0\n"
                 "fi\n"
                 "echo \"cache=$c\"\n"
                 "[ -n \"$c\" ] && cat \"$c/v1/entry\"\n"
                 "[ -n \"$c\" ] && (echo poison > \"$c/v1/entry\") 2>/dev/null && echo wrote-entry\n"
                 "[ -n \"$c\" ] && mkdir \"$c/v2\" 2>/dev/null && echo wrote-dir\n"
                 "[ -n \"$c\" ] && (echo poison > \"$c/../evil\") 2>/dev/null && echo wrote-beside\n"
                 "exit 0\n");
  ::chmod(in.node.c_str(), 0755);
  write_file(in.script, "#!" + in.node + "\n");
  ::chmod(in.script.c_str(), 0755);
  write_file(in.package_json, "{\"name\": \"fakepi\", \"version\": \"1.0.0\"}\n");
  return in;
}

std::string cache_home(const Sandbox& sb) { return sb.base + "/cache"; }

Outcome session(const Sandbox& sb, const Install& in, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.push_back(in.script);
  return run(argv, {"HOME=" + sb.home, "XDG_CACHE_HOME=" + cache_home(sb), "PI_CANARY_TOKEN=canary-in-env"});
}

// The cache directory a session was given ("" for none).
std::string given(const Outcome& o) {
  auto at = o.out.find("cache=");
  if (at == std::string::npos) return "";
  return o.out.substr(at + 6, o.out.find('\n', at) - at - 6);
}

}  // namespace

TEST_CASE("compile cache: made once by a warm-up jail that saw only the installation; the jail cannot write it") {
  Sandbox sb;
  Install in = make_install(sb);
  auto first = session(sb, in);
  CAPTURE(first.err);
  REQUIRE(first.status == 0);
  const std::string dir = given(first);
  const std::string root = fs::canonical(cache_home(sb)).string() + "/pi-jail/compile-cache/";
  REQUIRE(dir.starts_with(root));
  CHECK(dir.size() == root.size() + 32);
  CHECK(first.out.find("warmed ") != std::string::npos);
  CHECK(first.out.find("wrote-entry") == std::string::npos);
  CHECK(first.out.find("wrote-dir") == std::string::npos);
  // Beside it is the jail's own scratch (the cache home is under /tmp
  // here), never the host's directory.
  CHECK_FALSE(exists(root + "evil"));
  CHECK_FALSE(exists(dir + "/v2"));
  const std::string entry = read_file(dir + "/v1/entry");
  CHECK(entry.starts_with("warmed "));
  // The warm-up: no workspace, no home, none of the caller's variables.
  CHECK(read_file(dir + "/v1/ws") == "ws-hidden\nhome-hidden\n");
  // Its second part imported the program's other modules, in the same
  // kind of jail.
  CHECK(read_file(dir + "/v1/modules") == "modules of " + fs::canonical(in.script).string() + "\nws-hidden\n");
  const std::string env = read_file(dir + "/v1/env");
  CHECK(env.find("canary-in-env") == std::string::npos);
  CHECK(env.find("HTTP_PROXY") == std::string::npos);
  // pi-jail's own directories: the caller's alone.
  struct stat st;
  REQUIRE(::stat((cache_home(sb) + "/pi-jail").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  // The next run: the same cache, not warmed again, still unwritable.
  auto second = session(sb, in);
  REQUIRE(second.status == 0);
  CHECK(given(second) == dir);
  CHECK(second.out.find("wrote-entry") == std::string::npos);
  CHECK(second.out.find("wrote-dir") == std::string::npos);
  CHECK(read_file(dir + "/v1/entry") == entry);
  // Nothing half made is left beside it.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    CAPTURE(e.path().string());
    CHECK((e.path().filename() == ".lock" || e.path().string() == dir));
    ++entries;
  }
  CHECK(entries == 2);
}

TEST_CASE("compile cache: a cache made for another Node or another version of the program is never used") {
  Sandbox sb;
  Install in = make_install(sb);
  auto v1 = session(sb, in);
  REQUIRE(v1.status == 0);
  const std::string old_dir = given(v1);
  REQUIRE_FALSE(old_dir.empty());
  // An upgrade of the program: npm writes a new package.json and script.
  ::unlink(in.package_json.c_str());
  write_file(in.package_json, "{\"name\": \"fakepi\", \"version\": \"1.1.0\"}\n");
  auto v2 = session(sb, in);
  REQUIRE(v2.status == 0);
  const std::string new_dir = given(v2);
  REQUIRE_FALSE(new_dir.empty());
  CHECK(new_dir != old_dir);
  CHECK(read_file(new_dir + "/v1/entry") != read_file(old_dir + "/v1/entry"));
  // A new Node in place: again a cache of its own.
  const std::string text = read_file(in.node);
  ::unlink(in.node.c_str());
  write_file(in.node, text);
  ::chmod(in.node.c_str(), 0755);
  auto v3 = session(sb, in);
  REQUIRE(v3.status == 0);
  CHECK_FALSE(given(v3).empty());
  CHECK(given(v3) != new_dir);
  CHECK(given(v3) != old_dir);
}

TEST_CASE("compile cache: a symlinked, shared or another user's cache directory is refused and not used") {
  Sandbox sb;
  Install in = make_install(sb);
  const std::string tool = cache_home(sb) + "/pi-jail";
  SUBCASE("pi-jail/ is a symlink to a planted cache") {
    fs::create_directories(sb.outside + "/planted/compile-cache");
    fs::create_directories(cache_home(sb));
    fs::create_directory_symlink(sb.outside + "/planted", tool);
    auto o = session(sb, in);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(given(o) == "");
    CHECK(o.err.find("compile cache not used") != std::string::npos);
    CHECK(o.err.find("is a symlink") != std::string::npos);
    CHECK(fs::is_empty(sb.outside + "/planted/compile-cache"));
  }
  SUBCASE("compile-cache/ that others can write") {
    fs::create_directories(tool + "/compile-cache");
    ::chmod(tool.c_str(), 0700);
    ::chmod((tool + "/compile-cache").c_str(), 0777);
    auto o = session(sb, in);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(given(o) == "");
    CHECK(o.err.find("others can write it") != std::string::npos);
  }
  SUBCASE("another user's cache directory") {
    if (::geteuid() != 0) return;  // only root can give a directory away
    fs::create_directories(tool + "/compile-cache");
    ::chmod(tool.c_str(), 0700);
    ::chmod((tool + "/compile-cache").c_str(), 0700);
    REQUIRE(::chown((tool + "/compile-cache").c_str(), 65534, 65534) == 0);
    auto o = session(sb, in);
    CAPTURE(o.err);
    CHECK(o.status == 0);
    CHECK(given(o) == "");
    CHECK(o.err.find("belongs to uid 65534") != std::string::npos);
  }
}

TEST_CASE("compile cache: off by [runtime] compile_cache = false, and never for an installation the jail can write") {
  Sandbox sb;
  Install in = make_install(sb);
  write_file(sb.outside + "/policy.toml", "[runtime]\ncompile_cache = false\n");
  auto off = session(sb, in, {"--config", sb.outside + "/policy.toml"});
  CAPTURE(off.err);
  REQUIRE(off.status == 0);
  CHECK(given(off) == "");
  CHECK_FALSE(exists(cache_home(sb) + "/pi-jail"));
  auto explained =
      run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "explain", "-w", sb.ws, "--config", sb.outside + "/policy.toml"},
          {"HOME=" + sb.home});
  CHECK(explained.out.find("compile-cache   off") != std::string::npos);

  // An installation inside the workspace: the jail could rewrite the
  // program, and so what a warm-up would compile for the next run.
  Sandbox other;
  Install ws_install = make_install(other, "ws/tools");
  auto in_ws = session(other, ws_install);
  CAPTURE(in_ws.err);
  REQUIRE(in_ws.status == 0);
  CHECK(given(in_ws) == "");
  CHECK(in_ws.err.find("no compile cache") != std::string::npos);
  CHECK_FALSE(exists(cache_home(other) + "/pi-jail/compile-cache"));
}

TEST_CASE("compile cache: a program whose warm-up fails runs without a cache, and the warm-up is not retried") {
  Sandbox sb;
  Install in = make_install(sb);
  // This "Node" fails on --version (a program without one).
  std::string text = read_file(in.node);
  text.replace(text.find("  echo 1.0.0\n  exit 0\n"), std::string("  echo 1.0.0\n  exit 0\n").size(),
               "  echo 'no such option' >&2\n  exit 9\n");
  write_file(in.node, text);
  auto first = session(sb, in);
  CAPTURE(first.err);
  CHECK(first.status == 0);
  CHECK(given(first) == "");
  CHECK(first.err.find("warm-up") != std::string::npos);
  CHECK(first.err.find("no such option") != std::string::npos);
  auto second = session(sb, in);
  CAPTURE(second.err);
  CHECK(second.status == 0);
  CHECK(given(second) == "");
  CHECK(second.err.find("failed before") != std::string::npos);
  CHECK(second.err.find("no such option") == std::string::npos);
}

TEST_CASE(
    "compile cache: Ctrl-C during the warm-up stops the whole run; nothing runs, and the next run warms up again") {
  Sandbox sb;
  Install in = make_install(sb);
  // A warm-up that says it started, then takes its time; the session
  // leaves a mark in the workspace.
  std::string text = read_file(in.node);
  text.replace(text.find("  echo 1.0.0\n"), std::string("  echo 1.0.0\n").size(),
               "  touch \"$c/started\"\n  sleep 20\n");
  text.replace(text.find("echo \"cache=$c\"\n"), std::string("echo \"cache=$c\"\n").size(),
               "echo \"cache=$c\"\ntouch " + sb.ws + "/session-ran\n");
  write_file(in.node, text);
  pid_t pid = spawn({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-q", "-w", sb.ws, "--", in.script},
                    {"HOME=" + sb.home, "XDG_CACHE_HOME=" + cache_home(sb)});
  const std::string root = cache_home(sb) + "/pi-jail/compile-cache";
  auto started = [&] {
    std::error_code ec;
    if (!fs::exists(root, ec)) return false;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (exists(e.path().string() + "/started")) return true;
    return false;
  };
  REQUIRE(eventually(started));
  ::kill(pid, SIGINT);
  CHECK(wait_status_guarded(pid) == 130);
  CHECK_FALSE(exists(sb.ws + "/session-ran"));
  for (const auto& e : fs::directory_iterator(root)) {
    CAPTURE(e.path().string());
    CHECK(e.path().filename() == ".lock");  // no cache, no .failed mark, no leftovers
  }
}

TEST_CASE("compile cache: when importing the program's other modules fails, what --version made is still used") {
  Sandbox sb;
  Install in = make_install(sb, "inst", Modules::fail);
  auto first = session(sb, in);
  CAPTURE(first.err);
  REQUIRE(first.status == 0);
  const std::string dir = given(first);
  REQUIRE_FALSE(dir.empty());
  CHECK(first.out.find("warmed ") != std::string::npos);
  CHECK_FALSE(exists(dir + "/v1/modules"));
  CHECK(first.err.find("warning") == std::string::npos);
  auto second = session(sb, in);
  CHECK(given(second) == dir);
}
