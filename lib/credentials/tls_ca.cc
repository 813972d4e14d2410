#include "credentials/tls_ca.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "netproxy/rules.h"
#include "util/escape.h"
#include "util/secret.h"
#include "util/temp_file.h"
#include "util/unique_fd.h"
#include "util/untrusted.h"

namespace pj::credentials {

using util::Error;

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  std::string out = "unknown TLS error";
  if (e) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out = buf;
  }
  ERR_clear_error();
  return out;
}

namespace {

// One DER element from the front of `in` (taken off it): its tag and its
// whole encoding; nullopt when it does not fit, or uses what no
// certificate's first fields do (a multi-byte tag, an indefinite length).
struct Element {
  unsigned char tag = 0;
  std::string_view whole, content;
};
std::optional<Element> take_element(std::string_view& in) {
  if (in.size() < 2) return std::nullopt;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(in[i]); };
  Element e;
  e.tag = byte(0);
  if ((e.tag & 0x1f) == 0x1f) return std::nullopt;
  size_t len = byte(1), head = 2;
  if (len & 0x80) {
    const size_t n = len & 0x7f;
    if (n == 0 || n > 4 || in.size() < 2 + n) return std::nullopt;
    len = 0;
    for (size_t i = 0; i < n; ++i) len = (len << 8) | byte(2 + i);
    head += n;
  }
  if (in.size() - head < len) return std::nullopt;
  e.whole = in.substr(0, head + len);
  e.content = in.substr(head, len);
  in.remove_prefix(head + len);
  return e;
}

}  // namespace

std::optional<unsigned long> subject_hash_of_der(std::string_view der) {
  constexpr unsigned char kSequence = 0x30, kInteger = 0x02, kVersion = 0xa0;
  auto cert = take_element(der);
  if (!cert || cert->tag != kSequence) return std::nullopt;
  std::string_view rest = cert->content;
  auto tbs = take_element(rest);
  if (!tbs || tbs->tag != kSequence) return std::nullopt;
  // TBSCertificate: [0] version (optional), serialNumber, signature,
  // issuer, validity, subject (RFC 5280 section 4.1).
  std::string_view fields = tbs->content;
  auto f = take_element(fields);
  if (f && f->tag == kVersion) f = take_element(fields);
  if (!f || f->tag != kInteger) return std::nullopt;
  std::optional<Element> subject;
  for (int i = 0; i < 4; ++i)
    if (!(subject = take_element(fields)) || subject->tag != kSequence) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(subject->whole.data());
  X509_NAME* name = d2i_X509_NAME(nullptr, &p, static_cast<long>(subject->whole.size()));
  int ok = 0;
  const unsigned long hash = name ? X509_NAME_hash_ex(name, nullptr, nullptr, &ok) : 0;
  X509_NAME_free(name);
  ERR_clear_error();
  if (!ok) return std::nullopt;
  return hash;
}

std::string system_roots_file() {
  const char* env = std::getenv(X509_get_default_cert_file_env());
  return env && *env ? env : X509_get_default_cert_file();
}

