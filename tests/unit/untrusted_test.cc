// Reading files the jail can write: no symlink followed, no FIFO waited
// on, no file read past its cap.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "util/untrusted.h"

using namespace pj::util;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/pj-untrusted.XXXXXX";
    REQUIRE(::mkdtemp(t));
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& rel, const std::string& text) const { std::ofstream(path + "/" + rel) << text; }
};

}  // namespace

TEST_CASE("read_untrusted_file reads a small regular file and says absent for a missing one") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/a/b");
  d.write("a/b/f", "hello\n");
  auto r = read_untrusted_file(d.path + "/a/b/f", 100);
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK(**r == "hello\n");
  auto missing = read_untrusted_file(d.path + "/a/b/nope", 100);
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
  auto missing_dir = read_untrusted_file(d.path + "/nope/f", 100);
  REQUIRE(missing_dir);
  CHECK_FALSE(missing_dir->has_value());
}

TEST_CASE("read_untrusted_file refuses a symlink at the end or on the way") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/real");
  d.write("real/f", "secret\n");
  ::symlink((d.path + "/real/f").c_str(), (d.path + "/link").c_str());
  ::symlink((d.path + "/real").c_str(), (d.path + "/dirlink").c_str());
  auto last = read_untrusted_file(d.path + "/link", 100);
  REQUIRE_FALSE(last);
  CHECK(last.error().err() == ELOOP);
  auto on_way = read_untrusted_file(d.path + "/dirlink/f", 100);
  REQUIRE_FALSE(on_way);
  CHECK(on_way.error().message().find("symlink") != std::string::npos);
}

TEST_CASE("read_untrusted_file does not wait on a FIFO and refuses it") {
  TempDir d;
  REQUIRE(::mkfifo((d.path + "/fifo").c_str(), 0600) == 0);
  auto r = read_untrusted_file(d.path + "/fifo", 100);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("FIFO") != std::string::npos);
}

TEST_CASE("read_untrusted_file refuses a sparse file past its cap without reading it") {
  TempDir d;
  int fd = ::open((d.path + "/sparse").c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 300L << 20) == 0);
  ::close(fd);
  auto r = read_untrusted_file(d.path + "/sparse", 4096);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("more than the 4096") != std::string::npos);
  d.write("exact", std::string(4096, 'x'));
  auto exact = read_untrusted_file(d.path + "/exact", 4096);
  REQUIRE(exact);
  CHECK((*exact)->size() == 4096);
}

TEST_CASE("stat_beneath tells a symlink, a directory, a file and absence apart without following") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/dir");
  d.write("dir/f", "x");
  ::symlink("/etc", (d.path + "/link").c_str());
  auto root = open_dir_nofollow(d.path);
  REQUIRE(root);
  CHECK(stat_beneath(root->get(), "dir")->type == NodeType::directory);
  CHECK(stat_beneath(root->get(), "dir/f")->type == NodeType::regular);
  CHECK(stat_beneath(root->get(), "link")->type == NodeType::symlink);
  CHECK(stat_beneath(root->get(), "nope")->type == NodeType::absent);
  CHECK_FALSE(stat_beneath(root->get(), "link/passwd"));  // never through the link
  CHECK_FALSE(open_dir_beneath(root->get(), "dir/.."));
}
