// The credential filter's HTTP/1.1 side without I/O (netproxy/http1.h,
// credentials/substitution.h) and its per-run CA (credentials/tls_ca.h).
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "credentials/interceptor.h"
#include "credentials/substitution.h"
#include "credentials/tls_ca.h"
#include "netproxy/http1.h"

using namespace pj::netproxy;
using namespace pj::netproxy::http1;
using namespace pj::credentials;
using pj::credentials::CaPems;
using pj::credentials::Interceptor;
using pj::credentials::TlsAuthority;

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

TEST_CASE("base64 is RFC 4648's: its test vectors, and nothing lenient is decoded") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
  CHECK(base64_decode("Zm9vYg==") == "foob");
  CHECK(base64_decode("Zm9vYmE=") == "fooba");
  CHECK(base64_decode("AP8=") == std::string("\0\xff", 2));
  for (const char* lenient : {" Zm8=", "Zm8=\n", "Zm 8=", "Zm8", "=Zm8", "Zm8==", "Z===", "Zm-_"})
    CHECK_MESSAGE(!base64_decode(lenient).has_value(), lenient);
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

TEST_CASE(
    "credential filter: a refresh token's placeholder is substituted only where its provider's renewal carries it") {
  const std::string ph = "sk-ant-ort01-PLACEHOLDERrrrrrrrrrrrrrrrrrrrrrrrr",
                    gh = "gho_PLACEHOLDERgggggggggggggggggggggg";
  Binding body_only{
      "auth.json anthropic.refresh", ph, "sk-ant-ort01-REAL", {{"platform.claude.com", 443}}, Carriage::token_exchange};
  Binding in_header{"auth.json github-copilot.refresh",
                    gh,
                    "gho_REAL",
                    {{"api.github.com", 443}},
                    Carriage::token_exchange,
                    "Authorization"};
  const std::vector<Binding> bs{body_only, in_header};
  auto try_head = [&](const std::string& field, const std::string& host, RequestKind kind) {
    Head h = head_of("GET /x HTTP/1.1\r\n" + field + "\r\n\r\n");
    return substitute(h, bs, host, 443, kind);
  };
  // Anthropic's renewal carries it in the body only: no header, exchange or not.
  for (auto kind : {RequestKind::api, RequestKind::token_exchange}) {
    auto s = try_head("Authorization: Bearer " + ph, "platform.claude.com", kind);
    CHECK(s.refused);
    CHECK(s.refused_why.find("anthropic.refresh (a refresh token) may go only in its token exchange's body") !=
          std::string::npos);
  }
  // Copilot's in the Authorization field of its token exchange; in any
  // other field, the request line, Basic, or another request: refused.
  CHECK_FALSE(try_head("Authorization: Bearer " + gh, "api.github.com", RequestKind::token_exchange).refused);
  CHECK(try_head("X-Echo: " + gh, "api.github.com", RequestKind::token_exchange).refused);
  CHECK(try_head("Authorization: Basic " + base64_encode("u:" + gh), "api.github.com", RequestKind::token_exchange)
            .refused);
  CHECK(try_head("Authorization: Bearer " + gh, "api.github.com", RequestKind::api).refused);
  Head line = head_of("GET /x?t=" + gh + " HTTP/1.1\r\nAuthorization: Bearer " + gh + "\r\n\r\n");
  CHECK(substitute(line, bs, "api.github.com", 443, RequestKind::token_exchange).refused);
  // An API key is not restricted so.
  Head k = head_of("GET /x HTTP/1.1\r\nX-Anything: " + kPh + "\r\n\r\n");
  CHECK_FALSE(substitute(k, bindings(), "api.anthropic.com", 443).refused);
}

