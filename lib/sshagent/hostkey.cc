#include "sshagent/hostkey.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <memory>

#include "sshagent/wire.h"

namespace pj::sshagent {

namespace {

template <auto Free>
struct Deleter {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM_free>>;
using EcSigPtr = std::unique_ptr<ECDSA_SIG, Deleter<ECDSA_SIG_free>>;

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// An SSH mpint that must be positive: two's complement, big-endian, with
// no superfluous leading zero byte.
BnPtr positive_mpint(std::string_view s) {
  if (s.empty() || (static_cast<unsigned char>(s[0]) & 0x80)) return nullptr;
  if (s.size() > 1 && s[0] == 0 && !(static_cast<unsigned char>(s[1]) & 0x80)) return nullptr;
  if (s.size() > 2048) return nullptr;  // 16384 bits: beyond any key of use
  return BnPtr(BN_bin2bn(bytes(s), static_cast<int>(s.size()), nullptr));
}

PkeyPtr from_params(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) <= 0)
    return nullptr;
  return PkeyPtr(key);
}

struct Curve {
  std::string_view key_type, curve_id;
  const char* group;
  const EVP_MD* (*md)();
};
const Curve kCurves[] = {
    {"ecdsa-sha2-nistp256", "nistp256", "P-256", EVP_sha256},
    {"ecdsa-sha2-nistp384", "nistp384", "P-384", EVP_sha384},
    {"ecdsa-sha2-nistp521", "nistp521", "P-521", EVP_sha512},
};

const Curve* curve_of(std::string_view type) {
  for (const auto& c : kCurves)
    if (c.key_type == type) return &c;
  return nullptr;
}

// A parsed public key: OpenSSL's key and its SSH type.
struct Key {
  PkeyPtr pkey;
  std::string type;
};

Key parse_key(std::string_view blob) {
  WireReader r(blob);
  std::string type(r.string());
  if (type == "ssh-ed25519") {
    std::string_view pk = r.string();
    if (!r.done() || pk.size() != 32) return {};
    return {PkeyPtr(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes(pk), pk.size())), type};
  }
  if (const Curve* c = curve_of(type)) {
    std::string_view id = r.string(), point = r.string();
    if (!r.done() || id != c->curve_id || point.empty()) return {};
    ParamBldPtr bld(OSSL_PARAM_BLD_new());
    if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, c->group, 0) ||
        !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()))
      return {};
    return {from_params("EC", bld.get()), type};
  }
  if (type == "ssh-rsa") {
    BnPtr e = positive_mpint(r.string()), n = positive_mpint(r.string());
    if (!r.done() || !e || !n || BN_num_bits(n.get()) < 1024) return {};
    ParamBldPtr bld(OSSL_PARAM_BLD_new());
    if (!bld || !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) ||
        !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e.get()))
      return {};
    return {from_params("RSA", bld.get()), type};
  }
  return {};
}

bool digest_verify(EVP_PKEY* key, const EVP_MD* md, std::string_view data, std::string_view sig) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), bytes(sig), sig.size(), bytes(data), data.size()) == 1;
}

// An SSH ECDSA signature (mpint r, mpint s) as the DER OpenSSL verifies.
std::string ecdsa_der(std::string_view inner) {
  WireReader r(inner);
  BnPtr rr = positive_mpint(r.string()), ss = positive_mpint(r.string());
  if (!r.done() || !rr || !ss) return {};
  EcSigPtr sig(ECDSA_SIG_new());
  if (!sig || ECDSA_SIG_set0(sig.get(), rr.get(), ss.get()) != 1) return {};
  rr.release(), ss.release();  // owned by sig now
  int n = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (n <= 0) return {};
  std::string der(static_cast<size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &p) != n) return {};
  return der;
}

}  // namespace

std::string key_type(std::string_view key_blob) {
  Key k = parse_key(key_blob);
  return k.pkey ? k.type : std::string();
}

bool verify_signature(std::string_view key_blob, std::string_view data, std::string_view sig_blob) {
  Key key = parse_key(key_blob);
  if (!key.pkey) return false;
  WireReader r(sig_blob);
  std::string_view alg = r.string(), sig = r.string();
  if (!r.done()) return false;
  if (key.type == "ssh-ed25519")
    return alg == "ssh-ed25519" && sig.size() == 64 && digest_verify(key.pkey.get(), nullptr, data, sig);
  if (const Curve* c = curve_of(key.type)) {
    std::string der = alg == key.type ? ecdsa_der(sig) : std::string();
    return !der.empty() && digest_verify(key.pkey.get(), c->md(), data, der);
  }
  if (key.type == "ssh-rsa") {
    const EVP_MD* md = alg == "rsa-sha2-256" ? EVP_sha256() : alg == "rsa-sha2-512" ? EVP_sha512() : nullptr;
    return md && digest_verify(key.pkey.get(), md, data, sig);
  }
  return false;
}

}  // namespace pj::sshagent
