// The credential filter in the proxy's loop, on loopback sockets: a TLS
// upstream made with a second TlsAuthority (trusted by the filter through
// upstream.extra_ca_file), a client trusting the filter's run CA. What a
// real jail cannot show cheaply: the token exchange, ALPN and SNI
// refusals, keep-alive with a chunked body, the connection bound.
#include <doctest/doctest.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "credentials/interceptor.h"
#include "credentials/tls_ca.h"
#include "credentials/websocket.h"
#include "netproxy/proxy.h"
#include "loopback.h"

using namespace pj;
using namespace std::chrono_literals;

namespace {

std::string read_some(SSL* ssl) {
  char buf[16384];
  size_t n = 0;
  return SSL_read_ex(ssl, buf, sizeof buf, &n) == 1 ? std::string(buf, n) : std::string();
}

// Read from `ssl` until `done(text)` or the end.
std::string read_until(SSL* ssl, const std::function<bool(const std::string&)>& done) {
  std::string out;
  while (!done(out)) {
    std::string more = read_some(ssl);
    if (more.empty()) break;
    out += more;
  }
  return out;
}

bool has_full_response(const std::string& s) {
  size_t end = s.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  std::string head = s.substr(0, end);
  if (auto cl = head.find("Content-Length: "); cl != std::string::npos)
    return s.size() >= end + 4 + std::stoul(head.substr(cl + 16));
  if (head.find("chunked") != std::string::npos) return s.find("\r\n0\r\n\r\n", end) != std::string::npos;
  return true;
}

// A TLS server on loopback answering every request with the next canned
// response (the last repeats); keeps what it received.
// How a stand-in server reads a GET's body: as RFC 9112 section 6 says
// (by Content-Length), or not at all, as some servers do (the body then
// reads as the next request: a CL.0 desync).
enum class GetBody { read, ignored };

// Where the request at the start of `t` ends; npos: not complete yet.
size_t request_end(const std::string& t, GetBody get_body) {
  size_t end = t.find("\r\n\r\n");
  if (end == std::string::npos) return std::string::npos;
  std::string head = t.substr(0, end);
  if (get_body == GetBody::ignored && head.starts_with("GET ")) return end + 4;
  if (auto cl = head.find("Content-Length: "); cl != std::string::npos) {
    size_t total = end + 4 + std::stoul(head.substr(cl + 16));
    return t.size() >= total ? total : std::string::npos;
  }
  if (head.find("chunked") != std::string::npos) {
    size_t last = t.find("0\r\n\r\n", end);
    return last == std::string::npos ? std::string::npos : last + 5;
  }
  return end + 4;
}

class Upstream {
public:
  using Respond = std::function<std::string(const std::string& request, size_t index)>;
  explicit Upstream(std::vector<std::string> responses)
      : Upstream([responses](const std::string&, size_t i) { return responses[std::min(i, responses.size() - 1)]; }) {}
  explicit Upstream(Respond respond, GetBody get_body = GetBody::read)
      : respond_(std::move(respond)), get_body_(get_body) {
    port = server_.port;
    auto ca = credentials::TlsAuthority::create({{"127.0.0.1", static_cast<uint16_t>(port)}}, {});
    REQUIRE(ca);
    ca_ = std::move(*ca);
    ca_file = "/tmp/pj-unit-upstream-ca-" + std::to_string(::getpid()) + "-" + std::to_string(port) + ".pem";
    FILE* f = std::fopen(ca_file.c_str(), "w");
    REQUIRE(f);
    std::fputs(ca_->ca_pem().c_str(), f);
    std::fclose(f);
    server_.start([this](int c) { serve(c); });
  }
  ~Upstream() { ::unlink(ca_file.c_str()); }
  std::string received() {
    std::lock_guard<std::mutex> l(m_);
    return received_;
  }
  // Connections served to their end.
  size_t connections() {
    std::lock_guard<std::mutex> l(m_);
    return connections_;
  }
  int port = 0;
  std::string ca_file;

private:
  size_t connections_ = 0;
  void serve(int c) {
    timeval tv{5, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    auto s = ca_->server_ssl("127.0.0.1");
    if (!s) return (void)::close(c);
    SSL* ssl = *s;
    SSL_set_fd(ssl, c);
    if (SSL_accept(ssl) == 1) {
      size_t i = 0;
      std::string pending;
      while (true) {
        // One request: its head, then a Content-Length body or a chunked one.
        while (request_end(pending, get_body_) == std::string::npos) {
          std::string more = read_some(ssl);
          if (more.empty()) break;
          pending += more;
        }
        size_t end = request_end(pending, get_body_);
        if (end == std::string::npos) break;
        std::string req = pending.substr(0, end);
        pending.erase(0, end);
        {
          std::lock_guard<std::mutex> l(m_);
          received_ += req + "\n--\n";
        }
        const std::string r = respond_(req, i++);
        SSL_write(ssl, r.data(), static_cast<int>(r.size()));
      }
      {
        std::lock_guard<std::mutex> l(m_);
        ++connections_;
      }
    }
    SSL_free(ssl);
    ::close(c);
  }
  Respond respond_;
  GetBody get_body_ = GetBody::read;
  std::unique_ptr<credentials::TlsAuthority> ca_;
  std::mutex m_;
  std::string received_;
  test::LoopbackServer server_;  // last: its thread stops before what serve() uses goes
};

class FakeExchange : public credentials::TokenExchange {
public:
  bool fail_response = false;
  std::string reply = R"({"access_token":"PH_NEW_ACCESS"})";  // the rewritten response body
  std::string seen_encoding, seen_body;
  bool is_token_endpoint(std::string_view, std::string_view path) const override { return path == "/v1/oauth/token"; }
  bool is_exact_token_endpoint(std::string_view host, std::string_view path) const override {
    return is_token_endpoint(host, path);
  }
  util::Result<credentials::ExchangeRequest> request_body(std::string_view, std::string_view, std::string_view body,
                                                          const std::vector<std::string>&,
                                                          const std::vector<std::string>&) override {
    std::string b(body);
    auto at = b.find("PH_REFRESH");
    if (at == std::string::npos) return util::Error::invalid("no refresh placeholder");
    return credentials::ExchangeRequest{b.replace(at, 10, "REAL_REFRESH"), credentials::ExchangeKind::renewal, ""};
  }
  util::Result<std::string> response_body(std::string_view, std::string_view, int, std::string_view ce,
                                          std::string_view body, credentials::ExchangeKind) override {
    seen_encoding = ce;
    seen_body = body;
    if (fail_response) return util::Error::invalid("cannot decode");
    added.push_back({"NEW_ACCESS", "PH_NEW_ACCESS", "REAL_NEW_ACCESS", {{"127.0.0.1", port}}});
    return reply;
  }
  std::vector<credentials::Binding> take_new_bindings() override { return std::exchange(added, {}); }
  uint16_t port = 0;
  std::vector<credentials::Binding> added;
};

struct Rig {
  netproxy::Rules rules;
  std::unique_ptr<netproxy::Proxy> proxy;
  std::shared_ptr<credentials::Interceptor> interceptor;
  int http = 0;
  std::atomic<bool> stop{false};
  std::thread loop;

