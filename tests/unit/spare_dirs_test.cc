#include "spare_dirs.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "temp_dir.h"
#include "util/unique_fd.h"

using pj::supervisor::SpareDirs;
using pj::test::TempDir;
using pj::util::UniqueFd;

namespace {

UniqueFd open_dir(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd.valid());
  return fd;
}

ino_t inode(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_ino;
}

std::set<ino_t> inodes_in(const std::string& dir) {
  std::set<ino_t> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(inode(e.path().string()));
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A state directory and a parent directory (a workspace) on one filesystem.
struct Places {
  TempDir tmp;
  std::string state = tmp.path + "/state";
  std::string ws = tmp.path + "/ws";
  std::string spares = state + "/" + SpareDirs::kDirName;
  Places() {
    REQUIRE(::mkdir(state.c_str(), 0700) == 0);
    REQUIRE(::mkdir(ws.c_str(), 0755) == 0);
  }
};

}  // namespace

TEST_CASE("a removed directory is kept as a spare, and the next one made is that directory, with a new one's mode") {
  Places p;
  REQUIRE(::mkdir((p.ws + "/.vscode").c_str(), 0700) == 0);
  const ino_t was = inode(p.ws + "/.vscode");
  {
    UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
    SpareDirs spares(state.get(), p.state);
    CHECK(spares.remove(ws.get(), ".vscode", p.ws + "/.vscode") == 0);
  }
  CHECK_FALSE(exists(p.ws + "/.vscode"));
  CHECK(inodes_in(p.spares) == std::set<ino_t>{was});
  struct stat st;
  REQUIRE(::stat(p.spares.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);

  const mode_t mask = ::umask(027);
  {
    UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
    SpareDirs spares(state.get(), p.state);
    CHECK(spares.make(ws.get(), ".envrc", 0755) == 0);
  }
  ::umask(mask);
  CHECK(inode(p.ws + "/.envrc") == was);
  REQUIRE(::stat((p.ws + "/.envrc").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);  // 0755 less the umask, as mkdir(2) makes it
  CHECK(inodes_in(p.spares).empty());
}

TEST_CASE("a directory that holds something is moved back where it was, and remove says ENOTEMPTY as rmdir does") {
  // The caller found it empty a moment before: this is a file a host
  // process wrote into a placeholder in between.
  Places p;
  REQUIRE(::mkdir((p.ws + "/.vscode").c_str(), 0755) == 0);
  std::ofstream(p.ws + "/.vscode/settings.json") << "{}\n";
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.remove(ws.get(), ".vscode", p.ws + "/.vscode") == ENOTEMPTY);
  CHECK(exists(p.ws + "/.vscode/settings.json"));
  CHECK(inodes_in(p.spares).empty());
}

TEST_CASE("a directory carrying an extended attribute other than the placeholder mark is removed, not kept") {
  // An ACL or a security label belongs to the place the directory was
  // made for; the mark (placeholders.cc) is the one attribute kept.
  Places p;
  REQUIRE(::mkdir((p.ws + "/marked").c_str(), 0755) == 0);
  REQUIRE(::mkdir((p.ws + "/other").c_str(), 0755) == 0);
  if (::setxattr((p.ws + "/marked").c_str(), "user.pi-jail", "placeholder", 11, 0) != 0 ||
      ::setxattr((p.ws + "/other").c_str(), "user.other", "x", 1, 0) != 0) {
    FAIL("this filesystem has no user extended attributes: ", p.ws);
  }
  const ino_t marked = inode(p.ws + "/marked");
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.remove(ws.get(), "marked", "marked") == 0);
  CHECK(spares.remove(ws.get(), "other", "other") == 0);
  CHECK_FALSE(exists(p.ws + "/marked"));
  CHECK_FALSE(exists(p.ws + "/other"));
  CHECK(inodes_in(p.spares) == std::set<ino_t>{marked});
}

