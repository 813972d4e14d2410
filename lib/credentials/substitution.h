// The credential filter's work on an intercepted connection's HTTP/1.1
// (heads read by netproxy/http1.h), without I/O: placeholder substitution
// in request header values, the token-exchange and minting checks on a
// request, and masking of real values in what comes back. Like the
// parser, bounded and strict: what it cannot read with certainty is
// refused, never guessed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "credentials/bindings.h"
#include "netproxy/http1.h"

namespace pj::credentials {

using netproxy::http1::Head;

inline constexpr size_t kMaxExchangeBody = 1 << 20;  // a token exchange's body, either way

// What to do with a request to `host`:`port` (an intercepted, bound host).
struct Substitution {
  bool refused = false;
  std::string refused_binding;                 // a binding whose placeholder was seen but is not bound here
  std::string refused_why;                     // when refused: the reason, naming the binding (never a value)
  std::vector<std::string> used;               // bindings substituted (names), in order, once each
  std::vector<std::string> used_placeholders;  // their placeholders (the jail's own), once each
  // Renderings of real values sent (a Basic credential's base64) and the
  // jail's own: masked in the response like the values themselves.
  std::vector<std::pair<std::string, std::string>> renderings;
};

// Whether binding `b` may be sent to host:port over `wire` (a plain
// binding to a loopback name matches every loopback name on its port).
bool bound_to(const Binding& b, std::string_view host, uint16_t port, Wire wire = Wire::tls);

// The names of the bindings whose placeholder appears in `text` or in its
// percent-decoded form.
std::vector<const Binding*> placeholders_in(std::string_view text, const std::vector<Binding>& bindings);

// Replace placeholders in the request's header VALUES by the real values
// of the bindings bound to host:port: any field, and inside
// `Authorization: Basic` the decoded user:password. A placeholder of a
// binding not bound here anywhere in the start line or the fields (or a
// decoded Basic credential, or percent-decoded) refuses the request and
// changes nothing. The start line is never rewritten.
// What the request is to its host: an ordinary call, or a provider's token
// exchange (TokenExchange::is_token_endpoint), the only request a refresh
// token's placeholder may go in (Carriage::token_exchange).
enum class RequestKind { api, token_exchange };

// `wire`: how this connection is spoken (only bindings for it apply).
Substitution substitute(Head& request, const std::vector<Binding>& bindings, std::string_view host, uint16_t port,
                        RequestKind kind = RequestKind::api, Wire wire = Wire::tls);

// Whether a request target (origin- or absolute-form) names `prefix`
// ("/api/oauth/") or something under it, as a lenient server might read
// it: query and fragment dropped, percent-decoded until stable, case
// folded, backslashes as slashes, empty, "." and ";params" segments
// dropped and ".." resolved. A "*" segment of `prefix` stands for any one
// segment ("/v1/organization/projects/*/api_keys"). Fails closed: anything
// that might be the prefix is.
bool path_under(std::string_view target, std::string_view prefix);
// Whether a request target names `path`, read as path_under reads it
// ("/v1/oauth/token/", "//v1/oauth/token", "/v1/%6fauth/token;x" all name
// "/v1/oauth/token"), or with more after its last segment, which some
// servers route to it too ("token.json": a format suffix; "token.",
// "token%00": characters they drop). Fails closed: "tokens" is one.
bool names_path(std::string_view target, std::string_view path);
// Every %XX decoded once; a '%' not followed by two hex digits stays.
std::string percent_decode(std::string_view s);

// Replaces real values by their placeholders in a stream (a response's
// fields and body), holding back only the tail that could still become a
// real value, so a streamed response (SSE) is not delayed. A real value
// is found however the server spells it: in either case, with any of its
// bytes percent-escaped (%XX), JSON-escaped (\u00XX, "\/"), and in base64
// and base64url at each of the three byte alignments (the characters that
// depend on the value alone; RFC 4648 sections 4 and 5), and so is any
// run of kMinRun or more consecutive bytes of its secret part (what
// follows the prefix it shares with its placeholder): a substring or a
// truncated echo. What it cannot
// find is any other transformation (a hash, a cipher, a compressed body:
// the filter refuses compressed bodies, and trusts bound hosts not to
// transform a key otherwise).
class Masker {
public:
  static constexpr size_t kMinRun = 16;
  explicit Masker(const std::vector<Binding>& bindings,
                  const std::vector<std::pair<std::string, std::string>>& renderings = {});
  // The masked bytes safe to send now.
  std::string feed(std::string_view in);
  // The end of the stream: a held-back tail (a prefix of a real value,
  // perhaps a truncated echo) is dropped, never released.
  std::string finish();
  // A whole string at once (a field name or value, a status line).
  std::string mask(std::string_view s) const;
  std::uint64_t masked() const { return masked_; }

private:
  enum class End { more_may_come, final };
  // Masks `data` into `out`; returns how much of `data` was decided (the
  // rest may be the start of a real value; only with End::more_may_come).
  size_t scan(std::string_view data, End end, std::string& out, std::uint64_t& masked) const;
  std::vector<std::pair<std::string, std::string>> pairs_;  // how a real value is written, what replaces it
  std::vector<std::pair<std::string, std::string>> runs_;   // a real value's secret part, its placeholder
  std::array<bool, 256> run_starts_{};                      // bytes that may start a run, case-folded
  // The fast path's tables, case-folded (may_start): bytes that may start
  // a spelling alone (an escape's first byte, a one-byte value), bytes
  // that may start one, and byte pairs that may (a value's first two, any
  // two consecutive bytes of a secret part).
  std::array<bool, 256> starts_alone_{}, starts_{};
  std::vector<bool> starts_pair_ = std::vector<bool>(1 << 16);
  bool may_start(std::string_view data, size_t at) const;
  std::string held_;
  std::uint64_t masked_ = 0;
};

// The first member named access_token or refresh_token (RFC 6749
// section 5.1), at any depth of a token response's JSON `body`, whose
// value is not one of `placeholders`: a token a rewrite of the top level
// alone would let through. A body that is not JSON and names either
// member anywhere counts too. nullopt: none.
std::optional<std::string> unrewritten_token(std::string_view body, const std::vector<std::string>& placeholders);

// Whether a body starts with the magic of gzip (1f 8b), zlib (78 01, 5e,
// 9c, da) or zstd (28 b5 2f fd): compressed whatever its label says, so
// it cannot be scanned for an echoed value.
bool looks_compressed(std::string_view body_start);

}  // namespace pj::credentials