  Rig(int upstream_port, const std::string& ca_file, std::shared_ptr<credentials::TokenExchange> ex = nullptr,
      netproxy::ProxyLimits limits = {}) {
    REQUIRE(rules.allow("127.0.0.1:" + std::to_string(upstream_port), "test"));
    credentials::Intercept in;
    in.bindings = {{"KEY", "PH_KEY_0123", "REAL_KEY_9876", {{"127.0.0.1", static_cast<uint16_t>(upstream_port)}}}};
    in.exchange = std::move(ex);
    in.refused = {{"127.0.0.1", "/api/oauth/"}, {"127.0.0.1", "/v1/organization/projects/*/service_accounts"}};
    in.upstream.extra_ca_file = ca_file;
    auto i = credentials::Interceptor::create(in);
    REQUIRE(i);
    interceptor = *i;
    auto p = netproxy::Proxy::start(rules, -1, limits, interceptor);
    REQUIRE(p);
    proxy = std::move(*p);
    REQUIRE(proxy->add_listener(test::listen_loopback(http), netproxy::ListenerKind::http, std::nullopt).ok());
    loop = std::thread([this] {
      while (!stop) proxy->run_for(20ms);
    });
  }
  const std::vector<netproxy::Decision>& finish() {
    if (!stop.exchange(true)) loop.join();
    proxy->shutdown();
    return proxy->decisions().entries;
  }
  ~Rig() { finish(); }

