// The real Pi with its key outside the jail (issue 17, the filter's
// side): Pi's provider talks HTTPS to a scripted model server with its own
// test CA (trusted by the filter through --test-upstream-ca, never by the
// jail); Pi holds only the placeholder; the server receives the real key.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "harness.h"
#include "pi_world.h"

using namespace pj::test;

namespace {

void sh(const std::string& cmd) {
  auto o = run({"/bin/sh", "-c", cmd});
  CAPTURE(cmd);
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
}

}  // namespace

TEST_CASE("Pi's model calls go out with the real key; Pi, its tools and its environment see only the placeholder") {
  PiWorld w("[]");
  const std::string ph = "sk-e2e-PH" + unique_token() + unique_token();
  const std::string real = "sk-e2e-REAL" + unique_token() + unique_token();
  // A test CA and the model server's certificate for 127.0.0.1.
  const std::string d = w.sb.base, ca = d + "/test-ca.pem", cert = d + "/model.pem";
  sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=pj-e2e-ca -days 2 -keyout " + ca +
     ".key -out " + ca + " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null && "
     "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout " + cert + ".key -out " +
     cert + ".csr 2>/dev/null && printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > " + cert +
     ".ext && openssl x509 -req -in " + cert + ".csr -CA " + ca + " -CAkey " + ca + ".key -CAcreateserial -days 2 -out " +
     cert + " -extfile " + cert + ".ext 2>/dev/null && chmod a+r " + d + "/*");
  const std::string log = d + "/tls-model.jsonl", portfile = d + "/tls-model.port";
  pid_t server = spawn({"/usr/bin/env", "PJ_MODEL_TLS_CERT=" + cert, "PJ_MODEL_TLS_KEY=" + cert + ".key",
                        "/usr/bin/python3", need_env("PJ_DATA_DIR") + "/model_server.py", d + "/script.json", log, portfile});
  REQUIRE(eventually([&] { return exists(portfile) && !read_file(portfile).empty(); }));
  const std::string port = trim(read_file(portfile));
  // Pi's provider: HTTPS, the placeholder as its key.
  write_file(w.agent + "/models.json", R"({"providers": {"scripted": {"baseUrl": "https://127.0.0.1:)" + port +
                                           R"(/v1", "api": "openai-completions", "apiKey": ")" + ph +
                                           R"(", "models": [{"id": "m"}]}}})");
  w.script("[" + bash("env; cat ~/.pi/agent/models.json") + "]");
  const std::string report = w.sb.outside + "/r.json";
  auto vars = w.env();
  vars.push_back("PJ_TEST_BIND=E2E_KEY=" + ph + "=" + real + "@127.0.0.1:" + port);
  auto o = run(w.pi_argv({"--allow-net", "127.0.0.1:" + port, "--test-upstream-ca", ca, "--report", report}), vars);
  ::kill(server, SIGTERM);
  wait_status(server);
  CAPTURE(o.err);
  CAPTURE(o.out);
  CHECK(o.status == 0);
  CHECK(o.out.find("done") != std::string::npos);
  const std::string seen = exists(log) ? read_file(log) : "";
  CAPTURE(seen);
  // Two model calls (the tool call, then the answer), each with the real key.
  size_t calls = 0;
  for (size_t at = 0; (at = seen.find("\"auth\": \"Bearer " + real + "\"", at)) != std::string::npos; ++at) ++calls;
  CHECK(calls == 2);
  CHECK(seen.find("Bearer " + ph) == std::string::npos);
  // What Pi's bash tool saw (its environment, the models.json it reads):
  // the jail's CA variables and the placeholder, never the real key.
  CHECK(seen.find("NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt") != std::string::npos);
  CHECK(seen.find(ph) != std::string::npos);
  // The real key only in the Authorization fields the server received.
  size_t anywhere = 0;
  for (size_t at = 0; (at = seen.find(real, at)) != std::string::npos; ++at) ++anywhere;
  CHECK(anywhere == calls);
  CHECK(o.out.find(real) == std::string::npos);
  CHECK(o.err.find(real) == std::string::npos);
  CHECK(read_file(report).find(real) == std::string::npos);
  CHECK(read_file(report).find("substituted E2E_KEY") != std::string::npos);
}
