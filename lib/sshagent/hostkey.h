// SSH public keys and signatures (RFC 4253 6.6, RFC 5656, RFC 8709, RFC
// 8332) checked with OpenSSL: whether a host key signed some data.
#pragma once

#include <string>
#include <string_view>

namespace pj::sshagent {

// The key type a public key blob names ("ssh-ed25519"), or "" when the
// blob is not a well-formed key of a type verify_signature() knows.
std::string key_type(std::string_view key_blob);

// Whether `sig_blob` (string algorithm, string signature) is a valid
// signature of `data` by `key_blob`. Ed25519, ECDSA on P-256/384/521 and
// RSA with SHA-2 (rsa-sha2-256/512; never SHA-1) are known; anything else,
// and anything malformed, is false.
bool verify_signature(std::string_view key_blob, std::string_view data, std::string_view sig_blob);

}  // namespace pj::sshagent
