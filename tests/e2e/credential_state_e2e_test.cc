// The real Pi with its credentials outside the jail (the
// supervisor's side): the host's ANTHROPIC_API_KEY and auth.json tokens
// reach the jail only as placeholders (Pi's environment, its auth.json,
// /proc/<pi>/environ read by a sibling, Pi's whole memory read from the
// host); Pi's model call (a provider whose apiKey names the variable,
// bound by the operator to an HTTPS stand-in) arrives with the real key.
#include <doctest/doctest.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "harness.h"
#include "pi_world.h"
#include "text.h"

using namespace pj::test;

namespace {

// The host PID of the process that is `inner` in its own PID namespace
// and works in `cwd` (Pi sets its process title: its command line says
// only "pi"), or -1.
pid_t find_process(pid_t inner, const std::string& cwd) {
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    char link[4096];
    ssize_t n = ::readlink(("/proc/" + std::string(e->d_name) + "/cwd").c_str(), link, sizeof link - 1);
    if (n <= 0 || std::string(link, static_cast<size_t>(n)) != cwd) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.starts_with("NSpid:") && line.ends_with("\t" + std::to_string(inner))) found = pid;
  }
  if (d) ::closedir(d);
  return found;
}

// Every readable mapping of `pid`'s memory; how many bytes were read.
size_t dump_memory(pid_t pid, std::string& out) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  int mem = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (mem < 0) return 0;
  std::string line;
  size_t total = 0;
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
    if (line.find("[vvar]") != std::string::npos || hi - lo > (size_t{1} << 30)) continue;
    std::string buf(hi - lo, '\0');
    ssize_t n = ::pread(mem, buf.data(), buf.size(), static_cast<off_t>(lo));
    if (n > 0) {
      out.append(buf.data(), static_cast<size_t>(n));
      total += static_cast<size_t>(n);
    }
  }
  ::close(mem);
  return total;
}

}  // namespace

TEST_CASE(
    "the real Pi holds only placeholders (environment, auth.json, /proc/<pi>/environ, its memory); its model "
    "call arrives with the real key") {
  PiWorld w("[]");
  const std::string real = "sk-ant-api03-" + unique_token() + "E2EREALkey0123456789abcdefghijklmnopqrstuvwx";
  const std::string access = "sk-ant-oat01-" + unique_token() + "E2EREALaccess0123456789abcdefghijklmnopqrst";
  const std::string refresh = "sk-ant-ort01-" + unique_token() + "E2EREALrefresh0123456789abcdefghijklmnopqr";
  const auto certs = TestCerts::signed_by_ca(w.sb.base, "model.pem", {"IP:127.0.0.1"});
  TlsModelServer server(w, certs, "tls-model");
  const std::string& port = server.port;
  // Pi's provider takes its key from ANTHROPIC_API_KEY; the operator binds
  // Anthropic's credentials to the stand-in.
  write_file(w.agent + "/models.json", R"({"providers": {"scripted": {"baseUrl": "https://127.0.0.1:)" + port +
                                           R"(/v1", "api": "openai-completions", "apiKey": "$ANTHROPIC_API_KEY", )"
                                           R"("models": [{"id": "m"}]}}})");
  write_file(w.agent + "/auth.json", R"({"anthropic":{"type":"oauth","refresh":")" + refresh + R"(","access":")" +
                                         access + R"(","expires":1767225600000}})");
  sh_ok("mkdir -p " + w.sb.home + "/.config/pi-jail && printf '[credentials]\\nbind = { anthropic = [\"127.0.0.1:" +
        port + "\"] }\\n' > " + w.sb.home + "/.config/pi-jail/policy.toml && chmod -R a+rX " + w.sb.home + "/.config");
  // The bash tool (a sibling of nothing but Pi's child) shows what it can
  // see, then waits until the test has read Pi's memory from the host.
  w.script("[" +
           bash("env; cat ~/.pi/agent/auth.json; tr '\\\\0' '\\\\n' < /proc/$PPID/environ; echo $PPID > ready.tmp; mv "
                "ready.tmp ready; "
                "i=0; while [ ! -e dumped ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo tool-end") +
           "]");
  auto env = w.env();
  env.push_back("ANTHROPIC_API_KEY=" + real);
  pid_t pi = spawn(w.pi_argv({"--allow-net", "127.0.0.1:" + port, "--test-upstream-ca", certs.ca}), env);
  REQUIRE(eventually([&] { return exists(w.sb.ws + "/ready"); }));
  const pid_t node = find_process(std::atoi(read_file(w.sb.ws + "/ready").c_str()), w.sb.ws);
  REQUIRE(node > 0);
  std::string memory;
  const size_t read = dump_memory(node, memory);
  write_file(w.sb.ws + "/dumped", "");
  const int status = wait_status_guarded(pi);
  server.stop();
  CHECK(status == 0);
  CHECK(read > (size_t{1} << 20));  // Node's heap was read
  for (const auto& secret : {real, access, refresh}) {
    CAPTURE(secret);
    CHECK(memory.find(secret.substr(13)) == std::string::npos);
  }
  CHECK(memory.find("sk-ant-api03-") != std::string::npos);  // Pi holds the placeholder
  const std::string seen = server.log();
  // The model calls carried the real key; what the tool saw (sent back to
  // the model in the next request) held placeholders only.
  CHECK(seen.find("\"auth\": \"Bearer " + real + "\"") != std::string::npos);
  CHECK(seen.find("ANTHROPIC_API_KEY=sk-ant-api03-") != std::string::npos);
  CHECK(seen.find("tool-end") != std::string::npos);
  CHECK(seen.find("\\\"access\\\": \\\"sk-ant-oat01-") != std::string::npos);
  CHECK(seen.find(access.substr(13)) == std::string::npos);
  CHECK(seen.find(refresh.substr(13)) == std::string::npos);
  // Only in the Authorization the server received.
  CHECK(count(seen, real.substr(13)) == count(seen, "\"auth\": \"Bearer " + real));
}
