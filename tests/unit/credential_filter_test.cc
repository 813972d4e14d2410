// The credential filter's HTTP/1.1 side without I/O (netproxy/http1.h)
// and its per-run CA (netproxy/tls_ca.h).
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "netproxy/http1.h"
#include "netproxy/interceptor.h"
#include "netproxy/tls_ca.h"

using namespace pj::netproxy;
using namespace pj::netproxy::http1;

namespace {

const std::string kPh = "sk-ant-api03-PLACEHOLDERxxxxxxxxxxxxxxxxxxxxxxxx";
const std::string kReal = "sk-ant-api03-REALVALUE-0123456789";
const std::string kOtherPh = "sk-OTHERPLACEHOLDERyyyyyyyyyyyyyyyyyy";

std::vector<Binding> bindings() {
  return {{"ANTHROPIC_API_KEY", kPh, kReal, {{"api.anthropic.com", 443}}},
          {"OPENAI_API_KEY", kOtherPh, "sk-openai-real", {{"api.openai.com", 443}}}};
}

Head head_of(const std::string& text) {
  auto p = parse_head(text);
  REQUIRE(p.progress == Progress::done);
  return p.head;
}

}  // namespace

TEST_CASE("credential filter: a bound placeholder in any header value becomes the real value, only there") {
  Head h = head_of("POST /v1/messages?key=" + kPh + " HTTP/1.1\r\nHost: x\r\nx-api-key: " + kPh +
                   "\r\nAuthorization: Bearer " + kPh + "\r\nX-Other: pre-" + kPh + "-post\r\n\r\n");
  auto s = substitute(h, bindings(), "api.anthropic.com", 443);
  CHECK_FALSE(s.refused);
  REQUIRE(s.used.size() == 1);
  CHECK(s.used[0] == "ANTHROPIC_API_KEY");
  CHECK(*h.get("x-api-key") == kReal);
  CHECK(*h.get("authorization") == "Bearer " + kReal);
  CHECK(*h.get("X-Other") == "pre-" + kReal + "-post");
  // The request line is never rewritten (no URL substitution).
  CHECK(h.start.find(kPh) != std::string::npos);
  CHECK(h.start.find(kReal) == std::string::npos);
}

TEST_CASE("credential filter: Basic credentials are decoded, substituted and re-encoded") {
  Head h = head_of("GET / HTTP/1.1\r\nAuthorization: Basic " + base64_encode("user:" + kPh) + "\r\n\r\n");
  auto s = substitute(h, bindings(), "api.anthropic.com", 443);
  CHECK_FALSE(s.refused);
  CHECK(*h.get("Authorization") == "Basic " + base64_encode("user:" + kReal));
  // Its echo is masked back to the jail's own rendering.
  REQUIRE(s.renderings.size() == 1);
  Masker m(bindings(), s.renderings);
  CHECK(m.mask("got " + base64_encode("user:" + kReal)) == "got " + base64_encode("user:" + kPh));
  CHECK(base64_decode(base64_encode("a")) == "a");
  CHECK(base64_decode(base64_encode("ab")) == "ab");
  CHECK(base64_decode(base64_encode("abc")) == "abc");
  CHECK_FALSE(base64_decode("a===").has_value());
  CHECK_FALSE(base64_decode("ab=c").has_value());
}

TEST_CASE("credential filter: a placeholder not bound to this host refuses the request and changes nothing") {
  const std::string req = "GET / HTTP/1.1\r\nx-api-key: " + kPh + "\r\nAuthorization: Bearer " + kOtherPh + "\r\n\r\n";
  Head h = head_of(req);
  auto s = substitute(h, bindings(), "api.anthropic.com", 443);
  CHECK(s.refused);
  CHECK(s.refused_binding == "OPENAI_API_KEY");
  CHECK(*h.get("x-api-key") == kPh);  // untouched
  // The right host but another port is not bound either.
  Head p = head_of("GET / HTTP/1.1\r\nx-api-key: " + kPh + "\r\n\r\n");
  CHECK(substitute(p, bindings(), "api.anthropic.com", 8443).refused);
  // In the request line, percent-encoded, and inside Basic.
  std::string enc;
  for (char c : kOtherPh) enc += fmt::format("%{:02X}", static_cast<unsigned char>(c));
  Head q = head_of("GET /?k=" + enc + " HTTP/1.1\r\n\r\n");
  CHECK(substitute(q, bindings(), "api.anthropic.com", 443).refused);
  Head b = head_of("GET / HTTP/1.1\r\nAuthorization: Basic " + base64_encode(kOtherPh + ":") + "\r\n\r\n");
  CHECK(substitute(b, bindings(), "api.anthropic.com", 443).refused);
}

