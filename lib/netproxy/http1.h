// HTTP/1.1 as the credential filter reads it on an intercepted connection
// (issue 17), without I/O: message heads, chunked bodies, placeholder
// substitution in request header values, and masking of real values in
// what comes back. Everything here is bounded and strict: what it cannot
// read with certainty is refused, never guessed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "netproxy/intercept.h"
#include "netproxy/protocol.h"

namespace pj::netproxy::http1 {

inline constexpr size_t kMaxHead = 64 * 1024;        // a request or response head
inline constexpr size_t kMaxExchangeBody = 1 << 20;  // a token exchange's body, either way

struct Field {
  std::string name, value;
};

// A request or response head: the start line and its fields, in order.
struct Head {
  std::string start;  // "POST /v1/messages HTTP/1.1", "HTTP/1.1 200 OK"
  std::vector<Field> fields;

  std::optional<std::string_view> get(std::string_view name) const;  // the first, case-insensitive
  size_t count(std::string_view name) const;
  void erase(std::string_view name);
  void set(std::string_view name, std::string value);  // replaces every one, or appends
  // Whether a comma-separated field (Connection, Transfer-Encoding) lists `token`.
  bool lists(std::string_view name, std::string_view token) const;
  std::string serialise() const;  // start line, fields, blank line
};

struct HeadParse {
  Progress progress = Progress::need_more;
  Head head;
  size_t consumed = 0;
  std::string error;  // when bad
};

// Parse a head at the start of `buf` (CRLF line ends; no obsolete line
// folding; field names are tokens; values hold no NUL or bare CR). More
// than `max` bytes without its end is bad.
HeadParse parse_head(std::string_view buf, size_t max = kMaxHead);

// How the body that follows a head is delimited.
enum class Framing { none, length, chunked, until_close };
struct BodyFraming {
  Framing framing = Framing::none;
  std::uint64_t length = 0;
  std::string error;  // set: the message cannot be framed with certainty (refuse it)
};
// RFC 9112 section 6: a request has a body only by Content-Length or
// chunked; both, several different lengths, or another transfer coding
// are refused (request smuggling).
BodyFraming request_framing(const Head& h);
// A response: none for HEAD, 1xx, 204 and 304; else chunked, the length,
// or until the connection closes.
BodyFraming response_framing(const Head& h, std::string_view request_method);

// The status code of a response start line; 0 when it is not one.
int status_of(const Head& response);

// Decodes a chunked body as it arrives (RFC 9112 section 7.1); chunk
// extensions and trailers are read and dropped. Bounded: a size line or
// the trailers past kMaxHead are bad.
class ChunkDecoder {
public:
  // Appends the payload in `in` to `out`; returns done once the last
  // chunk and trailers are read (`used`: bytes of `in` that were the body).
  Progress feed(std::string_view in, std::string& out, size_t& used);
  const std::string& error() const { return error_; }

private:
  enum class S { size, data, data_crlf, trailer } s_ = S::size;
  std::string line_;
  std::uint64_t left_ = 0;
  size_t trailer_bytes_ = 0;
  std::string error_;
};

// One chunk of a chunked body ("" gives the last chunk).
std::string chunk(std::string_view payload);

// What to do with a request to `host`:`port` (an intercepted, bound host).
struct Substitution {
  bool refused = false;
  std::string refused_binding;  // a binding whose placeholder was seen but is not bound here
  std::vector<std::string> used;  // bindings substituted (names), in order, once each
  std::vector<std::string> used_placeholders;  // their placeholders (the jail's own), once each
  // Renderings of real values sent (a Basic credential's base64) and the
  // jail's own: masked in the response like the values themselves.
  std::vector<std::pair<std::string, std::string>> renderings;
};

// Whether binding `b` may be sent to host:port.
bool bound_to(const Binding& b, std::string_view host, uint16_t port);

// The names of the bindings whose placeholder appears in `text` or in its
// percent-decoded form.
std::vector<const Binding*> placeholders_in(std::string_view text, const std::vector<Binding>& bindings);

// Replace placeholders in the request's header VALUES by the real values
// of the bindings bound to host:port: any field, and inside
// `Authorization: Basic` the decoded user:password. A placeholder of a
// binding not bound here anywhere in the start line or the fields (or a
// decoded Basic credential, or percent-decoded) refuses the request and
// changes nothing. The start line is never rewritten.
Substitution substitute(Head& request, const std::vector<Binding>& bindings, std::string_view host, uint16_t port);

// Whether a request target (origin- or absolute-form) names `prefix`
// ("/api/oauth/") or something under it, as a lenient server might read
// it: query and fragment dropped, percent-decoded until stable, case
// folded, backslashes as slashes, empty, "." and ";params" segments
// dropped and ".." resolved. Fails closed: anything that might be the
// prefix is.
bool path_under(std::string_view target, std::string_view prefix);

// Base64 (RFC 4648, padded), for Basic credentials.
std::string base64_encode(std::string_view in);
std::optional<std::string> base64_decode(std::string_view in);

// Replaces real values by their placeholders in a stream (a response's
// fields and body), holding back only the tail that could still become a
// real value, so a streamed response (SSE) is not delayed.
class Masker {
public:
  explicit Masker(const std::vector<Binding>& bindings,
                  const std::vector<std::pair<std::string, std::string>>& renderings = {});
  // The masked bytes safe to send now.
  std::string feed(std::string_view in);
  // The held-back rest (end of the body).
  std::string finish();
  // A whole string at once (header values).
  std::string mask(std::string_view s) const;
  std::uint64_t masked() const { return masked_; }

private:
  std::vector<std::pair<std::string, std::string>> pairs_;  // real, placeholder
  std::string held_;
  std::uint64_t masked_ = 0;
};

}  // namespace pj::netproxy::http1
