// The per-run certificate authority of the credential filter,
// and the two OpenSSL contexts it serves with: towards the jail (a leaf
// per bound host, minted on demand and cached, ALPN http/1.1 only) and
// towards the real server (system trust store plus an operator's extra
// anchors, hostname verification; nothing the jail wrote is ever trusted).
//
// The CA key is a P-256 key made in memory at start; it is never written
// anywhere. Its certificate (CA:TRUE, pathlen 0, keyCertSign) is valid
// for 7 days from an hour before start, and name-constrained to the bound
// hosts: even a leaked key could not vouch for any other name.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "credentials/bindings.h"
#include "util/result.h"
#include "util/unique_fd.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct x509_st X509;
typedef struct evp_pkey_st EVP_PKEY;

namespace pj::credentials {

// The run's CA when it is made elsewhere (the supervisor makes it; the
// network filter process mints leaves with it): its key (PKCS#8 PEM, a
// secret) and its certificate.
struct CaPems {
  std::string key_pem;
  std::string cert_pem;
};

class TlsAuthority {
public:
  // A new CA constrained to `hosts`, serving; upstream servers are
  // checked against `upstream`.
  static util::Result<std::unique_ptr<TlsAuthority>> create(const std::vector<BoundHost>& hosts,
                                                            const UpstreamTrust& upstream);
  // The CA made elsewhere (its key must be the certificate's), serving:
  // the filter process's.
  static util::Result<std::unique_ptr<TlsAuthority>> serving_with(const CaPems& given, const UpstreamTrust& upstream);
  // A new CA that serves nothing (no TLS context, no trust store loaded):
  // the supervisor's, which hands it to the filter process.
  // On Linux the CA is made by a child process (none of OpenSSL's memory
  // stays in this one), which runs while the caller goes on: made(),
  // ca_pem() and hand_over() wait for it.
  static util::Result<std::unique_ptr<TlsAuthority>> to_hand_over(const std::vector<BoundHost>& hosts);
  // Wait until the CA is made; its error when it could not be.
  util::Status made() const;
  bool serves() const { return server_ != nullptr; }
  // The CA's key and certificate, to hand to the filter process: once.
  // The key leaves this process with them (freed here, its PEM copy is
  // the caller's), so the handing side keeps no way to mint a leaf for
  // the rest of the run; a second call, or a call on a serving CA (which
  // needs its key), fails.
  util::Result<CaPems> hand_over();
  ~TlsAuthority();
  TlsAuthority(const TlsAuthority&) = delete;
  TlsAuthority& operator=(const TlsAuthority&) = delete;

  // Trust anchors kept unparsed until a server is checked (the system's,
  // when given as text): each certificate's DER and its subject's hash
  // (X509_NAME_hash_ex), for the client context's store to look up by
  // subject as it needs them.
  struct Anchor {
    unsigned long subject_hash;
    std::string der;
  };
  using Anchors = std::vector<Anchor>;

  // The CA certificate, PEM (what the jail trusts); empty when it could
  // not be made (made() says why).
  const std::string& ca_pem() const {
    (void)made();
    return ca_pem_;
  }

  // A server-side SSL for a jail connection to `host`, with its leaf (made
  // once per host, then cached; thread-safe). A client's SNI other than
  // `host` fails the handshake; so does an ALPN offer without http/1.1.
  util::Result<SSL*> server_ssl(const std::string& host);
  // A client-side SSL towards the real `host` (SNI for names; verification
  // of the name or IP address against the trust store).
  util::Result<SSL*> client_ssl(const std::string& host);

private:
  TlsAuthority() = default;
  util::Status make_ca(const std::vector<BoundHost>& hosts);
  util::Status adopt(const CaPems& given);
  util::Status make_contexts(const UpstreamTrust& upstream);
  util::Result<X509*> leaf_for(const std::string& host);

  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_ = nullptr;
  EVP_PKEY* leaf_key_ = nullptr;  // one key for every leaf of this run
  SSL_CTX* server_ = nullptr;
  SSL_CTX* client_ = nullptr;
  std::unique_ptr<Anchors> anchors_;  // the client context's lookup reads them: freed after it
  // The child process making the CA (to_hand_over), until made() read
  // its certificate and key (kept as PEM until handed over).
  struct Maker {
    int pid = -1;
    util::UniqueFd out;
  };
  mutable std::mutex made_mu_;
  mutable std::optional<Maker> maker_;  // under made_mu_
  mutable std::string made_error_;      // under made_mu_
  mutable std::string ca_pem_;          // under made_mu_ while maker_ is set
  mutable std::string key_pem_;         // under made_mu_ while maker_ is set
  std::mutex m_;
  std::map<std::string, X509*> leaves_;  // under m_
};

// The last OpenSSL error queue entry as text (and the queue cleared).
std::string openssl_error();

// The file OpenSSL's default paths take the system's trust anchors from
// in this process: $SSL_CERT_FILE, else the one it was built with. (Its
// certificate directory is looked up lazily, file by file, as servers are
// checked: a filter that may open no file has only this file.)
std::string system_roots_file();

// The hash OpenSSL's hashed lookups file certificate `der` under
// (X509_NAME_hash_ex of its subject), from its subject alone: nothing
// else of it is parsed. nullopt when its first fields are not a
// certificate's.
std::optional<unsigned long> subject_hash_of_der(std::string_view der);

}  // namespace pj::credentials