namespace {

// OpenSSL's hashed-directory lookup (X509_LOOKUP_hash_dir) over anchors
// held as DER in memory: X509_verify_cert asks the store for the
// certificates of a subject when it has none of it cached
// (X509_STORE_CTX_get_by_subject), and this lookup adds those of the
// anchors to the store then, as the directory lookup does with its files.
// The store thus parses the anchors of the servers a run checks, not the
// whole system bundle (about 140 certificates, near 1 MiB of heap once
// parsed), with the same trust: what vouches for a server is decided by
// X509_verify_cert against the same certificates. Called from any worker.
int anchors_by_subject(X509_LOOKUP* lookup, X509_LOOKUP_TYPE type, const X509_NAME* name, X509_OBJECT* ret) {
  const auto* anchors = static_cast<const TlsAuthority::Anchors*>(X509_LOOKUP_get_method_data(lookup));
  X509_STORE* store = X509_LOOKUP_get_store(lookup);
  if (type != X509_LU_X509 || !anchors || !store) return 0;
  int ok = 0;
  const unsigned long hash = X509_NAME_hash_ex(name, nullptr, nullptr, &ok);
  if (!ok) return 0;
  for (const auto& a : *anchors) {
    if (a.subject_hash != hash) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(a.der.data());
    X509* x = d2i_X509_AUX(nullptr, &p, static_cast<long>(a.der.size()));
    if (x && X509_NAME_cmp(X509_get_subject_name(x), name) == 0) (void)X509_STORE_add_cert(store, x);
    X509_free(x);
  }
  ERR_clear_error();
  // As the directory lookup answers: the store's object, whose reference
  // the caller takes (X509_OBJECT_set1_X509 takes one of its own: given back).
  X509_STORE_lock(store);
  X509_OBJECT* found = X509_OBJECT_retrieve_by_subject(X509_STORE_get0_objects(store), X509_LU_X509, name);
  X509* cert = found ? X509_OBJECT_get0_X509(found) : nullptr;
  const bool answered = cert && X509_OBJECT_set1_X509(ret, cert) == 1;
  if (answered) X509_free(cert);
  X509_STORE_unlock(store);
  return answered ? 1 : 0;
}

// The anchors of `pem` as DER, each with its subject's hash; none at all
// is an error. Only the subject is parsed here (subject_hash_of_der):
// parsing a whole certificate decodes its public key, which for a whole
// system bundle costs the first connection a run's filter terminates
// several milliseconds. The lookup parses the few a server's chain names.
util::Result<TlsAuthority::Anchors> anchors_of(const std::string& pem, std::string_view what) {
  TlsAuthority::Anchors out;
  ERR_clear_error();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) return Error::invalid(fmt::format("load {}: {}", what, openssl_error()));
  char* name = nullptr;
  char* header = nullptr;
  unsigned char* data = nullptr;
  long len = 0;
  // "CERTIFICATE" and "TRUSTED CERTIFICATE" blocks (its trust settings
  // follow the certificate in its DER, which d2i_X509_AUX reads), as
  // PEM_read_bio_X509_AUX takes them; other blocks are skipped.
  while (PEM_read_bio(bio, &name, &header, &data, &len) == 1) {
    const std::string kind(name);
    const std::string der(reinterpret_cast<const char*>(data), static_cast<size_t>(std::max(len, 0L)));
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if (kind != PEM_STRING_X509 && kind != PEM_STRING_X509_TRUSTED && kind != PEM_STRING_X509_OLD) continue;
    auto hash = subject_hash_of_der(der);
    if (!hash) {
      BIO_free(bio);
      return Error::invalid(fmt::format("load {}: certificate {} has no subject that parses", what, out.size() + 1));
    }
    out.push_back({*hash, der});
  }
  BIO_free(bio);
  // The end of the text says "no start line"; a block that does not parse
  // fails the whole file, as it did PEM_X509_INFO_read_bio.
  const unsigned long e = ERR_peek_last_error();
  if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
    return Error::invalid(fmt::format("load {}: {}", what, openssl_error()));
  ERR_clear_error();
  if (out.empty()) return Error::invalid(fmt::format("load {}: no certificate in it", what));
  return out;
}

// The lookup method for anchors_by_subject, made once for the process.
X509_LOOKUP_METHOD* anchors_method() {
  static X509_LOOKUP_METHOD* const method = [] {
    X509_LOOKUP_METHOD* m = X509_LOOKUP_meth_new("pi-jail trust anchors in memory");
    if (m && X509_LOOKUP_meth_set_get_by_subject(m, anchors_by_subject) != 1) {
      X509_LOOKUP_meth_free(m);
      m = nullptr;
    }
    return m;
  }();
  return method;
}

}  // namespace

namespace {

constexpr long kValidity = 7L * 24 * 3600;

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool random_serial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return false;
  bytes[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(bytes, sizeof bytes, nullptr);
  bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);
  return ok;
}

// A certificate whose subject is O=pi-jail and, unless `cn` is empty, CN=cn.
X509* new_cert(EVP_PKEY* key, const std::string& cn, long not_after) {
  X509* x = X509_new();
  if (!x) return nullptr;
  X509_NAME* name = X509_get_subject_name(x);
  bool ok =
      X509_set_version(x, 2) == 1 && random_serial(x) && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
      X509_gmtime_adj(X509_getm_notAfter(x), not_after) && X509_set_pubkey(x, key) == 1 &&
      X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("pi-jail"), -1, -1,
                                 0) == 1 &&
      (cn.empty() || X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                                reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) == 1);
  if (!ok) {
    X509_free(x);
    return nullptr;
  }
  return x;
}