TEST_CASE("credential filter: heads are bounded and strict") {
  CHECK(parse_head("GET / HTTP/1.1\r\nHost: a\r\n").progress == Progress::need_more);
  CHECK(parse_head(std::string(kMaxHead, 'a')).progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\n folded: x\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\nA: x\ry\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head(std::string("GET / HTTP/1.1\r\nA: x\0y\r\n\r\n", 27)).progress == Progress::bad);
  // Smuggling: both framings, or two different lengths, or another coding.
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")).error.empty());
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")).error.empty());
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")).error.empty());
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n")).error.empty());
  auto f = request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"));
  CHECK(f.error.empty());
  CHECK(f.framing == Framing::length);
  CHECK(f.length == 3);
  CHECK(response_framing(head_of("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"), "GET").framing == Framing::none);
  CHECK(response_framing(head_of("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), "HEAD").framing == Framing::none);
  CHECK(response_framing(head_of("HTTP/1.1 200 OK\r\n\r\n"), "GET").framing == Framing::until_close);
  CHECK(status_of(head_of("HTTP/1.1 101 Switching Protocols\r\n\r\n")) == 101);
  CHECK(status_of(head_of("HTTP/1.1 2x0 OK\r\n\r\n")) == 0);
}

TEST_CASE("credential filter: chunked bodies, fed in any pieces, with extensions and trailers") {
  const std::string body = "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t step : {1UL, 2UL, 7UL, body.size()}) {
    ChunkDecoder d;
    std::string out;
    Progress p = Progress::need_more;
    size_t at = 0;
    while (at < body.size() && p == Progress::need_more) {
      size_t used = 0;
      p = d.feed(std::string_view(body).substr(at, step), out, used);
      at += used;
    }
    CAPTURE(step);
    CHECK(p == Progress::done);
    CHECK(out == "Wikipedia in\r\n\r\nchunks.");
    CHECK(body.substr(at) == "NEXT");  // what follows stays for the next message
  }
  for (std::string bad : std::vector<std::string>{"zz\r\n", "4\r\nWikiX\r\n", "4\nWiki\r\n", std::string(2000, '1')}) {
    ChunkDecoder d;
    std::string out;
    size_t used = 0;
    CHECK(d.feed(bad, out, used) == Progress::bad);
  }
  CHECK(chunk("abc") == "3\r\nabc\r\n");
  CHECK(chunk("") == "0\r\n\r\n");
}

TEST_CASE("credential filter: real values echoed back are masked, also across pieces, without holding back the rest") {
  Masker m(bindings());
  CHECK(m.mask("x " + kReal + " y") == "x " + kPh + " y");
  std::string echoed = "data: {\"key\":\"" + kReal + "\"}\n\n";
  std::string out;
  for (char c : echoed) out += m.feed(std::string(1, c));
  out += m.finish();
  CHECK(out == "data: {\"key\":\"" + kPh + "\"}\n\n");
  CHECK(out.find(kReal) == std::string::npos);
  // Text that cannot start a real value is passed on at once (SSE is not delayed).
  Masker n(bindings());
  CHECK(n.feed("event: ping\n\n") == "event: ping\n\n");
  CHECK(n.feed("partial sk-ant") == "partial ");
  CHECK(n.finish() == "sk-ant");
}

TEST_CASE("credential filter: bindings that could inject headers or hide in each other are refused") {
  Intercept bad;
  bad.bindings = {{"K", "ph-1", "real\r\nX-Evil: 1", {{"a.example", 443}}}};
  CHECK_FALSE(Interceptor::create(bad));
  Intercept nested;
  nested.bindings = {{"A", "ph-abc", "r1", {{"a.example", 443}}}, {"B", "ph-abc-def", "r2", {{"a.example", 443}}}};
  CHECK_FALSE(Interceptor::create(nested));
  Intercept nohost;
  nohost.bindings = {{"A", "ph", "r", {}}};
  CHECK_FALSE(Interceptor::create(nohost));
  Intercept ok;
  ok.bindings = {{"A", "ph-a", "r", {{"API.Example.", 443}}}};
  auto made = Interceptor::create(ok);
  REQUIRE(made);
  CHECK((*made)->bound("api.example", 443));
  CHECK_FALSE((*made)->bound("api.example", 80));
  CHECK((*made)->unbound_placeholder("CONNECT other:443 HTTP/1.1\r\nX: ph-a\r\n\r\n", "other", 443) == "A");
  CHECK_FALSE((*made)->unbound_placeholder("CONNECT api.example:443 HTTP/1.1\r\nX: ph-a\r\n\r\n", "api.example", 443));
  // Plain http: refused even to the bound host (never in clear).
  CHECK((*made)->unbound_placeholder("GET http://api.example/ HTTP/1.1\r\nX: ph-a\r\n\r\n", "api.example", -1) == "A");
}

TEST_CASE("credential filter: the per-run CA is a name-constrained P-256 CA, its leaves serverAuth with the host's SAN") {
  auto ca = TlsAuthority::create({{"api.example", 443}, {"127.0.0.1", 8443}}, "");
  REQUIRE(ca);
  BIO* bio = BIO_new_mem_buf((*ca)->ca_pem().data(), static_cast<int>((*ca)->ca_pem().size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  REQUIRE(cert);
  CHECK(X509_check_ca(cert) == 1);
  EVP_PKEY* key = X509_get0_pubkey(cert);
  CHECK(EVP_PKEY_get_bits(key) == 256);
  CHECK(X509_get_ext_by_NID(cert, NID_name_constraints, -1) >= 0);
  CHECK((*ca)->ca_pem().find("PRIVATE") == std::string::npos);
  // A leaf verifies against the CA for its own name, and not for another.
  auto ssl = (*ca)->server_ssl("api.example");
  REQUIRE(ssl);
  X509* leaf = SSL_get_certificate(*ssl);
  REQUIRE(leaf);
  CHECK(X509_check_host(leaf, "api.example", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(leaf, "evil.example", 0, 0, nullptr) != 1);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, cert);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  CHECK(X509_verify_cert(ctx) == 1);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  SSL_free(*ssl);
  // A name outside the constraints gets a leaf no client accepts.
  auto outside = (*ca)->server_ssl("evil.example");
  REQUIRE(outside);
  X509_STORE* store2 = X509_STORE_new();
  X509_STORE_add_cert(store2, cert);
  X509_STORE_CTX* ctx2 = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx2, store2, SSL_get_certificate(*outside), nullptr);
  CHECK(X509_verify_cert(ctx2) != 1);
  CHECK(X509_STORE_CTX_get_error(ctx2) == X509_V_ERR_PERMITTED_VIOLATION);
  X509_STORE_CTX_free(ctx2);
  X509_STORE_free(store2);
  SSL_free(*outside);
  X509_free(cert);
}

TEST_CASE("credential filter: path_under reads a target as a lenient server would") {
  CHECK(path_under("/api/oauth/claude_cli/create_api_key", "/api/oauth/"));
  CHECK(path_under("/api/oauth", "/api/oauth/"));
  CHECK(path_under("/API//oauth\\x?y", "/api/oauth/"));
  CHECK(path_under("/a/b/../../api/oauth/x", "/api/oauth/"));
  CHECK(path_under("/%61pi/%6Fauth/x", "/api/oauth/"));
  CHECK(path_under("/%2561pi/oauth/x", "/api/oauth/"));
  CHECK(path_under("/api;jsessionid=1/oauth/x", "/api/oauth/"));
  CHECK(path_under("https://api.anthropic.com/api/oauth/x", "/api/oauth/"));
  CHECK_FALSE(path_under("/v1/messages", "/api/oauth/"));
  CHECK_FALSE(path_under("/v1/messages?next=/api/oauth/x", "/api/oauth/"));
  CHECK_FALSE(path_under("/api/oauthx", "/api/oauth/"));
  CHECK_FALSE(path_under("/v1/api/oauth/x", "/api/oauth/"));
}
