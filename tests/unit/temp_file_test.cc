// util::TempFile: the one atomic replace, and the clean-up of what a
// writer killed mid-write leaves.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "util/random.h"
#include "util/temp_file.h"
#include "util/unique_fd.h"

using namespace pj;

namespace {

struct Dir {
  std::string path = std::filesystem::temp_directory_path() / fmt::format("pj-temp-file-test-{:x}", util::random_u64());
  util::UniqueFd fd;
  Dir() {
    std::filesystem::create_directory(path);
    fd = util::UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  ~Dir() { std::filesystem::remove_all(path); }
  void touch(const std::string& name) const { std::ofstream(path + "/" + name) << "x"; }
  bool has(const std::string& name) const {
    return std::filesystem::exists(std::filesystem::symlink_status(path + "/" + name));
  }
};

}  // namespace

TEST_CASE("a temporary file is renamed over its target, and removed when it was not") {
  Dir d;
  d.touch("settings");
  std::string left;
  {
    auto tmp = util::TempFile::create(d.fd.get(), "settings");
    REQUIRE(tmp.ok());
    REQUIRE(tmp->fill("new", util::Durability::page_cache).ok());
    REQUIRE(tmp->rename_over("settings").ok());
    auto other = util::TempFile::create(d.fd.get(), "settings");
    REQUIRE(other.ok());
    left = other->name();
    CHECK(d.has(left));
  }
  CHECK_FALSE(d.has(left));
  std::ifstream in(d.path + "/settings");
  std::string text;
  in >> text;
  CHECK(text == "new");
}

TEST_CASE("the files a killed writer left are removed, and nothing else") {
  Dir d;
  d.touch("placeholders.0123456789abcdef.tmp");  // left by a killed writer
  d.touch("placeholders");                       // the file itself
  d.touch("placeholders.tmp");                   // not a name create() makes
  d.touch("placeholders.0123456789ABCDEF.tmp");
  d.touch("placeholders.0123456789abcdef.tmp.x");
  d.touch("other.0123456789abcdef.tmp");  // another file's
  std::filesystem::create_directory(d.path + "/placeholders.fedcba9876543210.tmp");
  std::filesystem::create_symlink("/etc/passwd", d.path + "/placeholders.1111111111111111.tmp");
  util::TempFile::remove_abandoned(d.fd.get(), "placeholders");
  CHECK_FALSE(d.has("placeholders.0123456789abcdef.tmp"));
  for (const char* kept :
       {"placeholders", "placeholders.tmp", "placeholders.0123456789ABCDEF.tmp", "placeholders.0123456789abcdef.tmp.x",
        "other.0123456789abcdef.tmp", "placeholders.fedcba9876543210.tmp", "placeholders.1111111111111111.tmp"})
    CHECK_MESSAGE(d.has(kept), kept);
  CHECK(std::filesystem::exists("/etc/passwd"));
}