std::string san_for(const std::string& host) {
  if (auto ip = net::parse_ip(host)) return "IP:" + ip->str();
  return "DNS:" + host;
}

// The name constraints of the CA: the bound names (DNS) and addresses (IP,
// exact). A family of addresses none of which is bound is excluded whole:
// without a permitted subtree of its type, a name is not constrained at
// all (RFC 5280 section 4.2.1.10), and the CA would vouch for any address.
std::string name_constraints(const std::vector<BoundHost>& hosts) {
  std::string out = "critical";
  std::vector<std::string> seen;
  bool v4 = false, v6 = false, dns = false;
  for (const auto& h : hosts) {
    std::string item;
    if (auto ip = net::parse_ip(h.name)) {
      (ip->v6 ? v6 : v4) = true;
      item = ip->v6 ? "permitted;IP:" + ip->str() + "/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
                    : "permitted;IP:" + ip->str() + "/255.255.255.255";
    } else {
      dns = true;
      item = "permitted;DNS:" + h.name;
    }
    if (std::find(seen.begin(), seen.end(), item) != seen.end()) continue;
    seen.push_back(item);
    out += "," + item;
  }
  if (!v4) out += ",excluded;IP:0.0.0.0/0.0.0.0";
  if (!v6) out += ",excluded;IP:::/::";
  // Likewise a run that binds addresses only: names under .invalid
  // (RFC 6761) alone, which no server has.
  if (!dns) out += ",permitted;DNS:invalid";
  return out;
}