TEST_CASE("credential filter: heads are bounded and strict") {
  CHECK(parse_head("GET / HTTP/1.1\r\nHost: a\r\n").progress == Progress::need_more);
  CHECK(parse_head(std::string(kMaxHead, 'a')).progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\n folded: x\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head("GET / HTTP/1.1\r\nA: x\ry\r\n\r\n").progress == Progress::bad);
  CHECK(parse_head(std::string("GET / HTTP/1.1\r\nA: x\0y\r\n\r\n", 27)).progress == Progress::bad);
  // Smuggling: both framings, or two different lengths, or another coding.
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"))
                  .error.empty());
  CHECK_FALSE(
      request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")).error.empty());
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")).error.empty());
  CHECK_FALSE(request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n")).error.empty());
  auto f = request_framing(head_of("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"));
  CHECK(f.error.empty());
  CHECK(f.framing == Framing::length);
  CHECK(f.length == 3);
  CHECK(response_framing(head_of("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"), "GET").framing ==
        Framing::none);
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
  CHECK(n.finish().empty());  // a prefix of a real value at the very end is dropped, not released
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

namespace {

// One binding (api.example:443), and the run's CA made for it and handed
// over, as the supervisor does: the side that handed it, and what it gave.
struct HandedOver {
  Intercept in;
  std::shared_ptr<Interceptor> holder;
  CaPems ca;
};
HandedOver handed_over() {
  HandedOver h;
  h.in.bindings = {{"A", "ph-a", "r", {{"api.example", 443}}}};
  auto holder = Interceptor::to_hand_over(h.in);
  REQUIRE(holder);
  h.holder = *holder;
  auto ca = h.holder->hand_over_ca();
  REQUIRE(ca);
  h.ca = std::move(*ca);
  return h;
}

}  // namespace

TEST_CASE("credential filter: the run's CA is handed over whole, once; the handing side keeps no key, serves nothing") {
  // The supervisor's: the CA only, no TLS context, no trust store.
  HandedOver h = handed_over();
  CHECK(h.ca.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
  CHECK(h.ca.cert_pem == h.holder->ca_pem());
  // The key went with it: a second hand-over has nothing to give.
  auto again = h.holder->hand_over_ca();
  REQUIRE_FALSE(again);
  CHECK(again.error().message().find("handed over already") != std::string::npos);
  CHECK(h.holder->ca_pem() == h.ca.cert_pem);  // the certificate stays: the jail's bundle names it
  const bool took = h.holder->start({});
  CHECK_FALSE(took);
  // The filter's: the same CA, serving.
  auto filter = Interceptor::serving_with(h.in, h.ca);
  REQUIRE(filter);
  CHECK((*filter)->ca_pem() == h.holder->ca_pem());
  CHECK_FALSE((*filter)->hand_over_ca());  // a serving CA keeps its key
  // A key that is not the certificate's is refused.
  auto other = Interceptor::to_hand_over(h.in);
  REQUIRE(other);
  CaPems mixed{(*other)->hand_over_ca()->key_pem, h.ca.cert_pem};
  auto refused = Interceptor::serving_with(h.in, mixed);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("the key is not the certificate's") != std::string::npos);
}

TEST_CASE("credential filter: the system's trust anchors sent as text must all parse, and hold a certificate") {
  HandedOver h = handed_over();
  // Kept as DER and parsed when a server names one (TlsAuthority): read
  // whole at the start all the same, every block, as before.
  Intercept ok = h.in;
  ok.upstream.roots_pem = "# a comment\n" + h.ca.cert_pem + "junk between blocks\n" + h.ca.cert_pem;
  auto accepted = Interceptor::serving_with(ok, h.ca);
  CHECK_MESSAGE(accepted, (accepted ? std::string() : accepted.error().message()));
  for (const std::string& bad : {h.ca.cert_pem + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                                 std::string("no PEM here\n"), std::string()}) {
    CAPTURE(bad);
    Intercept broken = h.in;
    broken.upstream.roots_pem = bad;
    auto refused = Interceptor::serving_with(broken, h.ca);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message().find("load the system's trust store") != std::string::npos);
  }
}

TEST_CASE(
    "credential filter: plain HTTP is bound to host loopback ports only, and only plain bindings substitute "
    "there") {
  using pj::netproxy::Wire;
  for (const char* host : {"api.example", "10.0.0.1", "::ffff:10.0.0.1", "0.0.0.0", "localhost.example"}) {
    CAPTURE(host);
    Intercept off;
    off.bindings = {{"K", "ph-k", "real", {{host, 80, Wire::plain_http}}}};
    auto refused = Interceptor::create(off);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message().find("plain HTTP to") != std::string::npos);
  }
  Intercept local;
  local.bindings = {{"K", "ph-k", "real", {{"127.0.0.1", 11434, Wire::plain_http}}},
                    {"T", "ph-t", "real-t", {{"api.example", 443}}}};
  auto made = Interceptor::create(local);
  REQUIRE(made);
  // The bound address on its port, however written, and localhost, which
  // names it; no other loopback address (another service may listen
  // there), no other port.
  CHECK((*made)->bound_wire("127.0.0.1", 11434) == Wire::plain_http);
  CHECK((*made)->bound_wire("127.1", 11434) == Wire::plain_http);
  CHECK((*made)->bound_wire("localhost", 11434) == Wire::plain_http);
  CHECK_FALSE((*made)->bound_wire("::1", 11434));
  CHECK_FALSE((*made)->bound_wire("127.0.0.2", 11434));
  CHECK_FALSE((*made)->bound_wire("127.0.0.1", 11435));
  CHECK((*made)->unbound_placeholder("GET / HTTP/1.1\r\nA: ph-k\r\n\r\n", "127.0.0.2", 11434, Wire::plain_http) == "K");
  // A binding of localhost covers both of its addresses.
  Intercept named;
  named.bindings = {{"K", "ph-k", "real", {{"localhost", 11434, Wire::plain_http}}}};
  auto by_name = Interceptor::create(named);
  REQUIRE(by_name);
  for (const char* host : {"localhost", "127.0.0.1", "::1"})
    CHECK_MESSAGE((*by_name)->bound_wire(host, 11434) == Wire::plain_http, host);
  CHECK_FALSE((*by_name)->bound_wire("127.0.0.2", 11434));
  CHECK((*made)->bound_wire("api.example", 443) == Wire::tls);
  // In a plain request to the bound port: its own placeholder passes, a
  // TLS binding's is refused.
  CHECK_FALSE((*made)->unbound_placeholder("GET / HTTP/1.1\r\nA: ph-k\r\n\r\n", "127.0.0.1", 11434, Wire::plain_http));
  CHECK((*made)->unbound_placeholder("GET / HTTP/1.1\r\nA: ph-t\r\n\r\n", "127.0.0.1", 11434, Wire::plain_http) == "T");
  // A plain binding's placeholder is not sent by TLS to the same port, nor anywhere else.
  CHECK((*made)->unbound_placeholder("CONNECT x HTTP/1.1\r\nA: ph-k\r\n\r\n", "127.0.0.1", 11434, Wire::tls) == "K");
  CHECK((*made)->unbound_placeholder("GET / HTTP/1.1\r\nA: ph-k\r\n\r\n", "api.example", 443) == "K");
}

