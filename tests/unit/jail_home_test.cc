#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jail_home.h"
#include "temp_dir.h"

using pj::supervisor::jail_home_name;
using pj::supervisor::prepare_jail_home;

namespace {

using HomeDir = pj::test::TempDir;

}  // namespace

TEST_CASE("a jail home's name: the workspace's basename made safe, and a hash of the whole path") {
  const std::string a = jail_home_name("/home/u/src/proj");
  CHECK(a.starts_with("proj-"));
  CHECK(a.size() == 5 + 16);
  CHECK(jail_home_name("/home/u/other/proj") != a);  // same basename, another workspace
  CHECK(jail_home_name("/home/u/src/proj") == a);    // stable
  CHECK(jail_home_name("/srv/a b/..x\n").starts_with("_.x_-"));
  CHECK(jail_home_name("/").starts_with("root-"));
  CHECK(jail_home_name("/w/" + std::string(100, 'x')).size() == 32 + 1 + 16);
}

TEST_CASE("prepare_jail_home makes a private directory per workspace and refuses what it did not make") {
  HomeDir d;
  const std::string data = d.path + "/share/pi-jail";
  auto home = prepare_jail_home(data, "/home/u/src/proj");
  REQUIRE(home.ok());
  CHECK(*home == data + "/homes/" + jail_home_name("/home/u/src/proj"));
  struct stat st;
  REQUIRE(::lstat(home->c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == ::getuid());
  // Kept: the second run gets the same directory and what was left there.
  std::ofstream(*home + "/.npmrc") << "cache\n";
  auto again = prepare_jail_home(data, "/home/u/src/proj");
  REQUIRE(again.ok());
  CHECK(*again == *home);
  CHECK(std::filesystem::exists(*home + "/.npmrc"));

  SUBCASE("recorded for another workspace: refused, never shared") {
    std::ofstream(*home + ".workspace", std::ios::trunc) << "/elsewhere\n";
    auto other = prepare_jail_home(data, "/home/u/src/proj");
    REQUIRE_FALSE(other.ok());
    CHECK(other.error().message().find("belongs to another workspace") != std::string::npos);
    CHECK(other.error().message().find("--ephemeral-home") != std::string::npos);
  }
  SUBCASE("a symlink in its place: refused, not followed") {
    std::filesystem::remove_all(*home);
    std::filesystem::create_directory(d.path + "/target");
    REQUIRE(::symlink((d.path + "/target").c_str(), home->c_str()) == 0);
    auto linked = prepare_jail_home(data, "/home/u/src/proj");
    REQUIRE_FALSE(linked.ok());
    CHECK(linked.error().message().find("open the jail home " + *home) != std::string::npos);
  }
  SUBCASE("writable by others: refused") {
    ::chmod(home->c_str(), 0777);
    auto open = prepare_jail_home(data, "/home/u/src/proj");
    REQUIRE_FALSE(open.ok());
    CHECK(open.error().message().find("others can write to it (mode 0777)") != std::string::npos);
  }
  SUBCASE("the record a FIFO: refused without waiting") {
    ::unlink((*home + ".workspace").c_str());
    REQUIRE(::mkfifo((*home + ".workspace").c_str(), 0600) == 0);
    auto fifo = prepare_jail_home(data, "/home/u/src/proj");
    REQUIRE_FALSE(fifo.ok());
  }
}

TEST_CASE("first runs of one workspace at the same time all get its jail home") {
  HomeDir d;
  const std::string data = d.path + "/share/pi-jail";
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(prepare_jail_home(data, "/home/u/src/proj").ok() ? 0 : 1);
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::ifstream record(data + "/homes/" + jail_home_name("/home/u/src/proj") + ".workspace");
  std::string line;
  std::getline(record, line);
  CHECK(line == "/home/u/src/proj");
}