TEST_CASE("spares that are not empty directories of ours are left where they are and never used") {
  Places p;
  REQUIRE(::mkdir(p.spares.c_str(), 0700) == 0);
  REQUIRE(::mkdir((p.spares + "/full").c_str(), 0755) == 0);
  std::ofstream(p.spares + "/full/f") << "x";
  REQUIRE(::symlink("/etc", (p.spares + "/link").c_str()) == 0);
  std::ofstream(p.spares + "/file") << "x";
  if (::geteuid() == 0) {  // only root can give another user a directory
    REQUIRE(::mkdir((p.spares + "/other-owner").c_str(), 0755) == 0);
    REQUIRE(::chown((p.spares + "/other-owner").c_str(), 1, 1) == 0);
  }
  const std::set<ino_t> before = inodes_in(p.spares);
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.make(ws.get(), "new", 0755) == 0);
  struct stat st;
  REQUIRE(::lstat((p.ws + "/new").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(before.count(st.st_ino) == 0);
  CHECK(inodes_in(p.spares) == before);
  CHECK(exists(p.spares + "/full/f"));
}

TEST_CASE("a name that exists: make says EEXIST as mkdirat does, and the spare stays") {
  Places p;
  REQUIRE(::mkdir(p.spares.c_str(), 0700) == 0);
  REQUIRE(::mkdir((p.spares + "/s").c_str(), 0755) == 0);
  REQUIRE(::mkdir((p.ws + "/taken").c_str(), 0755) == 0);
  std::ofstream(p.ws + "/taken/mine") << "x";
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.make(ws.get(), "taken", 0755) == EEXIST);
  CHECK(exists(p.spares + "/s"));
  CHECK(exists(p.ws + "/taken/mine"));
}

TEST_CASE("at most kMaxSpares are kept: past them a directory is removed") {
  Places p;
  REQUIRE(::mkdir(p.spares.c_str(), 0700) == 0);
  for (size_t i = 0; i < SpareDirs::kMaxSpares; ++i)
    REQUIRE(::mkdir((p.spares + "/" + std::to_string(i)).c_str(), 0755) == 0);
  REQUIRE(::mkdir((p.ws + "/x").c_str(), 0755) == 0);
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.remove(ws.get(), "x", "x") == 0);
  CHECK_FALSE(exists(p.ws + "/x"));
  CHECK(inodes_in(p.spares).size() == SpareDirs::kMaxSpares);
}

TEST_CASE("on another filesystem than the spares, directories are made and removed as before") {
  // /dev/shm is a tmpfs of its own wherever /tmp is: a rename between
  // them fails with EXDEV.
  Places p;
  char t[] = "/dev/shm/pj-unit-test.XXXXXX";
  REQUIRE(::mkdtemp(t));
  const std::string other = t;
  REQUIRE(::mkdir((other + "/x").c_str(), 0755) == 0);
  {
    UniqueFd state = open_dir(p.state), elsewhere = open_dir(other);
    SpareDirs spares(state.get(), p.state);
    CHECK(spares.remove(elsewhere.get(), "x", "x") == 0);
    CHECK_FALSE(exists(other + "/x"));
    CHECK(inodes_in(p.spares).empty());
  }
  REQUIRE(::mkdir((p.ws + "/y").c_str(), 0755) == 0);
  {
    UniqueFd state = open_dir(p.state), ws = open_dir(p.ws), elsewhere = open_dir(other);
    SpareDirs spares(state.get(), p.state);
    REQUIRE(spares.remove(ws.get(), "y", "y") == 0);
    REQUIRE(inodes_in(p.spares).size() == 1);
    CHECK(spares.make(elsewhere.get(), "z", 0755) == 0);
    CHECK(exists(other + "/z"));
    CHECK(inodes_in(p.spares).size() == 1);  // the spare stays for its own filesystem
  }
  std::filesystem::remove_all(other);
}

TEST_CASE("a spares directory that others may write is not used") {
  Places p;
  REQUIRE(::mkdir(p.spares.c_str(), 0700) == 0);
  REQUIRE(::chmod(p.spares.c_str(), 0777) == 0);
  REQUIRE(::mkdir((p.ws + "/x").c_str(), 0755) == 0);
  UniqueFd state = open_dir(p.state), ws = open_dir(p.ws);
  SpareDirs spares(state.get(), p.state);
  CHECK(spares.remove(ws.get(), "x", "x") == 0);
  CHECK_FALSE(exists(p.ws + "/x"));
  CHECK(inodes_in(p.spares).empty());
}
