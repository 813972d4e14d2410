// Pi's sessions per workspace: a jail sees and writes the session
// directories of its own workspace (its subdirectories and the starting
// directory included) and nothing of any other project's, which `pi -c`
// or /resume there would load later.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

namespace fs = std::filesystem;

std::string header(const std::string& cwd) {
  return R"({"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":")" + cwd + "\"}\n";
}

std::string listing(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += n + "\n";
  return out;
}

// /bin/sh -c `script` in a jail on sb.ws, from `cwd` (default sb.ws),
// with pi-jail's warnings on stderr (Sandbox::jail passes -q).
Outcome sh(const Sandbox& sb, const std::string& script, const std::string& cwd = "") {
  return run({"/usr/bin/env", "-C", cwd.empty() ? sb.ws : cwd, pi_jail(), "-w", sb.ws, "--", "/bin/sh", "-c", script},
             {"HOME=" + sb.home});
}

}  // namespace

TEST_CASE("a jail on one workspace can neither list, read, append to nor add another project's sessions") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", sessions = agent + "/sessions";
  const std::string other = sb.outside + "/project-b", theirs = sessions + "/" + pi_session_dir(other);
  fs::create_directories(other);
  fs::create_directories(theirs);
  const std::string secret = "pasted-secret-" + unique_token();
  write_file(theirs + "/b.jsonl", header(other) + "{\"type\":\"message\",\"text\":\"" + secret + "\"}\n");
  const std::string before = read_file(theirs + "/b.jsonl");
  const std::string mine = sessions + "/" + pi_session_dir(sb.ws);

  auto o = sh(sb, "ls -a " + sessions + "; echo ==; cat " + sessions +
                      "/*/*.jsonl; echo ==; "
                      "cat " +
                      theirs +
                      "/b.jsonl && echo READ-B; "
                      "echo planted >> " +
                      theirs +
                      "/b.jsonl && echo APPENDED-B; "
                      "mkdir -p " +
                      theirs + " && echo planted > " + theirs +
                      "/new.jsonl && echo ADDED-B; "
                      "mkdir -p " +
                      sessions + "/" + pi_session_dir(sb.outside + "/project-c") +
                      " && echo MADE-C; "
                      "echo mine > " +
                      mine + "/a.jsonl && echo WROTE-A");
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  // Its own directory is there and written in place; B's is absent.
  CHECK(o.out.find(pi_session_dir(sb.ws)) != std::string::npos);
  CHECK(o.out.find(pi_session_dir(other)) == std::string::npos);
  CHECK(o.out.find(secret) == std::string::npos);
  CHECK(o.out.find("READ-B") == std::string::npos);
  CHECK(o.out.find("WROTE-A") != std::string::npos);
  CHECK(read_file(mine + "/a.jsonl") == "mine\n");
  // Whatever it did to B's name stayed in the jail: the host's B is as it was.
  CHECK(read_file(theirs + "/b.jsonl") == before);
  CHECK(listing(theirs) == "b.jsonl\n");
  CHECK_FALSE(exists(sessions + "/" + pi_session_dir(sb.outside + "/project-c")));
  std::vector<std::string> expected{pi_session_dir(other), pi_session_dir(sb.ws)};
  std::sort(expected.begin(), expected.end());
  CHECK(listing(sessions) == expected[0] + "\n" + expected[1] + "\n");
  // And it is said that what it made there was not kept.
  CHECK(o.err.find("not kept") != std::string::npos);
}

