#include "stand_in.h"

#include <signal.h>

#include <doctest/doctest.h>

#include "harness.h"

namespace pj::test {

namespace {

// What every stand-in shares, before and after the test's handler text:
// the arguments (PORTFILE LOG CERT KEY [ARG...]; CERT and KEY empty for
// plain HTTP), the log, the handler's base class, and the serving.
const char* const kBeforeHandler = R"PY(
import sys, os, ssl, socketserver, http.server, threading
portfile, log, cert, key = sys.argv[1:5]
args = sys.argv[5:]
lock = threading.Lock()
def note(text):
    with lock, open(log, "a") as f:
        f.write(text)
class StandIn(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self): self.any()
    def do_POST(self): self.any()
)PY";

const char* const kAfterHandler = R"PY(
ctx = None
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
# As a real server: each connection's handshake in its own thread (a
# wrapped listening socket would make every client wait for the slowest
# handshake), and a backlog for hundreds of connections at once.
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    def finish_request(self, request, client_address):
        request.settimeout(30)
        if ctx:
            try:
                request = ctx.wrap_socket(request, server_side=True)
            except OSError:
                return
        self.RequestHandlerClass(request, client_address, self)
srv = Server(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f: f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
)PY";

// The subject's name in a subjectAltName entry: "DNS:x" -> "x".
std::string subject_of(const std::string& name) { return name.substr(name.find(':') + 1); }

const std::string kEcKey = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

}  // namespace

void sh_ok(const std::string& cmd) {
  auto o = run({"/bin/sh", "-c", cmd});
  CAPTURE(cmd);
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
}

TestCerts TestCerts::signed_by_ca(const std::string& dir, const std::string& file,
                                  const std::vector<std::string>& names) {
  REQUIRE(!names.empty());
  TestCerts c{dir + "/test-ca.pem", dir + "/" + file, dir + "/" + file + ".key"};
  std::string alt;
  for (const auto& n : names) alt += (alt.empty() ? "" : ",") + n;
  write_file(c.cert + ".ext", "subjectAltName=" + alt + "\nextendedKeyUsage=serverAuth\n");
  sh_ok("openssl req -x509 " + kEcKey + " -subj /CN=pj-test-ca -days 2 -keyout " + c.ca + ".key -out " + c.ca +
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null");
  sh_ok("openssl req " + kEcKey + " -subj /CN=" + subject_of(names.front()) + " -keyout " + c.key + " -out " + c.cert +
        ".csr 2>/dev/null && openssl x509 -req -in " + c.cert + ".csr -CA " + c.ca + " -CAkey " + c.ca +
        ".key -CAcreateserial -days 2 -out " + c.cert + " -extfile " + c.cert + ".ext 2>/dev/null");
  sh_ok("chmod a+r " + dir + "/*");
  return c;
}

TestCerts TestCerts::self_signed(const std::string& dir, const std::string& file) {
  TestCerts c{"", dir + "/" + file, dir + "/" + file + ".key"};
  sh_ok("openssl req -x509 " + kEcKey + " -subj /CN=127.0.0.1 -days 2 -keyout " + c.key + " -out " + c.cert +
        " -addext subjectAltName=IP:127.0.0.1 2>/dev/null");
  sh_ok("chmod a+r " + dir + "/*");
  return c;
}

StandInServer::StandInServer(const std::string& dir, const std::string& name, const TestCerts& certs,
                             const std::string& handler, const std::vector<std::string>& args) {
  start(dir, name, certs.cert, certs.key, handler, args);
}

StandInServer::StandInServer(const std::string& dir, const std::string& name, const std::string& handler,
                             const std::vector<std::string>& args) {
  start(dir, name, "", "", handler, args);
}

void StandInServer::start(const std::string& dir, const std::string& name, const std::string& cert,
                          const std::string& key, const std::string& handler, const std::vector<std::string>& args) {
  const std::string script = dir + "/" + name + ".py", portfile = dir + "/" + name + ".port";
  log_ = dir + "/" + name + ".log";
  write_file(script, std::string(kBeforeHandler) + handler + kAfterHandler);
  std::vector<std::string> argv{"/usr/bin/python3", script, portfile, log_, cert, key};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = spawn(argv);
  const bool up = eventually([&] { return exists(portfile); });
  if (!up) {
    ::kill(pid_, SIGKILL);
    wait_status(pid_);
  }
  REQUIRE(up);
  port_ = trim(read_file(portfile));
}

StandInServer::~StandInServer() {
  ::kill(pid_, SIGKILL);
  wait_status(pid_);
}

std::string StandInServer::log() const { return exists(log_) ? read_file(log_) : ""; }

}  // namespace pj::test