TEST_CASE(
    "credential filter: the per-run CA is a name-constrained P-256 CA, its leaves serverAuth with the host's SAN") {
  auto ca = TlsAuthority::create({{"api.example", 443}, {"127.0.0.1", 8443}}, {});
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

namespace {

// Whether a leaf `ca` mints for `host` verifies against the CA's
// certificate (its name constraints included).
bool leaf_verifies(TlsAuthority& ca, const std::string& host) {
  BIO* bio = BIO_new_mem_buf(ca.ca_pem().data(), static_cast<int>(ca.ca_pem().size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  auto ssl = ca.server_ssl(host);
  if (!cert || !ssl) {
    X509_free(cert);
    return false;
  }
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, cert);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, SSL_get_certificate(*ssl), nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  SSL_free(*ssl);
  X509_free(cert);
  return ok;
}

}  // namespace

TEST_CASE(
    "credential filter: the per-run CA vouches for no address when it binds none, and no name when it binds none") {
  auto names = TlsAuthority::create({{"api.example", 443}}, {});
  REQUIRE(names);
  CHECK(leaf_verifies(**names, "api.example"));
  for (const char* host : {"10.1.2.3", "127.0.0.1", "::1", "2001:db8::1"})
    CHECK_FALSE_MESSAGE(leaf_verifies(**names, host), host);
  auto v4 = TlsAuthority::create({{"127.0.0.1", 8443}}, {});
  REQUIRE(v4);
  CHECK(leaf_verifies(**v4, "127.0.0.1"));
  for (const char* host : {"127.0.0.2", "::1", "api.example", "invalid.example"})
    CHECK_FALSE_MESSAGE(leaf_verifies(**v4, host), host);
  auto v6 = TlsAuthority::create({{"::1", 8443}, {"api.example", 443}}, {});
  REQUIRE(v6);
  CHECK(leaf_verifies(**v6, "::1"));
  CHECK(leaf_verifies(**v6, "api.example"));
  CHECK_FALSE(leaf_verifies(**v6, "127.0.0.1"));
}

TEST_CASE(
    "credential filter: with no credential bound, a login's token endpoints are intercepted (TLS, their port "
    "only), and the CA vouches for them and for the hosts a login's tokens are bound to later") {
  Intercept logins;
  logins.login_endpoints = {{"Auth.Example.", 443}};
  logins.bound_later = {{"api.example", 443}};
  REQUIRE_FALSE(logins.empty());
  auto made = Interceptor::create(logins);
  REQUIRE(made);
  CHECK((*made)->bound_wire("auth.example", 443) == Wire::tls);
  CHECK_FALSE((*made)->bound_wire("auth.example", 8443));
  CHECK_FALSE((*made)->bound_wire("api.example", 443));  // nothing bound there yet
  CHECK_FALSE((*made)->bound_wire("evil.example", 443));
  // No placeholder is bound to a login endpoint.
  CHECK_FALSE((*made)->unbound_placeholder("GET / HTTP/1.1\r\n\r\n", "auth.example", 443));
  auto ca = TlsAuthority::create({{"auth.example", 443}, {"api.example", 443}}, {});
  REQUIRE(ca);
  CHECK(leaf_verifies(**ca, "auth.example"));
  CHECK(leaf_verifies(**ca, "api.example"));
  CHECK_FALSE(leaf_verifies(**ca, "evil.example"));
  // The CA the Interceptor made for itself holds the same names.
  auto handing = Interceptor::to_hand_over(logins);
  REQUIRE(handing);
  auto pems = (*handing)->hand_over_ca();
  REQUIRE(pems);
  auto serving = TlsAuthority::serving_with(*pems, {});
  REQUIRE(serving);
  CHECK(leaf_verifies(**serving, "auth.example"));
  CHECK(leaf_verifies(**serving, "api.example"));
  CHECK_FALSE(leaf_verifies(**serving, "evil.example"));
  // A login endpoint is TLS on a port, a valid name.
  for (const BoundHost& bad :
       {BoundHost{"auth.example", 0}, BoundHost{"auth.example", 80, Wire::plain_http}, BoundHost{"bad name", 443}}) {
    CAPTURE(bad.name);
    Intercept wrong;
    wrong.login_endpoints = {bad};
    CHECK_FALSE(Interceptor::create(wrong));
  }
}

TEST_CASE(
    "trust anchors: the subject hash read from a certificate's DER alone is OpenSSL's for every certificate of the "
    "system bundle, and a DER that is not a certificate's gives none") {
  BIO* bio = BIO_new_file("/etc/ssl/certs/ca-certificates.crt", "r");
  REQUIRE(bio);
  int n = 0;
  std::string first;
  while (X509* x = PEM_read_bio_X509_AUX(bio, nullptr, nullptr, nullptr)) {
    int ok = 0;
    const unsigned long want = X509_NAME_hash_ex(X509_get_subject_name(x), nullptr, nullptr, &ok);
    unsigned char* der = nullptr;
    const int len = i2d_X509_AUX(x, &der);
    REQUIRE(len > 0);
    const std::string d(reinterpret_cast<char*>(der), static_cast<size_t>(len));
    OPENSSL_free(der);
    X509_free(x);
    REQUIRE(ok);
    CHECK(subject_hash_of_der(d) == want);
    if (first.empty()) first = d;
    ++n;
  }
  BIO_free(bio);
  ERR_clear_error();
  CHECK(n > 50);
  REQUIRE_FALSE(first.empty());
  // Every truncation of a certificate, and every byte of its head changed.
  for (size_t cut = 0; cut < first.size(); ++cut)
    CHECK_FALSE(subject_hash_of_der(std::string_view(first).substr(0, cut)));
  for (size_t i = 0; i < 64; ++i)
    for (int v : {0x00, 0x1f, 0x7f, 0x80, 0x84, 0x85, 0xff}) {
      std::string bent = first;
      bent[i] = static_cast<char>(v);
      (void)subject_hash_of_der(bent);  // no crash, no read past the end (ASan)
    }
  CHECK_FALSE(subject_hash_of_der(""));
  CHECK_FALSE(subject_hash_of_der(std::string("\x30\x84\xff\xff\xff\xff", 6)));
  CHECK_FALSE(subject_hash_of_der(std::string("\x30\x80\x00\x00", 4)));  // indefinite length
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
  // A "*" segment of the prefix is any one segment, however spelled.
  const char* sa = "/v1/organization/projects/*/service_accounts";
  CHECK(path_under("/v1/organization/projects/proj_1/service_accounts", sa));
  CHECK(path_under("/v1/organization/projects/proj_1/service_accounts/s/api_keys?x", sa));
  CHECK(path_under("//V1/organization/projects/%2A/Service_Accounts", sa));
  CHECK_FALSE(path_under("/v1/organization/projects/proj_1/files", sa));
  CHECK_FALSE(path_under("/v1/organization/projects/service_accounts", sa));
  CHECK_FALSE(path_under("/v1/messages?next=/api/oauth/x", "/api/oauth/"));
  CHECK_FALSE(path_under("/api/oauthx", "/api/oauth/"));
  CHECK_FALSE(path_under("/v1/api/oauth/x", "/api/oauth/"));
}

TEST_CASE("credential filter: the request line is method SP target SP version, nothing looser") {
  auto ok = parse_request("PATCH /v1/a?b=c HTTP/1.0\r\nA: b\r\n\r\nrest");
  REQUIRE(ok.progress == Progress::done);
  CHECK(ok.line.method == "PATCH");
  CHECK(ok.line.target == "/v1/a?b=c");
  CHECK(ok.line.version == "HTTP/1.0");
  CHECK(ok.consumed == std::string("PATCH /v1/a?b=c HTTP/1.0\r\nA: b\r\n\r\n").size());
  CHECK(parse_request("M-SEARCH~ * HTTP/1.1\r\n\r\n").progress == Progress::done);  // any token is a method
  struct Case {
    std::string line;
    int status;
  } cases[] = {
      {"POST\t/api/oauth/claude_cli/create_api_key  HTTP/1.1", 400},
      {"GET  /x HTTP/1.1", 400},
      {"GET /x  HTTP/1.1", 400},
      {"GET /x HTTP/1.1 ", 400},
      {" GET /x HTTP/1.1", 400},
      {"GET /x\tHTTP/1.1 HTTP/1.1", 400},
      {"GET /x\x0b HTTP/1.1", 400},
      {"GET /x\x7f HTTP/1.1", 400},
      {"G(T /x HTTP/1.1", 400},
      {"GET /x", 400},
      {"GET /x http/1.1", 400},
      {"GET /x HTTP/2.0", 505},
      {"GET /x HTTP/1.1\r\nA: b\x01c", 400},
  };
  for (const auto& c : cases) {
    CAPTURE(c.line);
    auto r = parse_request(c.line + "\r\n\r\n");
    CHECK(r.progress == Progress::bad);
    CHECK(r.status == c.status);
  }
  CHECK(parse_request(std::string(kMaxHead, 'a')).status == 431);
}

TEST_CASE("credential filter: an intercepted request leaves in origin form, only for the bound authority") {
  auto line = [](std::string method, std::string target) { return RequestLine{method, target, "HTTP/1.1"}; };
  auto origin = [&](std::string method, std::string target, uint16_t port = 443) {
    return intercepted_target(line(method, target), "api.anthropic.com", port);
  };
  CHECK(origin("GET", "/v1/messages?x=1").target == "/v1/messages?x=1");
  CHECK(origin("GET", "https://api.anthropic.com/v1/messages?x=1#f").target == "/v1/messages?x=1");
  CHECK(origin("GET", "HTTPS://API.Anthropic.COM.:443").target == "/");
  CHECK(origin("GET", "https://api.anthropic.com?q").target == "/?q");
  CHECK(origin("GET", "http://api.anthropic.com:8443/a", 8443).target == "/a");
  for (std::string bad : {"http://evil.example/steal", "https://evil.example:443/echo", "http://api.anthropic.com/x",
                          "https://api.anthropic.com:444/x", "https://api.anthropic.com@evil.example/x",
                          "https://evil.example@api.anthropic.com/x", "https://[::1]/x"}) {
    CAPTURE(bad);
    auto r = origin("GET", bad);
    CHECK(r.status == 403);
    CHECK(r.target.empty());
    CHECK_FALSE(r.error.empty());
  }
  CHECK(origin("CONNECT", "evil.example:443").status == 403);
  CHECK(origin("CONNECT", "api.anthropic.com:443").status == 403);
  CHECK(origin("OPTIONS", "*").status == 403);
  CHECK(origin("GET", "v1/messages").status == 400);
  CHECK(origin("GET", "ftp://api.anthropic.com/x").status == 400);
}

namespace {
std::string base64url(std::string s) {
  s = base64_encode(s);
  for (auto& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}
std::string percent_all(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("%{:02X}", c);
  return out;
}
std::string json_u_all(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("\\u{:04x}", c);
  return out;
}
// Fed one byte at a time, then finished.
std::string stream(Masker& m, std::string_view s) {
  std::string out;
  for (char c : s) out += m.feed(std::string(1, c));
  return out + m.finish();
}
}  // namespace

TEST_CASE("credential filter: an echo is masked however it is spelled: case, escapes, base64 at any alignment") {
  std::string upper = kReal;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string mixed =
      kReal.substr(0, 10) + percent_all(kReal.substr(10, 5)) + json_u_all(kReal.substr(15, 5)) + kReal.substr(20);
  std::vector<std::string> echoes = {upper, percent_all(kReal), json_u_all(kReal), mixed};
  for (std::string lead : {"", "a", "ab"})  // each alignment of the value in the encoded text
    for (auto enc : {base64_encode(lead + kReal + "tail"), base64url(lead + kReal + "tail")}) echoes.push_back(enc);
  echoes.push_back(base64_encode("{\"k\":\"" + kReal + "\"}"));
  for (const auto& e : echoes) {
    CAPTURE(e);
    Masker m(bindings());
    std::string whole = m.mask("<" + e + ">");
    Masker n(bindings());
    std::string streamed = stream(n, "<" + e + ">");
    for (const auto& out : {whole, streamed}) {
      CHECK(out.find(kReal.substr(13)) == std::string::npos);
      // No encoded form of the value is left either (characters 24 to 39
      // of each alignment's base64 carry the value's part after the
      // prefix it shares with the placeholder).
      for (std::string lead : {"", "a", "ab"}) {
        CHECK(out.find(base64_encode(lead + kReal).substr(24, 16)) == std::string::npos);
        CHECK(out.find(base64url(lead + kReal).substr(24, 16)) == std::string::npos);
      }
    }
    CHECK(n.masked() >= 1);
  }
  // Ordinary text is left as it is.
  Masker plain(bindings());
  CHECK(plain.mask("GET /v1/messages 100% \\u0041 ok") == "GET /v1/messages 100% \\u0041 ok");
}

TEST_CASE("credential filter: a field NAME echoing the key is masked; a compressed body is recognised by its magic") {
  Masker m(bindings());
  CHECK(m.mask("x-" + kReal) == "x-" + kPh);
  CHECK(looks_compressed("\x1f\x8b\x08\x00"));
  CHECK(looks_compressed(std::string("\x78\x9c", 2)));
  CHECK(looks_compressed(std::string("\x78\x01", 2)));
  CHECK(looks_compressed(std::string("\x78\x5e", 2)));
  CHECK(looks_compressed(std::string("\x78\xda", 2)));
  CHECK(looks_compressed(std::string("\x28\xb5\x2f\xfd", 4)));
  CHECK_FALSE(looks_compressed("{\"a\":1}"));
  CHECK_FALSE(looks_compressed("x"));
  CHECK_FALSE(looks_compressed(std::string("\x28\xb5\x2f", 3)));
}

TEST_CASE("credential filter: a token response's tokens must all be placeholders, at any depth") {
  const std::vector<std::string> ph = {"PH_A", "PH_R"};
  CHECK_FALSE(unrewritten_token(R"({"access_token":"PH_A","refresh_token":"PH_R","expires_in":3600})", ph));
  CHECK_FALSE(unrewritten_token(R"({"error":"invalid_grant"})", ph));
  CHECK(unrewritten_token(R"({"access_token":"PH_A","x":{"refresh_token":"real"}})", ph) == "refresh_token");
  CHECK(unrewritten_token(R"({"access_token":"PH_A","x":[[{"access_token":"real"}]]})", ph) == "access_token");
  CHECK(unrewritten_token(R"({"access_token":{"value":"PH_A"}})", ph) == "access_token");
  CHECK(unrewritten_token(R"({"refresh\u005ftoken":"real"})", ph) == "refresh_token");
  CHECK(unrewritten_token("access_token=real&token_type=bearer", ph) == "access_token");
  CHECK_FALSE(unrewritten_token("<html>bad gateway</html>", ph));
}

TEST_CASE("credential filter: any run of 16 or more bytes of a key's secret part is masked; shorter runs pass") {
  // kReal's secret part (after the prefix it shares with kPh) is "REALVALUE-0123456789".
  for (std::string echo :
       std::vector<std::string>{"truncated " + kReal.substr(0, 30), "sub " + kReal.substr(15, 16) + " end",
                                "lower realvalue-0123456 x", "esc REALVALUE%2D01234%35%36 x"}) {
    CAPTURE(echo);
    Masker m(bindings());
    std::string whole = m.mask(echo);
    Masker n(bindings());
    std::string streamed = stream(n, echo);
    CHECK(whole.find(kPh) != std::string::npos);  // streamed, a truncated echo at the end is dropped instead
    for (const auto& out : {whole, streamed}) {
      CAPTURE(out);
      CHECK(out.find("VALUE-0123") == std::string::npos);
      CHECK(out.find("value-0123") == std::string::npos);
    }
  }
  Masker m(bindings());
  CHECK(m.mask("REALVALUE-01234 and 0123456789") == "REALVALUE-01234 and 0123456789");  // 15 and 10 bytes
  Masker n(bindings());
  CHECK(stream(n, "ends with REALVALUE-0") == "ends with REALVALUE-0");
  Masker e(bindings());
  CHECK(e.feed("event: ping\n\n") == "event: ping\n\n");
}