  // CONNECT to the upstream, then TLS trusting the run's CA. nullptr when the handshake fails.
  struct Client {
    util::UniqueFd fd;
    SSL_CTX* ctx = nullptr;
    SSL* ssl = nullptr;
    ~Client() {
      SSL_free(ssl);
      SSL_CTX_free(ctx);
    }
  };
  std::unique_ptr<Client> connect(int upstream_port, const char* alpn = "\x08http/1.1", const char* sni = nullptr) {
    auto c = std::make_unique<Client>();
    c->fd = test::connect_loopback(http);
    std::string req = "CONNECT 127.0.0.1:" + std::to_string(upstream_port) + " HTTP/1.1\r\n\r\n";
    REQUIRE(::send(c->fd.get(), req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
    char buf[64];
    const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
    std::string got;
    while (got.size() < ok.size()) {
      ssize_t n = ::recv(c->fd.get(), buf, ok.size() - got.size(), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    REQUIRE(got == ok);
    c->ctx = SSL_CTX_new(TLS_client_method());
    BIO* bio = BIO_new_mem_buf(interceptor->ca_pem().data(), static_cast<int>(interceptor->ca_pem().size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(c->ctx), ca);
    X509_free(ca);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, nullptr);
    if (alpn)
      SSL_CTX_set_alpn_protos(c->ctx, reinterpret_cast<const unsigned char*>(alpn),
                              static_cast<unsigned>(std::strlen(alpn)));
    c->ssl = SSL_new(c->ctx);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), "127.0.0.1");
    if (sni) SSL_set_tlsext_host_name(c->ssl, sni);
    SSL_set_fd(c->ssl, c->fd.get());
    if (SSL_connect(c->ssl) != 1) {
      ERR_clear_error();
      return nullptr;
    }
    return c;
  }
};

void write(SSL* ssl, const std::string& s) {
  REQUIRE(SSL_write(ssl, s.data(), static_cast<int>(s.size())) == static_cast<int>(s.size()));
}

}  // namespace

TEST_CASE("credential filter loop: keep-alive requests, a chunked body re-framed, the key substituted in each") {
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Length: 21\r\n\r\nkey was REAL_KEY_9876"});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /one HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  std::string r1 = read_until(c->ssl, has_full_response);
  CHECK(r1.find("key was PH_KEY_0123") != std::string::npos);
  CHECK(r1.find("REAL") == std::string::npos);
  write(c->ssl,
        "POST /two HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer PH_KEY_0123\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  std::string r2 = read_until(c->ssl, has_full_response);
  CHECK(r2.find("key was PH_KEY_0123") != std::string::npos);
  std::string seen = up.received();
  CHECK(seen.find("GET /one HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(up.port)) != std::string::npos);
  CHECK(seen.find("x-api-key: REAL_KEY_9876") != std::string::npos);
  CHECK(seen.find("Authorization: Bearer REAL_KEY_9876") != std::string::npos);
  // Re-framed: the chunks as decoded, then the last one.
  CHECK(seen.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK((seen.find("b\r\nhello world\r\n0\r\n\r\n") != std::string::npos ||
         seen.find("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n") != std::string::npos));
  CHECK(seen.find("PH_KEY") == std::string::npos);
  c.reset();
  const auto& d = rig.finish();
  bool substituted = false;
  for (const auto& e : d)
    if (e.protocol == netproxy::Protocol::credential && e.allowed && e.count == 2 && e.reason == "substituted KEY")
      substituted = true;
  CHECK(substituted);
}

TEST_CASE(
    "credential filter loop: the token exchange rewrites both bodies; a failed rewrite never passes the upstream "
    "body") {
  const std::string secret_body = R"({"access_token":"REAL_NEW_ACCESS","refresh_token":"REAL_NEW_REFRESH"})";
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(secret_body.size()) +
               "\r\n\r\n" + secret_body});
  auto ex = std::make_shared<FakeExchange>();
  ex->port = static_cast<uint16_t>(up.port);
  Rig rig(up.port, up.ca_file, ex);
  {
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl,
          "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          "1a\r\n{\"refresh_token\":\"PH_REFRE\r\n4\r\nSH\"}\r\n0\r\n\r\n");
    std::string r = read_until(c->ssl, has_full_response);
    CHECK(r.find("HTTP/1.1 200 OK") == 0);
    CHECK(r.find("Content-Encoding") == std::string::npos);
    CHECK(r.find("Content-Length: 32\r\n") != std::string::npos);
    CHECK(r.find(R"({"access_token":"PH_NEW_ACCESS"})") != std::string::npos);
    CHECK(r.find("REAL_NEW") == std::string::npos);
    CHECK(ex->seen_encoding == "gzip");
    CHECK(ex->seen_body == secret_body);
    std::string seen = up.received();
    CHECK(seen.find("Content-Length: 32\r\n") != std::string::npos);
    CHECK(seen.find(R"({"refresh_token":"REAL_REFRESH"})") != std::string::npos);
    CHECK(seen.find("Transfer-Encoding") == std::string::npos);
    // The refreshed token's placeholder is substituted from the next request on.
    write(c->ssl, "GET /after HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer PH_NEW_ACCESS\r\n\r\n");
    read_until(c->ssl, has_full_response);
    CHECK(up.received().find("Authorization: Bearer REAL_NEW_ACCESS") != std::string::npos);
  }
  ex->fail_response = true;
  {
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl,
          "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{\"refresh_token\":\"PH_REFRESH\"}");
    std::string r = read_until(c->ssl, [](const std::string&) { return false; });
    CHECK(r.find("HTTP/1.1 502") == 0);
    CHECK(r.find("REAL_NEW") == std::string::npos);
  }
  {
    // A request body the exchange refuses: 403, nothing sent upstream.
    auto c = rig.connect(up.port);
    REQUIRE(c);
    size_t before = up.received().size();
    write(c->ssl, "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
    std::string r = read_until(c->ssl, [](const std::string&) { return false; });
    CHECK(r.find("HTTP/1.1 403") == 0);
    CHECK(up.received().size() == before);
  }
}

TEST_CASE(
    "credential filter loop: an h2-only client and a wrong SNI fail the handshake; http/1.1 among others is chosen") {
  Upstream up({"HTTP/1.1 204 No Content\r\n\r\n"});
  Rig rig(up.port, up.ca_file);
  CHECK(rig.connect(up.port, "\x02h2") == nullptr);
  CHECK(rig.connect(up.port, "\x08http/1.1", "evil.example") == nullptr);
  auto c = rig.connect(up.port, "\x02h2\x08http/1.1");
  REQUIRE(c);
  const unsigned char* sel = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(c->ssl, &sel, &len);
  CHECK(std::string(reinterpret_cast<const char*>(sel), len) == "http/1.1");
  write(c->ssl, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(read_until(c->ssl, has_full_response).find("HTTP/1.1 204") == 0);
}

TEST_CASE("credential filter loop: with kMaxIntercepted connections waiting, the next takes the oldest one's place") {
  Upstream up({"HTTP/1.1 204 No Content\r\n\r\n"});
  netproxy::ProxyLimits limits;
  limits.handshake = 5s;
  Rig rig(up.port, up.ca_file, nullptr, limits);
  std::vector<util::UniqueFd> held;
  const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
  const std::string req = "CONNECT 127.0.0.1:" + std::to_string(up.port) + " HTTP/1.1\r\n\r\n";
  // Each holds a worker and never sends a request (not even its TLS hello).
  for (size_t i = 0; i <= netproxy::kMaxIntercepted; ++i) {
    held.push_back(test::connect_loopback(rig.http));
    ::send(held.back().get(), req.data(), req.size(), MSG_NOSIGNAL);
    char buf[64];
    REQUIRE(::recv(held.back().get(), buf, ok.size(), MSG_WAITALL) == static_cast<ssize_t>(ok.size()));
  }
  // The one past the limit got its tunnel; the first one was closed for it.
  char buf[64];
  CHECK(::recv(held.front().get(), buf, sizeof buf, 0) == 0);
  held.clear();
}

TEST_CASE(
    "credential filter loop: a connection closed to make room keeps its refusal (a failed server check) in the log") {
  // The filter trusts another CA than the one that signed the server's
  // certificate: every connection is refused once the jail's TLS is up,
  // and waits for the jail's request to answer it with 502.
  Upstream up({"HTTP/1.1 204 No Content\r\n\r\n"});
  Upstream other({"HTTP/1.1 204 No Content\r\n\r\n"});
  netproxy::ProxyLimits limits;
  limits.handshake = 8s;
  Rig rig(up.port, other.ca_file, nullptr, limits);
  std::vector<std::unique_ptr<Rig::Client>> held;
  for (size_t i = 0; i <= netproxy::kMaxIntercepted; ++i) {
    held.push_back(rig.connect(up.port));
    REQUIRE(held.back());
  }
  // The first was closed for the last without its 502: it was made room of
  // while its refusal waited for a request.
  CHECK(read_some(held.front()->ssl).empty());
  held.clear();
  size_t refused = 0;
  for (const auto& e : rig.finish()) {
    if (e.protocol != netproxy::Protocol::http_connect || e.port != up.port) continue;
    CAPTURE(e.reason);
    CHECK_FALSE(e.allowed);
    CHECK(e.reason.find("the server's certificate was not verified") != std::string::npos);
    refused += e.count;
  }
  CHECK(refused == netproxy::kMaxIntercepted + 1);
}

TEST_CASE("credential filter loop: an endpoint that mints new credentials is refused, however spelled") {
  // Anthropic's /api/oauth/claude_cli/create_api_key answers the jail's
  // (substituted) OAuth token with a brand-new real API key, which no
  // masking can catch. Found by the cred-attack review.
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Length: 34\r\n\r\n{\"raw_key\":\"sk-ant-api03-MINTED\"}"});
  Rig rig(up.port, up.ca_file);
  for (std::string target :
       {"/api/oauth/claude_cli/create_api_key", "//api/OAuth/claude_cli/create_api_key",
        "/v1/../api/./oauth/claude_cli/create_api_key?x=1", "/api/oauth%2Fclaude_cli/create_api_key",
        "/%2561pi/oauth/claude_cli/create_api_key", "/api;v=1/oauth/claude_cli/create_api_key",
        "https://127.0.0.1/api/oauth/claude_cli/create_api_key"}) {
    CAPTURE(target);
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl, "POST " + target +
                      " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer PH_KEY_0123\r\nContent-Length: 2\r\n\r\n{}");
    std::string r = read_until(c->ssl, [](const std::string&) { return false; });
    CHECK(r.find("HTTP/1.1 403") == 0);
    CHECK(r.find("MINTED") == std::string::npos);
  }
  CHECK(up.received().find("oauth") == std::string::npos);
  CHECK(up.received().find("OAuth") == std::string::npos);
  // The model API on the same host is untouched.
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\nConnection: close\r\n\r\n");
  CHECK(read_until(c->ssl, [](const std::string&) { return false; }).find("HTTP/1.1 200") == 0);
  CHECK(up.received().find("x-api-key: REAL_KEY_9876") != std::string::npos);
  c.reset();
  bool recorded = false;
  for (const auto& e : rig.finish())
    if (e.protocol == netproxy::Protocol::credential && !e.allowed &&
        e.reason.find("hands out new credentials") != std::string::npos)
      recorded = true;
  CHECK(recorded);
}

TEST_CASE("credential filter loop: a minting refusal names the endpoint and why, in its body and reason phrase") {
  // OpenAI's admin key creates a service account and returns its new key.
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Length: 31\r\n\r\n{\"api_key\":{\"value\":\"sk-MINT\"}}"});
  Rig rig(up.port, up.ca_file);
  for (std::string target : {"/v1/organization/projects/proj_1/service_accounts",
                             "/v1/organization/projects/proj_1/service_accounts/svc_1/api_keys",
                             "/V1/organization//projects/%70roj_1/./service_accounts"}) {
    CAPTURE(target);
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl, "POST " + target +
                      " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer PH_KEY_0123\r\nContent-Length: 2\r\n\r\n{}");
    std::string r = read_until(c->ssl, [](const std::string&) { return false; });
    CHECK(r.find("HTTP/1.1 403 Forbidden by pi-jail: credential-minting endpoint\r\n") == 0);
    CHECK(r.find("127.0.0.1/v1/organization/projects/*/service_accounts hands out new credentials") !=
          std::string::npos);
    CHECK(r.find("[credentials] allow_minting") != std::string::npos);
    CHECK(r.find("MINT") == std::string::npos);
  }
  CHECK(up.received().find("service_accounts") == std::string::npos);
  // Another path of the project is not a minting endpoint.
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /v1/organization/projects/proj_1/files HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(read_until(c->ssl, [](const std::string&) { return false; }).find("HTTP/1.1 200") == 0);
}

TEST_CASE("credential filter loop: a key echoed in a response's status line (reason phrase) is masked") {
  // Found by the cred-attack review: only field values were masked.
  Upstream up({"HTTP/1.1 401 bad key REAL_KEY_9876\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  std::string r = read_until(c->ssl, [](const std::string&) { return false; });
  CHECK(r.find("HTTP/1.1 401 bad key PH_KEY_0123\r\n") == 0);
  CHECK(r.find("REAL") == std::string::npos);
  CHECK(up.received().find("x-api-key: REAL_KEY_9876") != std::string::npos);
}

TEST_CASE("credential filter loop: echoes split across chunks, in a 1xx head, or in pipelined requests are masked") {
  // The cred-attack review: these held.
  Upstream up(
      {"HTTP/1.1 103 Early Hints\r\nLink: REAL_KEY_9876\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "5\r\nREAL_\r\n3\r\nKEY\r\n4\r\n_987\r\n2\r\n6!\r\n0\r\n\r\n"});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl,
        "GET /a HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n"
        "x-api-key: PH_KEY_0123\r\nConnection: close\r\n\r\n");
  std::string r = read_until(c->ssl, [](const std::string&) { return false; });
  CHECK(r.find("Link: PH_KEY_0123") != std::string::npos);
  CHECK(r.find("REAL") == std::string::npos);
  std::string body;  // the jail's chunks decoded
  for (size_t at = r.find("\r\n\r\n", r.find("200 OK")) + 4; at < r.size();) {
    size_t eol = r.find("\r\n", at);
    size_t n = std::stoul(r.substr(at, eol - at), nullptr, 16);
    if (!n) break;
    body += r.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  CHECK(body.find("PH_KEY_0123!") != std::string::npos);
  std::string seen = up.received();
  CHECK(seen.find("GET /b HTTP/1.1") != std::string::npos);
  CHECK(seen.find("PH_KEY") == std::string::npos);
}

TEST_CASE("credential filter loop: a second Content-Encoding field cannot slip a compressed body past the masker") {
  // The cred-attack review: only the first Content-Encoding was looked at.
  Upstream up(
      {"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd"});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\nConnection: close\r\n\r\n");
  std::string r = read_until(c->ssl, [](const std::string&) { return false; });
  CHECK(r.find("HTTP/1.1 502") == 0);
  CHECK(r.find("abcd") == std::string::npos);
}

namespace {
// Everything the filter sends back until it closes the connection.
std::string until_close(SSL* ssl) {
  return read_until(ssl, [](const std::string&) { return false; });
}
}  // namespace

TEST_CASE(
    "credential filter loop: an absolute-form target reaches the bound host only as origin form of its own authority") {
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"});
  Rig rig(up.port, up.ca_file);
  const std::string port = std::to_string(up.port);
  for (std::string line : std::vector<std::string>{
           "GET http://evil.example/steal HTTP/1.1", "GET https://evil.example:443/echo HTTP/1.1",
           "GET https://127.0.0.1/x HTTP/1.1", "GET https://127.0.0.1:1/x HTTP/1.1",
           "GET https://user@127.0.0.1:" + port + "/x HTTP/1.1", "CONNECT evil.example:443 HTTP/1.1",
           "CONNECT 127.0.0.1:" + port + " HTTP/1.1", "OPTIONS * HTTP/1.1"}) {
    CAPTURE(line);
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl, line + "\r\nHost: 127.0.0.1\r\nx-api-key: PH_KEY_0123\r\n\r\n");
    std::string r = until_close(c->ssl);
    CHECK(r.find("HTTP/1.1 403") == 0);
    CHECK(r.find("pi-jail: refused: ") != std::string::npos);
  }
  CHECK(up.received().empty());
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl,
        "GET hTTpS://127.0.0.1:" + port + "?q=1#frag HTTP/1.1\r\nHost: evil.example\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  CHECK(until_close(c->ssl).find("HTTP/1.1 200") == 0);
  std::string seen = up.received();
  CHECK(seen.find("GET /?q=1 HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n") == 0);
  CHECK(seen.find("x-api-key: REAL_KEY_9876") != std::string::npos);
  CHECK(seen.find("evil") == std::string::npos);
  CHECK(seen.find("frag") == std::string::npos);
}

TEST_CASE("credential filter loop: a TAB or a second space in the request line is refused before any path check") {
  Upstream up({"HTTP/1.1 200 OK\r\nContent-Length: 34\r\n\r\n{\"raw_key\":\"sk-ant-api03-MINTED\"}"});
  Rig rig(up.port, up.ca_file);
  for (std::string line :
       {"POST\t/api/oauth/claude_cli/create_api_key  HTTP/1.1", "POST /api/oauth/claude_cli/create_api_key  HTTP/1.1",
        "POST  /api/oauth/claude_cli/create_api_key HTTP/1.1", "POST /v1/messages\tHTTP/1.1",
        "POST /v1/messages HTTP/1.1 ", "POST /v1/messages\tHTTP/1.1 HTTP/1.1", "POST /v1/messages HTTP/1.2",
        "POST\x01 /v1/messages HTTP/1.1", "POST v1/messages HTTP/1.1"}) {
    CAPTURE(line);
    auto c = rig.connect(up.port);
    REQUIRE(c);
    write(c->ssl, line + "\r\nHost: x\r\nAuthorization: Bearer PH_KEY_0123\r\nContent-Length: 2\r\n\r\n{}");
    std::string r = until_close(c->ssl);
    CHECK((r.find("HTTP/1.1 400") == 0 || r.find("HTTP/1.1 505") == 0));
    CHECK(r.find("MINTED") == std::string::npos);
  }
  CHECK(up.received().empty());
}

namespace {
const std::string kTokenBody = R"({"access_token":"REAL_NEW_ACCESS","refresh_token":"REAL_NEW_REFRESH"})";
const std::string kSmuggledBody = R"({"access_token":"SMUGGLED"})";
std::string ok_response(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
// A stand-in that answers each path with its own body.
std::string by_path(const std::string& req, size_t) {
  if (req.starts_with("POST /v1/oauth/token")) return ok_response(kTokenBody);
  if (req.starts_with("GET /smuggled")) return ok_response(kSmuggledBody);
  return ok_response(req.substr(4, 2));  // "/x", "/y"
}
}  // namespace

TEST_CASE("credential filter loop: a body the server ignores cannot answer the token exchange (CL.0 desync)") {
  Upstream up(by_path, GetBody::ignored);
  auto ex = std::make_shared<FakeExchange>();
  ex->port = static_cast<uint16_t>(up.port);
  Rig rig(up.port, up.ca_file, ex);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  write(c->ssl,
        "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  CHECK(read_until(c->ssl, has_full_response).find("/x") != std::string::npos);
  write(c->ssl,
        "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{\"refresh_token\":\"PH_REFRESH\"}");
  std::string r = read_until(c->ssl, has_full_response);
  CHECK(r.find("HTTP/1.1 200 OK") == 0);
  CHECK(ex->seen_body == kTokenBody);  // the token endpoint's own answer, not the smuggled one
  CHECK(r.find("SMUGGLED") == std::string::npos);
  // The exchange went alone on a connection of its own, closed after it.
  std::string seen = up.received();
  size_t token = seen.find("POST /v1/oauth/token");
  REQUIRE(token != std::string::npos);
  CHECK(seen.find("Connection: close\r\n", token) != std::string::npos);
  write(c->ssl, "GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string y = until_close(c->ssl);
  CHECK(y.find("HTTP/1.1 200") == 0);
  CHECK(y.find("/y") != std::string::npos);
  c.reset();
  rig.finish();
  for (int i = 0; i < 100 && up.connections() < 3; ++i) std::this_thread::sleep_for(20ms);
  CHECK(up.connections() == 3);  // /x and the smuggled one; the exchange; /y
}

TEST_CASE("credential filter loop: server bytes before a request was sent close the connection with 502") {
  Upstream up(by_path, GetBody::ignored);
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  write(c->ssl, "GET /x HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\nContent-Length: " +
                    std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  CHECK(read_until(c->ssl, has_full_response).find("/x") != std::string::npos);
  std::this_thread::sleep_for(300ms);  // the smuggled response is on its way meanwhile
  write(c->ssl, "GET /y HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  std::string r = until_close(c->ssl);
  CHECK(r.find("HTTP/1.1 502") == 0);
  CHECK(r.find("SMUGGLED") == std::string::npos);
  CHECK(up.received().find("GET /y") == std::string::npos);
}

TEST_CASE("credential filter loop: after a WebSocket 101 the server's frames reach the jail masked, reassembled") {
  // The key split between two frames of one text message.
  const std::string text = "k=REAL_KEY_9876";
  std::string first = credentials::ws::frame(1, text.substr(0, 8));
  first[0] = 0x01;  // no FIN: a continuation follows
  Upstream up({"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + first +
               credentials::ws::frame(0, text.substr(8))});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl,
        "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  const std::string want = credentials::ws::frame(1, "k=PH_KEY_0123");
  std::string r = read_until(c->ssl, [&](const std::string& got) { return got.find(want) != std::string::npos; });
  CHECK(r.find("HTTP/1.1 101") == 0);
  CHECK(r.find(want) != std::string::npos);
  CHECK(r.find("REAL_K") == std::string::npos);
  // No extension offered upstream: a compressed frame could not be masked.
  CHECK(up.received().find("Sec-WebSocket-Extensions") == std::string::npos);
  CHECK(up.received().find("x-api-key: REAL_KEY_9876") != std::string::npos);
  // Another protocol's frames cannot be read: refused.
  auto h2c = rig.connect(up.port);
  REQUIRE(h2c);
  write(h2c->ssl, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  CHECK(read_until(h2c->ssl, [](const std::string&) { return false; }).find("HTTP/1.1 403") == 0);
}

TEST_CASE("credential filter loop: a 101 to a token exchange closes the connection and passes nothing on") {
  Upstream up({"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n" + kTokenBody});
  auto ex = std::make_shared<FakeExchange>();
  ex->port = static_cast<uint16_t>(up.port);
  Rig rig(up.port, up.ca_file, ex);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl,
        "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
        "Content-Length: 30\r\n\r\n{\"refresh_token\":\"PH_REFRESH\"}");
  std::string r = until_close(c->ssl);
  CHECK(r.find("HTTP/1.1 502") == 0);
  CHECK(r.find("101") == std::string::npos);
  CHECK(r.find("REAL") == std::string::npos);
  std::string seen = up.received();
  CHECK(seen.find("Upgrade") == std::string::npos);
  CHECK(seen.find("Connection: close\r\n") != std::string::npos);
}

TEST_CASE(
    "credential filter loop: reflections of the key in a field name, another case, escapes or base64 are masked") {
  // REAL_KEY_9876 as base64 (at offset 0 and 1), percent- and \u-escaped, upper and lower case.
  const std::string body =
      "a UkVBTF9LRVlfOTg3Ng== b eFJFQUxfS0VZXzk4NzY= c %52%45%41%4C%5F%4B%45%59%5F%39%38%37%36 "
      "d \\u0052\\u0045AL_KEY\\u005f9876 e real_key_9876 f d";
  const std::string full = body + " ";
  Upstream up({"HTTP/1.1 200 OK\r\nX-REAL_KEY_9876: 1\r\nX-Echo: Real_Key_9876\r\nContent-Length: " +
               std::to_string(full.size()) + "\r\nConnection: close\r\n\r\n" + full});
  Rig rig(up.port, up.ca_file);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl, "GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\n");
  std::string r = until_close(c->ssl);
  CAPTURE(r);
  CHECK(r.find("HTTP/1.1 200") == 0);
  CHECK(r.find("X-PH_KEY_0123: 1\r\n") != std::string::npos);
  CHECK(r.find("X-Echo: PH_KEY_0123\r\n") != std::string::npos);
  for (std::string leak :
       {"REAL", "Real", "real", "UkVBTF9LRVlfOTg3Ng", "FJFQUxfS0VZXzk4NzY", "%52%45%41%4C", "\\u005f9876"})
    CHECK(r.find(leak) == std::string::npos);
  CHECK(r.find(" f d ") != std::string::npos);  // the text around is untouched
}

TEST_CASE("credential filter loop: a gzip, zlib or zstd body labelled identity (or not at all) is refused with 502") {
  for (std::string label : {"Content-Encoding: identity\r\n", "", "Content-Encoding: br\r\n"})
    for (std::string magic : {std::string("\x1f\x8b\x08\x00rest", 8), std::string("\x78\x9crest", 6),
                              std::string("\x28\xb5\x2f\xfdrest", 8)}) {
      CAPTURE(label);
      Upstream up(
          {"HTTP/1.1 200 OK\r\n" + label + "Content-Length: " + std::to_string(magic.size()) + "\r\n\r\n" + magic});
      Rig rig(up.port, up.ca_file);
      auto c = rig.connect(up.port);
      REQUIRE(c);
      write(c->ssl, "GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: PH_KEY_0123\r\n\r\n");
      std::string r = until_close(c->ssl);
      CHECK(r.find("HTTP/1.1 502") == 0);
      CHECK(r.find("rest") == std::string::npos);
      CHECK(r.find("200 OK") == std::string::npos);
    }
}

TEST_CASE("credential filter loop: a token nested below the top level of a token response is never passed on") {
  Upstream up({ok_response(kTokenBody)});
  auto ex = std::make_shared<FakeExchange>();
  ex->port = static_cast<uint16_t>(up.port);
  // What an exchange that rewrites only the top level leaves.
  ex->reply = R"({"access_token":"PH_NEW_ACCESS","data":[{"refresh_token":"REAL_NESTED_REFRESH"}]})";
  Rig rig(up.port, up.ca_file, ex);
  auto c = rig.connect(up.port);
  REQUIRE(c);
  write(c->ssl,
        "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{\"refresh_token\":\"PH_REFRESH\"}");
  std::string r = until_close(c->ssl);
  CHECK(r.find("HTTP/1.1 502") == 0);
  CHECK(r.find("REAL_NESTED") == std::string::npos);
  CHECK(r.find("refresh_token that was not rewritten") != std::string::npos);
}
