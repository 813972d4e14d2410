// The backend-neutral view: the one probe of host paths (on a real
// temporary tree) and the view both backends translate (on invented facts).
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "view/facts.h"

using namespace pj;
using view::PathFact;

namespace {

// A private temporary directory, resolved (on macOS /tmp is a link).
struct TempTree {
  std::string root;
  TempTree() {
    std::string tmpl = "/tmp/pj-view-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    char real[PATH_MAX];
    REQUIRE(::realpath(tmpl.c_str(), real) != nullptr);
    root = real;
  }
  ~TempTree() { std::system(("rm -rf '" + root + "'").c_str()); }
};

}  // namespace

TEST_CASE("view probe: kinds, links, and the real path of an absent path") {
  TempTree t;
  const std::string r = t.root;
  REQUIRE(::mkdir((r + "/real").c_str(), 0755) == 0);
  { std::ofstream(r + "/real/file") << "x"; }
  REQUIRE(::symlink("real", (r + "/alias").c_str()) == 0);
  REQUIRE(::symlink("nowhere", (r + "/dangling").c_str()) == 0);
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = r + "/sock";
  REQUIRE(sock.size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);

  auto facts = view::probe_paths({r + "/real", r + "/real/file", r + "/alias", r + "/alias/gone/deeper",
                                  r + "/dangling", sock, r + "/real"});
  ::close(s);
  CHECK(facts.size() == 6);

  const PathFact& dir = view::fact(facts, r + "/real");
  CHECK(dir.kind == PathFact::Kind::directory);
  CHECK_FALSE(dir.is_symlink);
  CHECK(dir.resolved == r + "/real");
  CHECK(dir.ino != 0);
  CHECK(view::fact(facts, r + "/real/file").kind == PathFact::Kind::file);

  const PathFact& alias = view::fact(facts, r + "/alias");
  CHECK(alias.is_symlink);
  CHECK(alias.link_target == "real");
  CHECK(alias.kind == PathFact::Kind::directory);
  CHECK(alias.resolved == r + "/real");
  CHECK(alias.ino == dir.ino);

  // Absent below a link: the nearest existing ancestor's real path, joined
  // with the rest (what Seatbelt matches).
  const PathFact& gone = view::fact(facts, r + "/alias/gone/deeper");
  CHECK(gone.kind == PathFact::Kind::absent);
  CHECK_FALSE(gone.is_symlink);
  CHECK(gone.resolved == r + "/real/gone/deeper");

  // A dangling link stays unresolved: the planners refuse it.
  const PathFact& dangling = view::fact(facts, r + "/dangling");
  CHECK(dangling.is_symlink);
  CHECK(dangling.kind == PathFact::Kind::absent);
  CHECK(dangling.resolved.empty());

  CHECK(view::fact(facts, sock).kind == PathFact::Kind::socket);
  CHECK_FALSE(view::usable(view::fact(facts, sock)));

  // Not probed: absent.
  CHECK(view::fact(facts, r + "/never-asked").kind == PathFact::Kind::absent);
}
