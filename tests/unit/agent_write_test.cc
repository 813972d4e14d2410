// Agent-dir write-back against a real directory: Pi's lock, the host file
// read as hostile input, the atomic replace (pi/agent_state.h write_back).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "pi/agent_state.h"
#include "json_helpers.h"
#include "util/json_value.h"

using namespace pj::pi::agent;
namespace json = pj::util::json;
using pj::test::parsed;
using pj::test::pi_form;

namespace {

const std::string kOAuth = R"({"type":"oauth","refresh":"r1","access":"a1","expires":1000,"accountId":"acc"})";
const std::string kGiven = R"({"anthropic":)" + kOAuth + R"(,"openai":{"type":"api_key","key":"sk-host"}})";

}  // namespace

namespace {

struct AgentDir {
  std::string path;
  int fd = -1;
  AgentDir() {
    char t[] = "/tmp/pj-agent.XXXXXX";
    REQUIRE(::mkdtemp(t));
    path = t;
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(fd >= 0);
  }
  ~AgentDir() {
    ::close(fd);
    std::filesystem::remove_all(path);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path + "/" + name) << text; }
  std::string read(const std::string& name) const {
    std::ifstream f(path + "/" + name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  bool exists(const std::string& name) const {
    return std::filesystem::exists(std::filesystem::symlink_status(path + "/" + name));
  }
  // Only what was asked for: no temporary file left over.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

const std::string kJailAddsKey = R"({"anthropic":)" + kOAuth +
                                 R"(,"openai":{"type":"api_key","key":"sk-host"},"xai":{"type":"api_key","key":"k2"}})";

LockTiming quick() {
  LockTiming t;
  t.wait = std::chrono::milliseconds(300);
  return t;
}

}  // namespace

TEST_CASE("write_back replaces the host file atomically, mode 0600, and removes its lock") {
  AgentDir d;
  d.write("auth.json", pi_form(kGiven));
  ::chmod((d.path + "/auth.json").c_str(), 0644);
  Notes notes;
  auto r = write_back(d.fd, kAuthFile, pi_form(kGiven), kJailAddsKey, notes);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message()));
  CHECK(*r == WriteOutcome::written);
  CHECK(parsed(d.read("auth.json")) == parsed(kJailAddsKey));
  struct stat st;
  REQUIRE(::stat((d.path + "/auth.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(d.names() == std::vector<std::string>{"auth.json"});

  Notes again;
  auto r2 = write_back(d.fd, kAuthFile, pi_form(kGiven), kGiven, again);
  REQUIRE(r2.ok());
  CHECK(*r2 == WriteOutcome::nothing_to_write);
  CHECK(d.names() == std::vector<std::string>{"auth.json"});
}

TEST_CASE("write_back creates a missing host file and writes settings the same way") {
  AgentDir d;
  Notes notes;
  auto r = write_back(d.fd, kSettingsFile, std::nullopt, R"({"defaultModel":"m","shellPath":"/x"})", notes);
  REQUIRE(r.ok());
  CHECK(d.read("settings.json") == "{\n  \"defaultModel\": \"m\"\n}");
  CHECK(d.names() == std::vector<std::string>{"settings.json"});
}

TEST_CASE("write_back waits for a fresh lock, then gives up and writes nothing") {
  AgentDir d;
  d.write("auth.json", kGiven);
  REQUIRE(::mkdir((d.path + "/auth.json.lock").c_str(), 0700) == 0);
  Notes notes;
  auto start = std::chrono::steady_clock::now();
  auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick());
  auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().err() == EBUSY);
  CHECK(r.error().message().find("write back auth.json: the lock auth.json.lock is held") != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(waited < std::chrono::seconds(5));
  CHECK(d.read("auth.json") == kGiven);
  CHECK(d.exists("auth.json.lock"));  // not ours to remove
}

TEST_CASE("write_back takes the lock once its holder releases it") {
  AgentDir d;
  d.write("auth.json", kGiven);
  std::string lock = d.path + "/auth.json.lock";
  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::rmdir(lock.c_str());
  });
  Notes notes;
  LockTiming t;
  t.wait = std::chrono::seconds(5);
  auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, t);
  holder.join();
  REQUIRE(r.ok());
  CHECK(*r == WriteOutcome::written);
  CHECK_FALSE(d.exists("auth.json.lock"));
}

TEST_CASE("write_back takes over a stale lock (mtime older than the stale time)") {
  AgentDir d;
  d.write("auth.json", kGiven);
  std::string lock = d.path + "/auth.json.lock";
  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  struct timespec old[2];
  old[0].tv_sec = old[1].tv_sec = ::time(nullptr) - 31;
  old[0].tv_nsec = old[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, lock.c_str(), old, 0) == 0);
  Notes notes;
  auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message()));
  CHECK(parsed(d.read("auth.json")) == parsed(kJailAddsKey));
  CHECK_FALSE(d.exists("auth.json.lock"));
  // 25 s old is still fresh (and stays so through the 300 ms wait).
  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  old[0].tv_sec = old[1].tv_sec = ::time(nullptr) - 25;
  REQUIRE(::utimensat(AT_FDCWD, lock.c_str(), old, 0) == 0);
  Notes n2;
  CHECK_FALSE(write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, n2, quick()).ok());
}

TEST_CASE("write_back refuses a symlink, FIFO, directory or huge file at the host path, and a non-directory lock") {
  SUBCASE("symlink") {
    AgentDir d;
    d.write("elsewhere", kGiven);
    REQUIRE(::symlink((d.path + "/elsewhere").c_str(), (d.path + "/auth.json").c_str()) == 0);
    Notes notes;
    auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("write back auth.json: read the host's file") != std::string::npos);
    CHECK(d.read("elsewhere") == kGiven);
    struct stat st;
    REQUIRE(::lstat((d.path + "/auth.json").c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(d.names() == std::vector<std::string>{"auth.json", "elsewhere"});
  }
  SUBCASE("FIFO: refused without blocking") {
    AgentDir d;
    REQUIRE(::mkfifo((d.path + "/auth.json").c_str(), 0600) == 0);
    Notes notes;
    auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick());
    REQUIRE_FALSE(r.ok());
    CHECK(d.names() == std::vector<std::string>{"auth.json"});
  }
  SUBCASE("directory") {
    AgentDir d;
    REQUIRE(::mkdir((d.path + "/settings.json").c_str(), 0700) == 0);
    Notes notes;
    CHECK_FALSE(write_back(d.fd, kSettingsFile, "{}", R"({"defaultModel":"m"})", notes, quick()).ok());
    CHECK(d.names() == std::vector<std::string>{"settings.json"});
  }
  SUBCASE("huge") {
    AgentDir d;
    d.write("auth.json", "{\"a\":\"" + std::string(kMaxFileBytes, 'x') + "\"}");
    Notes notes;
    CHECK_FALSE(write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick()).ok());
    CHECK(d.names() == std::vector<std::string>{"auth.json"});
  }
  SUBCASE("a symlink where the lock directory goes") {
    AgentDir d;
    d.write("auth.json", kGiven);
    REQUIRE(::symlink("/tmp", (d.path + "/auth.json.lock").c_str()) == 0);
    Notes notes;
    auto r = write_back(d.fd, kAuthFile, kGiven, kJailAddsKey, notes, quick());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("is not a directory; left alone") != std::string::npos);
    CHECK(d.read("auth.json") == kGiven);
    CHECK(d.names() == std::vector<std::string>{"auth.json", "auth.json.lock"});
  }
}
