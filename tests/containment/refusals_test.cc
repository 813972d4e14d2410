// What the jail is told about the requests the network filter refused,
// besides the exit summary: the status line of the 403, and the list of
// the run's refusals in a file the jail reads but cannot change.
#include <doctest/doctest.h>

#include "harness.h"

using namespace pj::test;

namespace {

const std::string kNoProxyEnv = "env -u NO_PROXY -u no_proxy ";

// Waits (a guard, not a timing) until the list names `what`, then prints it.
std::string show_list_once_it_names(const std::string& what) {
  return "for i in $(seq 50); do grep -q '" + what +
         "' \"$PI_JAIL_REFUSALS\" && break; sleep 0.1; done; "
         "cat \"$PI_JAIL_REFUSALS\"; ";
}

}  // namespace

TEST_CASE("a refused request's status line names the host and the option that allows it") {
  Sandbox sb;
  auto o = sb.jail({"/bin/sh", "-c",
                    kNoProxyEnv + "curl -s -D - -o /dev/null -x http://127.0.0.1:3128 http://blocked.example/; " +
                        kNoProxyEnv + "curl -s -v -p -x http://127.0.0.1:3128 https://blocked.example/ 2>&1 | " +
                        "grep '< HTTP/'"});
  CAPTURE(o.err);
  CHECK(o.out.find("HTTP/1.1 403 pi-jail refused blocked.example:80 (allow: --allow-net blocked.example:80)\r\n") !=
        std::string::npos);
  CHECK(o.out.find("< HTTP/1.1 403 pi-jail refused blocked.example:443 (allow: --allow-net blocked.example:443)") !=
        std::string::npos);
  // The README's troubleshooting quotes the same status line (for example.com).
  CHECK(read_file(data_dir() + "/README.md")
            .find("\n| `HTTP/1.1 403 pi-jail refused example.com:443 (allow: --allow-net example.com:443)`") !=
        std::string::npos);
}

TEST_CASE("the jail reads the run's refusals so far, each with its fix, from a file it cannot change") {
  Sandbox sb;
  auto o = sb.jail({"/bin/sh", "-c",
                    "echo path=$PI_JAIL_REFUSALS; cat \"$PI_JAIL_REFUSALS\"; echo ---; " + kNoProxyEnv +
                        "curl -s -o /dev/null -x http://127.0.0.1:3128 http://blocked.example/; " + kNoProxyEnv +
                        "curl -s -o /dev/null -p -x http://127.0.0.1:3128 https://registry.npmjs.org/; " +
                        show_list_once_it_names("registry.npmjs.org") + "echo ---; " +
                        "echo planted > \"$PI_JAIL_REFUSALS\" 2>/dev/null; echo write=$?; "
                        "echo planted > /run/pi-jail/other 2>/dev/null; echo create=$?; "
                        "mv /run/pi-jail/refusals /run/pi-jail/gone 2>/dev/null; echo rename=$?; "
                        "rm -f /run/pi-jail/refusals 2>/dev/null; echo remove=$?; "
                        "chmod 777 /run/pi-jail 2>/dev/null; echo chmod=$?; "
                        "umount /run/pi-jail 2>/dev/null; echo umount=$?; "
                        "grep -c blocked.example \"$PI_JAIL_REFUSALS\""});
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.out.starts_with("path=/run/pi-jail/refusals\n# pi-jail: the network requests this run refused so far"));
  const auto before = o.out.substr(0, o.out.find("---"));
  CHECK(before.find("# (none yet)") != std::string::npos);
  const auto after = o.out.substr(o.out.find("---"));
  CHECK(after.find("\nblocked.example:80: refused; to allow: --allow-net blocked.example:80\n") != std::string::npos);
  CHECK(after.find("\nregistry.npmjs.org:443: refused; to allow: --allow-net-preset npm\n") != std::string::npos);
  for (const char* op : {"write", "create", "rename", "remove", "chmod", "umount"}) {
    CAPTURE(op);
    CHECK(after.find(std::string(op) + "=0\n") == std::string::npos);
    CHECK(after.find(std::string(op) + "=") != std::string::npos);
  }
  CHECK(o.out.ends_with("\n1\n"));  // the list is still the supervisor's
}

TEST_CASE("a host an operator denied is listed without an allow option, which would not outweigh the deny") {
  Sandbox sb;
  const std::string config = sb.outside + "/operator-policy.toml";
  write_file(config, "[network]\ndeny = [\"denied.example\"]\n");
  auto o = sb.jail({"/bin/sh", "-c",
                    kNoProxyEnv + "curl -s -D - -o /dev/null -x http://127.0.0.1:3128 http://denied.example/; " +
                        show_list_once_it_names("denied.example")},
                   {"--config", config});
  CAPTURE(o.err);
  CHECK(o.out.find("HTTP/1.1 403 Forbidden\r\n") != std::string::npos);
  CHECK(o.out.find("\ndenied.example:80: refused\n") != std::string::npos);
  CHECK(o.out.find("to allow") == std::string::npos);
  CHECK(o.out.find(config) == std::string::npos);  // the operator's file is not the jail's to see
}

TEST_CASE("the refusals directory is the run's own and is gone when the run ends") {
  Sandbox sb;
  const std::string state = sb.outside + "/state";
  auto o =
      sb.jail({"/bin/sh", "-c", "test -r \"$PI_JAIL_REFUSALS\" && echo readable"}, {}, "", {"XDG_STATE_HOME=" + state});
  CAPTURE(o.err);
  CHECK(o.out == "readable\n");
  CHECK(o.status == 0);
  CHECK(exists(state + "/pi-jail"));
  auto left = run({"/bin/sh", "-c", "ls " + state + "/pi-jail | grep -c '^jail-notes-'"});
  CHECK(trim(left.out) == "0");
}

// git says nothing of the jail when its remote is a path the jail does not
// see: the README's troubleshooting quotes git's line and names the grant.
TEST_CASE("git push to a bare repository outside the view: git's message is the README's, with --allow-write") {
  Sandbox sb;
  const std::string bare = sb.outside + "/app.git";
  REQUIRE(run({"/usr/bin/git", "init", "-q", "--bare", bare}).status == 0);
  auto o = sb.jail({"/bin/sh", "-c",
                    "git init -q . && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && "
                    "git push -q " +
                        bare + " HEAD:main"});
  CHECK(o.status != 0);
  const std::string said = "fatal: '" + bare + "' does not appear to be a git repository";
  CAPTURE(o.err);
  REQUIRE(o.err.find(said + "\n") != std::string::npos);
  const std::string readme = read_file(data_dir() + "/README.md");
  const size_t row = readme.find("\n| `fatal: '/home/me/remotes/app.git' does not appear to be a git repository`");
  REQUIRE(row != std::string::npos);
  CHECK(readme.find("`--allow-write /home/me/remotes/app.git`", row) < readme.find('\n', row + 1));
}
