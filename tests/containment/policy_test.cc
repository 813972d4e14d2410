// Policy files in real jails: refused requests are really not applied,
// accepted ones really are, and bad files stop the run.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

void project_file(const Sandbox& sb, const std::string& text) {
  std::filesystem::create_directories(sb.ws + "/.pi");
  write_file(sb.ws + "/.pi/jail.toml", text);
}

}  // namespace

TEST_CASE("a refused project request is not applied, and is reported") {
  Sandbox sb;
  project_file(sb,
               "[filesystem]\nwrite = [\"~/.ssh\", \"" + sb.outside + "\"]\n[hardening]\nunsafe_allow_ptrace = true\n");
  auto w = sb.probe({"write", sb.home + "/.ssh/authorized_keys"});
  CHECK(trim(w.out) != "ok");
  CHECK_FALSE(read_file(sb.home + "/.ssh/id_ed25519").empty());
  CHECK_FALSE(exists(sb.home + "/.ssh/authorized_keys"));
  auto o = sb.probe({"write", sb.outside + "/x"});
  CHECK(trim(o.out) != "ok");
  CHECK_FALSE(exists(sb.outside + "/x"));
  auto ptrace = sb.probe({"syscall", "101", "0"});  // ptrace(PTRACE_TRACEME)
  CHECK(trim(ptrace.out) == "EPERM");
  // Reported on stderr (the probe runs with -q, so run one without it).
  auto loud = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(loud.status == 0);
  CHECK(loud.err.find(".pi/jail.toml:2:10: write ~/.ssh: " + sb.home +
                      "/.ssh is outside the write limit (limit: profile pi (built in):") != std::string::npos);
  CHECK(loud.err.find("unsafe_allow_ptrace: unsafe_* switches are for operators only") != std::string::npos);
}

TEST_CASE("an accepted project request is applied: read-only within the operator's limits") {
  Sandbox sb;
  std::string config = sb.base + "/operator.toml";
  // The probe is a program like any other: within the limit, or it is not granted (see below).
  write_file(config, "[limits]\nread = [\"${workspace}\", \"" + sb.outside + "\", \"" + probe_dir() + "\"]\n");
  project_file(sb, "[filesystem]\nread = [\"" + sb.outside + "\"]\nread_only = [\"docs\"]\n");
  std::filesystem::create_directories(sb.ws + "/docs");
  write_file(sb.ws + "/docs/readme", "doc\n");
  auto r = sb.probe({"read", sb.outside + "/secret"}, {"--config", config});
  CHECK(trim(r.out) == "ok 15");
  auto w = sb.probe({"write", sb.outside + "/secret"}, {"--config", config});
  CHECK(trim(w.out) == "EROFS");
  auto doc = sb.probe({"write", sb.ws + "/docs/readme"}, {"--config", config});
  CHECK(trim(doc.out) == "EROFS");
  CHECK(read_file(sb.ws + "/docs/readme") == "doc\n");
  auto other = sb.probe({"write", sb.ws + "/elsewhere"}, {"--config", config});
  CHECK(trim(other.out) == "ok");
  // Without the operator's wider limit, the same request is refused.
  auto refused = sb.probe({"read", sb.outside + "/secret"});
  CHECK(trim(refused.out) == "ENOENT");
}