TEST_CASE("a jail started in a subdirectory sees its own sessions, the workspace's, and no other project's") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", sessions = agent + "/sessions";
  const std::string sub = sb.ws + "/pkg/tool", other = sb.outside + "/project-b";
  fs::create_directories(sub);
  fs::create_directories(sb.ws + "/docs");
  fs::create_directories(other);
  for (const auto& [dir, name] : std::vector<std::pair<std::string, std::string>>{
           {sb.ws, "ws.jsonl"}, {sb.ws + "/docs", "docs.jsonl"}, {other, "b.jsonl"}}) {
    fs::create_directories(sessions + "/" + pi_session_dir(dir));
    write_file(sessions + "/" + pi_session_dir(dir) + "/" + name, header(dir));
  }
  auto o = sh(sb,
              "ls " + sessions + "; echo ==; ls " + sessions +
                  "/*/; "
                  "echo here > " +
                  sessions + "/" + pi_session_dir(sub) + "/sub.jsonl && echo WROTE-SUB",
              sub);
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find(pi_session_dir(sub)) != std::string::npos);  // made for this run
  CHECK(o.out.find(pi_session_dir(sb.ws)) != std::string::npos);
  CHECK(o.out.find("docs.jsonl") != std::string::npos);  // a subdirectory of the workspace
  CHECK(o.out.find(pi_session_dir(other)) == std::string::npos);
  CHECK(o.out.find("b.jsonl") == std::string::npos);
  CHECK(read_file(sessions + "/" + pi_session_dir(sub) + "/sub.jsonl") == "here\n");
}

TEST_CASE(
    "a session directory another project shares by name is shown only when all its sessions are this workspace's") {
  Sandbox sb;
  const std::string agent = sb.home + "/.pi/agent", sessions = agent + "/sessions";
  // base/ws and base-ws have the same name under sessions/.
  const std::string twin = sb.base + "-ws";
  fs::create_directories(twin);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{twin};
  REQUIRE(pi_session_dir(twin) == pi_session_dir(sb.ws));
  const std::string shared = sessions + "/" + pi_session_dir(sb.ws);
  fs::create_directories(shared);
  write_file(shared + "/mine.jsonl", header(sb.ws));
  auto ok = sh(sb, "cat " + shared + "/mine.jsonl >/dev/null && echo SEEN");
  CHECK(ok.out.find("SEEN") != std::string::npos);

  write_file(shared + "/twin.jsonl", header(twin) + "twin-secret\n");
  auto no = sh(sb, "cat " + shared + "/twin.jsonl; ls " + shared + " | grep -c jsonl; echo x >> " + shared +
                       "/twin.jsonl; true");
  CAPTURE(no.err);
  CHECK(no.status == 0);
  CHECK(no.out.find("twin-secret") == std::string::npos);
  CHECK(trim(no.out) == "0");
  CHECK(read_file(shared + "/twin.jsonl") == header(twin) + "twin-secret\n");
  CHECK(no.err.find("not shown in this jail") != std::string::npos);
  CHECK(no.err.find(twin) != std::string::npos);
}

TEST_CASE("a planted link in place of the workspace's session directory stops nothing and leads nowhere") {
  Sandbox sb;
  const std::string sessions = sb.home + "/.pi/agent/sessions";
  fs::create_directories(sessions);
  fs::create_directory_symlink(sb.home + "/.ssh", sessions + "/" + pi_session_dir(sb.ws));
  auto o = sh(sb, "ls " + sessions + "/" + pi_session_dir(sb.ws) + "/; echo x > " + sessions + "/" +
                      pi_session_dir(sb.ws) + "/planted && echo WROTE");
  CAPTURE(o.err);
  CHECK(o.out.find("id_") == std::string::npos);  // the canary key in home/.ssh
  CHECK_FALSE(exists(sb.home + "/.ssh/planted"));
  CHECK(o.err.find("not a directory") != std::string::npos);
}

TEST_CASE("sessions a child pi keeps for another directory of the workspace reach the host; planted links do not") {
  Sandbox sb;
  const std::string sessions = sb.home + "/.pi/agent/sessions";
  const std::string sub = sb.ws + "/tools", made = sessions + "/" + pi_session_dir(sub);
  fs::create_directories(sub);
  auto o = sh(sb, "mkdir " + made + " && echo child > " + made + "/c.jsonl && ln -s " + sb.home + "/.bashrc " + made +
                      "/link.jsonl && echo MADE");
  CAPTURE(o.err);
  CHECK(o.out.find("MADE") != std::string::npos);
  CHECK(read_file(made + "/c.jsonl") == "child\n");
  CHECK_FALSE(fs::exists(fs::symlink_status(made + "/link.jsonl")));
  CHECK(o.err.find("kept (made in this run for a directory of this workspace)") != std::string::npos);
  // The next run, started there, sees it in place.
  auto next = sh(sb, "cat " + made + "/c.jsonl", sub);
  CHECK(trim(next.out) == "child");
}
