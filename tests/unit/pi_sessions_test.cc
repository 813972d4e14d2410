// Which of Pi's session directories a jail on one workspace sees
// (lib/pi/sessions.h), against an invented filesystem for the spelling
// walk and a real directory for the sessions.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "pi/sessions.h"
#include "temp_dir.h"
#include "util/unique_fd.h"

namespace pj {
namespace {

namespace fs = std::filesystem;

// An invented filesystem: these directories exist, nothing else.
pi::IsDirectory dirs(std::set<std::string> existing) {
  return [existing = std::move(existing)](const std::string& p) { return existing.count(p) > 0; };
}

std::vector<std::string> names(const pi::WorkspaceSessions& s) {
  std::vector<std::string> out;
  for (const auto& d : s.shown) out.push_back(d.name);
  return out;
}

void session(const std::string& dir, const std::string& file, const std::string& cwd) {
  fs::create_directories(dir);
  std::ofstream(dir + "/" + file) << R"({"type":"session","version":3,"id":"x","cwd":")" << cwd << "\"}\n"
                                  << R"({"type":"message"})"
                                  << "\n";
}

TEST_CASE("Pi names a session directory by the path with its slashes as dashes, wrapped in --") {
  CHECK(pi::session_dir_name("/home/u/proj") == "--home-u-proj--");
  CHECK(pi::session_dir_name("/home/u/a-b") == pi::session_dir_name("/home/u/a/b"));
  CHECK(pi::session_dir_name("/c:x") == "--c-x--");
}

TEST_CASE("a spelling with dashes is matched against the directories that exist, each dash a slash or a dash") {
  auto is_dir = dirs({"/home", "/home/u", "/home/u/a", "/home/u/a/b", "/home/u/a-b", "/home/u/x"});
  auto found = pi::directories_spelled("/", "home-u-a-b", is_dir);
  std::sort(found.begin(), found.end());
  CHECK(found == std::vector<std::string>{"/home/u/a-b", "/home/u/a/b"});
  CHECK(pi::directories_spelled("/home/u", "a-b", is_dir).size() == 2);
  CHECK(pi::directories_spelled("/", "home-u-nothing", is_dir).empty());
  CHECK(pi::directories_spelled("/", "home-u-..", is_dir).empty());
}

TEST_CASE("the walk gives up after its budget of lookups: a hostile tree of dashes cannot stall a start") {
  size_t calls = 0;
  pi::IsDirectory all = [&](const std::string&) {
    ++calls;
    return true;
  };
  pi::directories_spelled("/", std::string(200, 'a') + std::string(60, '-') + "z", all, 512);
  CHECK(calls <= 512);
}

TEST_CASE(
    "a jail sees the workspace's, the starting directory's and the subdirectories' sessions, no other project's") {
  test::TempDir t;
  const std::string sessions = t.path + "/sessions";
  const std::string ws = "/home/u/proj";
  session(sessions + "/--home-u-proj--", "1.jsonl", ws);
  session(sessions + "/--home-u-proj-src--", "2.jsonl", ws + "/src");
  session(sessions + "/--home-u-proj-other--", "3.jsonl", "/home/u/proj-other");  // a sibling project
  session(sessions + "/--home-u-secret--", "4.jsonl", "/home/u/secret");
  util::UniqueFd fd(::open(sessions.c_str(), O_RDONLY | O_DIRECTORY));
  auto is_dir = dirs({"/home", "/home/u", ws, ws + "/src", ws + "/src/deep", "/home/u/proj-other", "/home/u/secret"});
  auto s = pi::workspace_sessions(fd.get(), ws, ws + "/src/deep", is_dir);
  CHECK(names(s) == std::vector<std::string>{"--home-u-proj--", "--home-u-proj-src-deep--", "--home-u-proj-src--"});
  CHECK(s.shown[0].exists);
  CHECK_FALSE(s.shown[1].exists);  // made by the run
  CHECK(s.refused.empty());
}

TEST_CASE("a name another project shares is shown only when every session in it records a path in the workspace") {
  test::TempDir t;
  const std::string sessions = t.path + "/sessions";
  const std::string ws = "/home/u/a/b";
  auto is_dir = dirs({"/home", "/home/u", "/home/u/a", ws, "/home/u/a-b"});
  session(sessions + "/--home-u-a-b--", "mine.jsonl", ws);
  util::UniqueFd fd(::open(sessions.c_str(), O_RDONLY | O_DIRECTORY));
  auto ok = pi::workspace_sessions(fd.get(), ws, ws, is_dir);
  CHECK(names(ok) == std::vector<std::string>{"--home-u-a-b--"});

  session(sessions + "/--home-u-a-b--", "theirs.jsonl", "/home/u/a-b");
  auto no = pi::workspace_sessions(fd.get(), ws, ws, is_dir);
  CHECK(names(no).empty());
  REQUIRE(no.refused.size() == 1);
  CHECK(no.refused[0].find("/home/u/a-b") != std::string::npos);
  CHECK(no.refused[0].find("theirs.jsonl") != std::string::npos);

  // A session whose header cannot be read is not taken for the workspace's.
  fs::remove(sessions + "/--home-u-a-b--/theirs.jsonl");
  std::ofstream(sessions + "/--home-u-a-b--/broken.jsonl") << "not json\n";
  CHECK(names(pi::workspace_sessions(fd.get(), ws, ws, is_dir)).empty());
}

TEST_CASE("a session directory that is a link, or a session file that is a FIFO, is never taken or waited on") {
  test::TempDir t;
  const std::string sessions = t.path + "/sessions";
  const std::string ws = "/home/u/a/b";
  fs::create_directories(sessions);
  fs::create_directory_symlink("/etc", sessions + "/--home-u-a-b--");
  util::UniqueFd fd(::open(sessions.c_str(), O_RDONLY | O_DIRECTORY));
  auto is_dir = dirs({"/home", "/home/u", "/home/u/a", ws, "/home/u/a-b"});
  auto linked = pi::workspace_sessions(fd.get(), ws, ws, is_dir);
  CHECK(names(linked).empty());
  CHECK(linked.refused.size() == 1);

  fs::remove(sessions + "/--home-u-a-b--");
  fs::create_directories(sessions + "/--home-u-a-b--");
  REQUIRE(::mkfifo((sessions + "/--home-u-a-b--/f.jsonl").c_str(), 0600) == 0);
  util::UniqueFd dir(::open((sessions + "/--home-u-a-b--").c_str(), O_RDONLY | O_DIRECTORY));
  CHECK_FALSE(pi::recorded_cwd(dir.get(), "f.jsonl"));
  CHECK(names(pi::workspace_sessions(fd.get(), ws, ws, is_dir)).empty());
}

TEST_CASE("a session directory made in a run is kept only for a directory of the workspace that no other shares") {
  test::TempDir t;
  const std::string ws = "/home/u/a/b";
  auto is_dir = dirs({"/home", "/home/u", "/home/u/a", ws, ws + "/sub", "/home/u/a-b", "/home/u/a-b/sub"});
  fs::create_directories(t.path + "/made");
  util::UniqueFd made(::open((t.path + "/made").c_str(), O_RDONLY | O_DIRECTORY));
  CHECK(pi::why_not_kept("--home-u-a-b-nothere--", made.get(), ws, is_dir) != "");
  CHECK(pi::why_not_kept("--home-u-other--", made.get(), ws, is_dir) != "");
  CHECK(pi::why_not_kept("../x", made.get(), ws, is_dir) != "");
  // /home/u/a-b/sub has the same name: kept only when its sessions are ours.
  CHECK(pi::why_not_kept("--home-u-a-b-sub--", made.get(), ws, is_dir) == "");
  session(t.path + "/made", "s.jsonl", "/home/u/a-b/sub");
  CHECK(pi::why_not_kept("--home-u-a-b-sub--", made.get(), ws, is_dir).find("/home/u/a-b") != std::string::npos);
  CHECK(pi::why_not_kept("--home-u-a-b-sub--", made.get(), "/home/u/a/b",
                         dirs({"/home", "/home/u", "/home/u/a", ws, ws + "/sub"})) == "");
}

}  // namespace
}  // namespace pj
