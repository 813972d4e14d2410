// The end-of-run survey of the jail's scratch places (scratch_audit.h),
// on a directory tree made here: what is counted, what is not followed,
// and the one line said about it.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "scratch_audit.h"
#include "temp_dir.h"

using namespace pj::supervisor::scratch;
namespace fs = std::filesystem;

namespace {

struct TempDir : pj::test::TempDir {
  void file(const std::string& rel, size_t size) const {
    fs::create_directories(fs::path(path + "/" + rel).parent_path());
    std::ofstream(path + "/" + rel) << std::string(size, 'x');
  }
};

}  // namespace

TEST_CASE("scratch: files are counted by top-level entry, largest first; links are not followed") {
  TempDir tmp, var;
  tmp.file("small", 10);
  tmp.file("wt/x/a.txt", 3000);
  tmp.file("wt/x/b.txt", 2000);
  var.file("d/f", 100);
  fs::create_directory_symlink("/usr", tmp.path + "/link-to-usr");  // one entry, not /usr's files
  ::mkfifo((tmp.path + "/fifo").c_str(), 0600);
  fs::create_directories(tmp.path + "/empty/dirs/only");  // mountpoint scaffolding: nothing in it
  int a = ::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY), b = ::open(var.path.c_str(), O_RDONLY | O_DIRECTORY);
  auto d = survey({{"/tmp", a}, {"/var/tmp", b}});
  ::close(a);
  ::close(b);
  CHECK(d.files == 6);                           // small, a.txt, b.txt, f, the link, the FIFO
  CHECK(d.bytes == 10 + 3000 + 2000 + 100 + 4);  // the link's own size: "/usr"
  CHECK_FALSE(d.capped);
  REQUIRE(d.top.size() == 5);
  CHECK(d.top[0].path == "/tmp/wt");
  CHECK(d.top[0].files == 2);
  CHECK(d.top[1].path == "/var/tmp/d");
  std::string line = discarded_line(d);
  CHECK(line ==
        "the jail wrote 6 files (5.0 KiB) outside the workspace, in places discarded now: /tmp/wt (4.9 KiB, "
        "2 files), /var/tmp/d (100 B), /tmp/small (10 B) and 2 more");
}

TEST_CASE("scratch: nothing written, nothing said; names the jail chose are escaped and cut") {
  TempDir tmp;
  fs::create_directories(tmp.path + "/only/dirs");
  int fd = ::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY);
  CHECK(discarded_line(survey({{"/tmp", fd}})) == "");
  tmp.file("evil\x1b[2J" + std::string(200, 'n'), 1);
  auto line = discarded_line(survey({{"/tmp", fd}}));
  ::close(fd);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find("...") != std::string::npos);
  CHECK(line.size() < 300);
}

TEST_CASE("scratch: a closed or missing place is skipped") { CHECK(survey({{"/tmp", -1}}).files == 0); }
