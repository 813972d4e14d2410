// Stand-ins for the servers a jail talks to, on the host's loopback: a
// test CA with the certificates it signs (openssl), and an HTTP or HTTPS
// server (Python's http.server) whose answers the test writes. They run
// through the harness (tests/containment/harness.h): processes and files
// under the test's Sandbox.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pj::test {

// `/bin/sh -c cmd`; the test stops (REQUIRE) unless it exits 0, showing
// the command and what it wrote to stderr.
void sh_ok(const std::string& cmd);

// PEM files in a test's directory, readable by every user (the
// unprivileged run's filter reads them too): `cert` and its `key` (cert +
// ".key"), and `ca`, the test CA that signed `cert` (empty when none did).
struct TestCerts {
  std::string ca, cert, key;

  // A test CA (dir/test-ca.pem) and a certificate it signs, dir/file, for
  // `names`, subjectAltName entries ("IP:127.0.0.1", "DNS:api.github.com");
  // the first also names the subject.
  static TestCerts signed_by_ca(const std::string& dir, const std::string& file, const std::vector<std::string>& names);
  // A self-signed certificate for 127.0.0.1, dir/file, that no CA vouches for.
  static TestCerts self_signed(const std::string& dir, const std::string& file);
};

// A server on 127.0.0.1 (a free port) answering as `handler` says: Python
// text defining `class Handler(StandIn)` with a method any(self) that
// answers each GET and POST (StandIn: an http.server request handler that
// speaks HTTP/1.1 and logs nothing of its own). The handler finds `log`
// (the path of its log, which note(text) appends to under a lock) and
// `args` (the constructor's). Each connection is served on a thread of its
// own. Its files are dir/name.{py,port,log}; it is killed (SIGKILL) with
// the object.
class StandInServer {
public:
  // HTTPS with `certs`' certificate.
  StandInServer(const std::string& dir, const std::string& name, const TestCerts& certs, const std::string& handler,
                const std::vector<std::string>& args = {});
  // Plain HTTP.
  StandInServer(const std::string& dir, const std::string& name, const std::string& handler,
                const std::vector<std::string>& args = {});
  ~StandInServer();
  StandInServer(const StandInServer&) = delete;
  StandInServer& operator=(const StandInServer&) = delete;

  const std::string& port() const { return port_; }
  // What the handler logged so far; "" before it logged anything.
  std::string log() const;

private:
  void start(const std::string& dir, const std::string& name, const std::string& cert, const std::string& key,
             const std::string& handler, const std::vector<std::string>& args);
  std::string log_, port_;
  pid_t pid_ = -1;
};

}  // namespace pj::test