TEST_CASE("the system operator's read limit bounds the program: outside it the run stops, naming the need") {
  Sandbox sb;
  // A copy of the probe of its own, outside the system directories
  // (which show what is in them whatever the limit).
  const std::string tools = sb.base + "/tools", prog = tools + "/pj-probe";
  std::filesystem::create_directories(tools);
  std::filesystem::copy_file(probe(), prog);
  std::filesystem::permissions(prog, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                         std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                         std::filesystem::perms::others_exec);
  const std::string config = sb.base + "/operator.toml";
  write_file(config, "[limits]\nread = [\"${workspace}\"]\n");
  const std::string flag = sb.ws + "/ran";
  auto o = run({pi_jail(), "-w", sb.ws, "--config", config, "--", prog, "write", flag}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(o.err.find("runtime: " + prog + " itself: the program needs " + prog +
                   " read-only, and it cannot be granted: " + prog + " is outside the system operator's read limit") !=
        std::string::npos);
  CHECK(o.err.find("(limit: " + config + ":2:9)") != std::string::npos);
  CHECK_FALSE(exists(flag));

  // Within the limit it runs.
  write_file(config, "[limits]\nread = [\"${workspace}\", \"" + tools + "\"]\n");
  auto ok = run({pi_jail(), "-w", sb.ws, "--config", config, "--", prog, "write", flag}, {"HOME=" + sb.home});
  CAPTURE(ok.err);
  CHECK(ok.status == 0);
  CHECK(trim(ok.out) == "ok");
  CHECK(exists(flag));
}

TEST_CASE("Pi's agent dir set outside the system operator's write limit stops the run, naming it") {
  Sandbox sb;
  const std::string agent = sb.outside + "/agent", flag = sb.ws + "/ran";
  const std::string config = sb.base + "/operator.toml";
  write_file(config, "[limits]\nwrite = [\"${workspace}\"]\n");
  const std::vector<std::string> env{"HOME=" + sb.home, "PI_CODING_AGENT_DIR=" + agent};
  auto o =
      run({pi_jail(), "-w", sb.ws, "--config", config, "--allow-read", probe_dir(), "--", probe(), "write", flag}, env);
  CHECK(o.status == 125);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(o.err.find("Pi's agent dir " + agent +
                   " ($PI_CODING_AGENT_DIR, else ~/.pi/agent) is outside the system "
                   "operator's write limit (limit: " +
                   config + ":2:10)") != std::string::npos);
  CHECK_FALSE(exists(flag));

  // Within the limit it runs, and Pi's sessions are written there.
  write_file(config, "[limits]\nwrite = [\"${workspace}\", \"" + sb.outside + "\"]\n");
  const std::string session = agent + "/sessions/" + pi_session_dir(sb.ws) + "/s";
  auto ok = run(
      {pi_jail(), "-w", sb.ws, "--config", config, "--allow-read", probe_dir(), "--", probe(), "write", session}, env);
  CAPTURE(ok.err);
  CHECK(ok.status == 0);
  CHECK(trim(ok.out) == "ok");
  CHECK(exists(session));
}

TEST_CASE("broken policy files stop the run with every problem and its position") {
  Sandbox sb;
  std::string flag = sb.ws + "/ran";
  std::string config = sb.base + "/operator.toml";
  write_file(config, "[filesystem]\nread = 3\nbogus = []\n[network]\nallow = [\"bad host\"]\n");
  auto o = run({pi_jail(), "-w", sb.ws, "--config", config, "--", "/usr/bin/touch", flag}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("nothing was run") != std::string::npos);
  CHECK(o.err.find(config + ":2:8: filesystem.read must be an array of strings") != std::string::npos);
  CHECK(o.err.find(config + ":3:1: unknown key \"bogus\"") != std::string::npos);
  CHECK(o.err.find(config + ":5:10: bad network pattern \"bad host\"") != std::string::npos);
  CHECK_FALSE(exists(flag));

  auto missing = run({pi_jail(), "-w", sb.ws, "--config", sb.base + "/none.toml", "--", "/usr/bin/touch", flag},
                     {"HOME=" + sb.home});
  CHECK(missing.status == 125);
  CHECK(missing.err.find("none.toml: cannot read") != std::string::npos);

  project_file(sb, "[filesystem\n");
  auto broken = run({pi_jail(), "-w", sb.ws, "--", "/usr/bin/touch", flag}, {"HOME=" + sb.home});
  CHECK(broken.status == 125);
  CHECK(broken.err.find(".pi/jail.toml:1:12:") != std::string::npos);
  CHECK_FALSE(exists(flag));
  auto ignored =
      run({pi_jail(), "-w", sb.ws, "--no-project-config", "--", "/usr/bin/touch", flag}, {"HOME=" + sb.home});
  CHECK(ignored.status == 0);

  std::filesystem::remove(sb.ws + "/.pi/jail.toml");
  ::symlink("/etc/passwd", (sb.ws + "/.pi/jail.toml").c_str());
  auto linked = run({pi_jail(), "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(linked.status == 125);
  CHECK(linked.err.find("is a symlink") != std::string::npos);
}

TEST_CASE("an operator can make excess project requests an error") {
  Sandbox sb;
  std::string config = sb.base + "/operator.toml";
  write_file(config, "[policy]\non_excess = \"error\"\n");
  project_file(sb, "[network]\nallow = [\"evil.example\"]\n");
  auto o = run({pi_jail(), "-w", sb.ws, "--config", config, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find("on_excess = \"error\"") != std::string::npos);
}

TEST_CASE("explain on a fresh workspace says where each rule came from") {
  Sandbox sb;
  auto o = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "explain", "-w", sb.ws, "--allow-read", sb.outside},
               {"HOME=" + sb.home});
  CHECK(o.status == 0);
  CHECK(o.out.find("profile                profile pi (built in)") != std::string::npos);
  CHECK(o.out.find("system          /usr                                          profile pi (built in):") !=
        std::string::npos);
  CHECK(o.out.find("read-only       " + sb.outside) != std::string::npos);
  CHECK(o.out.find("--allow-read") != std::string::npos);
  CHECK(o.out.find(sb.ws + "/.pi/jail.toml  (absent)") != std::string::npos);
  auto j = run({pi_jail(), "explain", "--json", "-w", sb.ws}, {"HOME=" + sb.home});
  CHECK(j.status == 0);
  CHECK(j.out.find("\"schema\": \"pi-jail-explain/1\"") != std::string::npos);
  CHECK(j.out.find("\"backend\": \"linux\"") != std::string::npos);  // which jail would run it
  auto v = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "explain", "-v", "-w", sb.ws}, {"HOME=" + sb.home});
  CHECK(v.status == 0);  // the policy and then the jail's view, planned but not built
  CHECK(v.out.find("# filesystem view (in mount order)") != std::string::npos);
  CHECK(v.out.find("seccomp: ") != std::string::npos);
}

