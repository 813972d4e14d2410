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

TEST_CASE("open_output_file: a regular file or none; a FIFO, device, directory or symlink never blocks and is refused") {
  TempDir t;
  t.write("doc", "old content\n");
  t.write("log", "line 1\n");
  t.write("target", "precious\n");
  REQUIRE(::mkfifo((t.path + "/fifo").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((t.path + "/read-fifo").c_str(), 0600) == 0);
  REQUIRE(::symlink((t.path + "/target").c_str(), (t.path + "/link").c_str()) == 0);
  REQUIRE(::symlink((t.path + "/made-through-link").c_str(), (t.path + "/dangling").c_str()) == 0);
  std::filesystem::create_directory(t.path + "/dir");
  // A FIFO with a reader would accept a non-blocking open: still refused.
  int reader = ::open((t.path + "/read-fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);

  auto doc = open_output_file(t.path + "/doc", OutputMode::replace_content, 0644);
  REQUIRE(doc);
  CHECK((::fcntl(doc->get(), F_GETFL) & O_NONBLOCK) == 0);
  CHECK((::fcntl(doc->get(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(std::filesystem::file_size(t.path + "/doc") == 0);
  auto log = open_output_file(t.path + "/log", OutputMode::append, 0600);
  REQUIRE(log);
  CHECK(::write(log->get(), "line 2\n", 7) == 7);
  std::ifstream in(t.path + "/log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all == "line 1\nline 2\n");
  auto fresh = open_output_file(t.path + "/new", OutputMode::append, 0600);
  REQUIRE(fresh);
  CHECK(std::filesystem::is_regular_file(t.path + "/new"));

  struct Case {
    std::string path, says;
  } refused[] = {
      {t.path + "/fifo", "is a FIFO"},      {t.path + "/read-fifo", "is a FIFO"},
      {"/dev/null", "is a device"},         {t.path + "/dir", "is a directory"},
      {t.path + "/link", "is a symlink"},   {t.path + "/dangling", "is a symlink"},
  };
  for (const auto& c : refused) {
    CAPTURE(c.path);
    for (auto mode : {OutputMode::replace_content, OutputMode::append}) {
      auto r = open_output_file(c.path, mode, 0600);
      REQUIRE_FALSE(r);
      CHECK(r.error().message().find(c.path + " " + c.says) != std::string::npos);
    }
  }
  ::close(reader);
  std::ifstream target(t.path + "/target");
  std::string kept((std::istreambuf_iterator<char>(target)), std::istreambuf_iterator<char>());
  CHECK(kept == "precious\n");
  CHECK_FALSE(std::filesystem::exists(t.path + "/made-through-link"));
}

TEST_CASE("directory_is_empty: only . and .. count as empty, however many entries and wherever the offset is") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/empty");
  std::filesystem::create_directories(d.path + "/full");
  // More entries than one 4 KiB getdents64 buffer holds, names sorting anywhere.
  for (int i = 0; i < 400; ++i) d.write("full/entry-with-a-long-name-" + std::to_string(i), "");
  std::filesystem::create_directories(d.path + "/one");
  d.write("one/.hidden", "");
  auto open_dir = [&](const std::string& rel) { return UniqueFd(::open((d.path + "/" + rel).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); };
  UniqueFd empty = open_dir("empty"), full = open_dir("full"), one = open_dir("one");
  CHECK(directory_is_empty(empty.get()));
  CHECK(directory_is_empty(empty.get()));  // again: read from the start each time
  CHECK_FALSE(directory_is_empty(full.get()));
  CHECK_FALSE(directory_is_empty(one.get()));
  CHECK_FALSE(directory_is_empty(one.get()));
  UniqueFd file(::open((d.path + "/one/.hidden").c_str(), O_RDONLY | O_CLOEXEC));
  CHECK_FALSE(directory_is_empty(file.get()));  // not a directory
  CHECK_FALSE(directory_is_empty(-1));
}