int alpn_select(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
                void*) {
  static const unsigned char kHttp11[] = "\x08http/1.1";
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, kHttp11, sizeof kHttp11 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // h2-only: this filter speaks HTTP/1.1 only
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

// The SNI, when sent, must name the host the jail asked the proxy for.
int sni_check(SSL* ssl, int* alert, void*) {
  const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  const char* want = static_cast<const char*>(SSL_get_app_data(ssl));
  if (!sni || !want) return SSL_TLSEXT_ERR_OK;
  if (::strcasecmp(sni, want) == 0) return SSL_TLSEXT_ERR_OK;
  *alert = SSL_AD_UNRECOGNIZED_NAME;
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

}  // namespace

TlsAuthority::~TlsAuthority() {
  (void)made();  // the maker process reaped
  // No OpenSSL call where there is nothing to free: a CA handed over from
  // the supervisor leaves none of OpenSSL's code paged in there.
  for (auto& [h, x] : leaves_) X509_free(x);
  if (server_) SSL_CTX_free(server_);
  if (client_) SSL_CTX_free(client_);
  if (ca_) X509_free(ca_);
  if (ca_key_) EVP_PKEY_free(ca_key_);
  if (leaf_key_) EVP_PKEY_free(leaf_key_);
  util::wipe(key_pem_);
}

util::Result<std::unique_ptr<TlsAuthority>> TlsAuthority::create(const std::vector<BoundHost>& hosts,
                                                                 const UpstreamTrust& upstream) {
  std::unique_ptr<TlsAuthority> a(new TlsAuthority());
  if (auto st = a->make_ca(hosts); !st) return st.take_error();
  if (auto st = a->make_contexts(upstream); !st) return st.take_error();
  return a;
}

util::Result<std::unique_ptr<TlsAuthority>> TlsAuthority::serving_with(const CaPems& given,
                                                                       const UpstreamTrust& upstream) {
  std::unique_ptr<TlsAuthority> a(new TlsAuthority());
  if (auto st = a->adopt(given); !st) return st.take_error();
  if (auto st = a->make_contexts(upstream); !st) return st.take_error();
  return a;
}

namespace {

#ifdef __linux__
// Everything until the end, at most `cap` bytes, waiting at most
// `within` in all; nullopt past either, or on an error. The buffer is
// reserved whole first: no reallocation leaves a copy of a secret behind.
std::optional<std::string> read_fully(int fd, size_t cap, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  std::string out;
  out.reserve(cap);
  char buf[4096];
  auto failed = [&] {
    util::wipe(out);
    util::wipe(buf, sizeof buf);
    return std::nullopt;
  };
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return failed();
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || out.size() + static_cast<size_t>(n) > cap) return failed();
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  util::wipe(buf, sizeof buf);
  return out;
}

// Whether this process has one thread (a fork may then run OpenSSL,
// which allocates: no other thread can hold the allocator's lock).
bool single_threaded() {
  // By its number: /proc/self is a symlink, which this reader does not follow.
  auto status = util::read_untrusted_file(fmt::format("/proc/{}/status", ::getpid()), 64 * 1024);
  if (!status || !*status) return false;
  const size_t at = (*status)->find("\nThreads:\t");
  return at != std::string::npos && (*status)->compare(at + 10, 2, "1\n") == 0;
}

// A child process running `make`, which then exits: OpenSSL's algorithm
// tables and the key generation's memory stay out of this process (the
// supervisor, which keeps no TLS of its own for the run). It writes the
// key's length, the key and the certificate, or an error, to the pipe
// whose reading end is returned with its pid; nullopt when no child could
// be made.
std::optional<std::pair<pid_t, util::UniqueFd>> start_maker(const std::function<util::Result<CaPems>()>& make) {
  if (!single_threaded()) return std::nullopt;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
  util::UniqueFd r(p[0]), w(p[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    // A copy of the supervisor's memory, real credentials included: it
    // never dumps core, and nothing is thrown out of it. It runs OpenSSL
    // without an exec, which the check above allows (one thread).
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    r.reset();
    bool sent = false;
    try {
      auto made = make();
      std::string out = made ? fmt::format("ok {}\n", made->key_pem.size()) + made->key_pem + made->cert_pem
                             : "error " + made.error().message();
      sent = util::write_all(w.get(), out, "the CA maker's pipe").ok();
      util::wipe(out);
    } catch (...) {
    }
    ::_exit(sent ? 0 : 1);
  }
  return std::pair{pid, std::move(r)};
}

// What the maker `pid` wrote to `out` (which is closed then), once it
// ended; one that says nothing within 10 s is killed.
util::Result<CaPems> read_maker(pid_t pid, util::UniqueFd out) {
  auto got = read_fully(out.get(), 64 * 1024, std::chrono::seconds(10));
  out.reset();  // a maker still writing gets EPIPE, never waits
  if (!got) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error::invalid("make the per-run CA: its maker process failed or did not finish in 10 s");
  std::string text = std::move(*got);
  // Only an error's own text is quoted: anything else may hold the key.
  util::Result<CaPems> made = Error::invalid(
      text.starts_with("error ") ? "make the per-run CA: " + util::printable(std::string_view(text).substr(6))
                                 : std::string("make the per-run CA: its maker process said what it cannot"));
  size_t len = 0;
  const size_t nl = text.find('\n');
  if (text.starts_with("ok ") && nl != std::string::npos &&
      std::from_chars(text.data() + 3, text.data() + nl, len).ec == std::errc() && len <= text.size() - nl - 1)
    made = CaPems{text.substr(nl + 1, len), text.substr(nl + 1 + len)};
  util::wipe(text);
  return made;
}
#endif

}  // namespace

util::Result<std::unique_ptr<TlsAuthority>> TlsAuthority::to_hand_over(const std::vector<BoundHost>& hosts) {
  std::unique_ptr<TlsAuthority> a(new TlsAuthority());
#ifdef __linux__
  auto maker = start_maker([&hosts]() -> util::Result<CaPems> {
    TlsAuthority child;
    if (auto st = child.make_ca(hosts); !st) return st.take_error();
    return child.hand_over();
  });
  if (maker) {
    a->maker_ = Maker{maker->first, std::move(maker->second)};
    return a;
  }
#endif
  if (auto st = a->make_ca(hosts); !st) return st.take_error();
  return a;
}

util::Status TlsAuthority::made() const {
  std::lock_guard<std::mutex> lock(made_mu_);
#ifdef __linux__
  if (maker_) {
    auto pems = read_maker(maker_->pid, std::move(maker_->out));
    maker_.reset();
    if (!pems) {
      made_error_ = pems.error().message();
    } else {
      ca_pem_ = std::move(pems->cert_pem);
      key_pem_ = std::move(pems->key_pem);
    }
  }
#endif
  if (!made_error_.empty()) return Error::invalid(made_error_);
  return {};
}

util::Status TlsAuthority::adopt(const CaPems& given) {
  BIO* kb = BIO_new_mem_buf(given.key_pem.data(), static_cast<int>(given.key_pem.size()));
  ca_key_ = kb ? PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(kb);
  BIO* cb = BIO_new_mem_buf(given.cert_pem.data(), static_cast<int>(given.cert_pem.size()));
  ca_ = cb ? PEM_read_bio_X509(cb, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(cb);
  if (!ca_key_ || !ca_) return Error::invalid("read the per-run CA: " + openssl_error());
  if (X509_check_private_key(ca_, ca_key_) != 1)
    return Error::invalid("read the per-run CA: the key is not the certificate's");
  ca_pem_ = given.cert_pem;
  return {};
}

util::Result<CaPems> TlsAuthority::hand_over() {
  if (serves()) return Error::invalid("hand over the per-run CA: it serves here, and keeps its key");
  if (auto st = made(); !st) return st.take_error();
  if (!key_pem_.empty()) {
    CaPems out{std::move(key_pem_), ca_pem_};
    key_pem_.clear();
    return out;
  }
  if (!ca_key_) return Error::invalid("hand over the per-run CA: its key was handed over already");
  BIO* bio = BIO_new(BIO_s_mem());
  if (!bio || PEM_write_bio_PKCS8PrivateKey(bio, ca_key_, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    BIO_free(bio);
    return Error::invalid("write the per-run CA key: " + openssl_error());
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  CaPems out{std::string(data, static_cast<size_t>(len)), ca_pem_};
  OPENSSL_cleanse(data, static_cast<size_t>(len));
  BIO_free(bio);
  EVP_PKEY_free(ca_key_);  // OpenSSL clears a private key's memory as it frees it
  ca_key_ = nullptr;
  return out;
}

util::Status TlsAuthority::make_ca(const std::vector<BoundHost>& hosts) {
  ca_key_ = EVP_EC_gen("P-256");
  if (!ca_key_) return Error::invalid("make the per-run CA key: " + openssl_error());
  unsigned char id[8];
  if (RAND_bytes(id, sizeof id) != 1) return Error::invalid("make the per-run CA: " + openssl_error());
  std::string cn = "pi-jail per-run CA ";
  for (unsigned char c : id) cn += fmt::format("{:02x}", c);
  ca_ = new_cert(ca_key_, cn, kValidity);
  if (!ca_ || X509_set_issuer_name(ca_, X509_get_subject_name(ca_)) != 1 ||
      !add_ext(ca_, ca_, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !add_ext(ca_, ca_, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !add_ext(ca_, ca_, NID_subject_key_identifier, "hash") ||
      !add_ext(ca_, ca_, NID_authority_key_identifier, "keyid:always") ||
      (!hosts.empty() && !add_ext(ca_, ca_, NID_name_constraints, name_constraints(hosts))) ||
      X509_sign(ca_, ca_key_, EVP_sha256()) == 0)
    return Error::invalid("make the per-run CA certificate: " + openssl_error());
  BIO* bio = BIO_new(BIO_s_mem());
  if (!bio || PEM_write_bio_X509(bio, ca_) != 1) {
    BIO_free(bio);
    return Error::invalid("write the per-run CA certificate: " + openssl_error());
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  ca_pem_.assign(data, static_cast<size_t>(len));
  BIO_free(bio);
  return {};
}

util::Status TlsAuthority::make_contexts(const UpstreamTrust& upstream) {
  leaf_key_ = EVP_EC_gen("P-256");
  if (!leaf_key_) return Error::invalid("make the per-run leaf key: " + openssl_error());
  server_ = SSL_CTX_new(TLS_server_method());
  client_ = SSL_CTX_new(TLS_client_method());
  if (!server_ || !client_) return Error::invalid("make the TLS contexts: " + openssl_error());
  for (SSL_CTX* c : {server_, client_}) {
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  }
  SSL_CTX_set_alpn_select_cb(server_, alpn_select, nullptr);
  SSL_CTX_set_tlsext_servername_callback(server_, sni_check);
  SSL_CTX_set_session_cache_mode(server_, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(server_, 0);
  // The anchors sent as text (the system's, an operator's extra ones),
  // parsed when a server's chain names one (anchors_by_subject).
  Anchors anchors;
  auto take = [&anchors](const std::string& pem, std::string_view what) -> util::Status {
    auto more = anchors_of(pem, what);
    if (!more) return more.take_error();
    anchors.insert(anchors.end(), std::make_move_iterator(more->begin()), std::make_move_iterator(more->end()));
    return {};
  };
  if (!upstream.roots_pem) {
    if (SSL_CTX_set_default_verify_paths(client_) != 1)
      return Error::invalid("load the system's trust store: " + openssl_error());
  } else if (auto st = take(*upstream.roots_pem, "the system's trust store"); !st) {
    return st;
  }
  const std::string& extra = upstream.extra_ca_file;
  if (!extra.empty() && SSL_CTX_load_verify_locations(client_, extra.c_str(), nullptr) != 1)
    return Error::invalid(fmt::format("load the upstream CA file {}: {}", extra, openssl_error()));
  if (!upstream.extra_ca_pem.empty())
    if (auto st = take(upstream.extra_ca_pem, "the upstream CA file"); !st) return st;
  if (!anchors.empty()) {
    anchors.shrink_to_fit();
    anchors_ = std::make_unique<Anchors>(std::move(anchors));
    X509_LOOKUP* lookup =
        anchors_method() ? X509_STORE_add_lookup(SSL_CTX_get_cert_store(client_), anchors_method()) : nullptr;
    if (!lookup || X509_LOOKUP_set_method_data(lookup, anchors_.get()) != 1)
      return Error::invalid("load the trust anchors: " + openssl_error());
  }
  SSL_CTX_set_verify(client_, SSL_VERIFY_PEER, nullptr);
  static const unsigned char kHttp11[] = "\x08http/1.1";
  if (SSL_CTX_set_alpn_protos(client_, kHttp11, sizeof kHttp11 - 1) != 0)
    return Error::invalid("set the upstream ALPN: " + openssl_error());
  return {};
}

util::Result<X509*> TlsAuthority::leaf_for(const std::string& host) {
  std::lock_guard<std::mutex> lock(m_);
  if (auto it = leaves_.find(host); it != leaves_.end()) return it->second;
  // A leaf's CN is its host name or absent: a client checks the CN against
  // the CA's DNS constraints when the leaf has no DNS SAN (OpenSSL a
  // host-name-like CN, GnuTLS, git's and wget's, any CN), so an address's
  // leaf, or a name too long for a CN (64), has none.
  X509* x = new_cert(leaf_key_, net::parse_ip(host) || host.size() > 64 ? std::string() : host, kValidity - 60);
  if (!x || X509_set_issuer_name(x, X509_get_subject_name(ca_)) != 1 ||
      !add_ext(x, ca_, NID_basic_constraints, "critical,CA:FALSE") ||
      !add_ext(x, ca_, NID_key_usage, "critical,digitalSignature") ||
      !add_ext(x, ca_, NID_ext_key_usage, "serverAuth") || !add_ext(x, ca_, NID_subject_key_identifier, "hash") ||
      !add_ext(x, ca_, NID_authority_key_identifier, "keyid:always") ||
      !add_ext(x, ca_, NID_subject_alt_name, san_for(host)) || X509_sign(x, ca_key_, EVP_sha256()) == 0) {
    X509_free(x);
    return Error::invalid("make the certificate for " + host + ": " + openssl_error());
  }
  leaves_[host] = x;
  return x;
}

util::Result<SSL*> TlsAuthority::server_ssl(const std::string& host) {
  if (!server_) return Error::invalid("this CA serves no TLS (it is handed to the filter process)");
  auto leaf = leaf_for(host);
  if (!leaf) return leaf.take_error();
  SSL* ssl = SSL_new(server_);
  if (!ssl || SSL_use_certificate(ssl, *leaf) != 1 || SSL_use_PrivateKey(ssl, leaf_key_) != 1 ||
      SSL_add1_chain_cert(ssl, ca_) != 1) {
    SSL_free(ssl);
    return Error::invalid("set up TLS towards the jail: " + openssl_error());
  }
  return ssl;
}

util::Result<SSL*> TlsAuthority::client_ssl(const std::string& host) {
  if (!client_) return Error::invalid("this CA serves no TLS (it is handed to the filter process)");
  SSL* ssl = SSL_new(client_);
  if (!ssl) return Error::invalid("set up TLS towards the server: " + openssl_error());
  bool ok;
  if (auto ip = net::parse_ip(host))
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip->str().c_str()) == 1;
  else
    ok = SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
  if (!ok) {
    SSL_free(ssl);
    return Error::invalid("set the server name to verify: " + openssl_error());
  }
  return ssl;
}

}  // namespace pj::credentials