TEST_CASE("a symlink where a protected path should be stops the run: it could not be kept read-only") {
  Sandbox sb;
  std::string flag = sb.ws + "/ran";
  write_file(sb.outside + "/real-envrc", "export X=1\n");
  ::symlink((sb.outside + "/real-envrc").c_str(), (sb.ws + "/.envrc").c_str());
  auto o = run({pi_jail(), "-w", sb.ws, "--", "/usr/bin/touch", flag}, {"HOME=" + sb.home});
  CHECK(o.status == 125);
  CHECK(o.err.find(sb.ws + "/.envrc is a symlink") != std::string::npos);
  CHECK_FALSE(exists(flag));
}

TEST_CASE("what a project file asks for reaches the terminal escaped: refusals, errors and explain") {
  Sandbox sb;
  // TOML's \u escapes put ESC and BEL into the values themselves.
  project_file(sb, "[filesystem]\nwrite = [\"/etc/x\\u001b]0;owned\\u0007\"]\n");
  auto refused = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(refused.status == 0);
  CAPTURE(refused.err);
  CHECK(refused.err.find("refused project file request") != std::string::npos);
  CHECK(refused.err.find("/etc/x\\x1b]0;owned\\x07") != std::string::npos);
  auto explained = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "explain", "-w", sb.ws}, {"HOME=" + sb.home});
  CAPTURE(explained.out);
  CHECK(explained.out.find("/etc/x\\x1b]0;owned\\x07") != std::string::npos);
  project_file(sb, "[network]\nallow = [\"evil\\u001b[2J.example\"]\n");
  auto bad = run({"/usr/bin/env", "-C", sb.ws, pi_jail(), "-w", sb.ws, "--", "/bin/true"}, {"HOME=" + sb.home});
  CHECK(bad.status == 125);
  CAPTURE(bad.err);
  CHECK(bad.err.find("bad network pattern \"evil\\x1b[2J.example\"") != std::string::npos);
  for (const auto& text : {refused.err, explained.out, explained.err, bad.err}) {
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find('\x07') == std::string::npos);
  }
}
