// HTTP/1.1 without I/O, the project's one reading of it: message heads,
// request lines and targets, body framing and chunked bodies, as the
// network filter and the credential filter (credentials/substitution.h
// works on these heads) read them. Everything here is bounded and
// strict: what it cannot read with certainty is refused, never guessed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "netproxy/protocol.h"

namespace pj::netproxy::http1 {

inline constexpr size_t kMaxHead = 64 * 1024;  // a request or response head

struct Field {
  std::string name, value;
};

// Whether `a` and `b` are the same ASCII text but for case: how field
// names, tokens and auth schemes compare (RFC 9110 section 5.1).
bool iequal(std::string_view a, std::string_view b);
// `s` without the optional whitespace (spaces and TABs) at its ends that
// a field value may have (RFC 9110 section 5.6.3).
std::string_view trim_ows(std::string_view s);

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

// A request line (RFC 9112 section 3): method SP request-target SP
// HTTP-version. The one reading of what the jail asks for, used by the
// plain proxy and the credential filter alike.
struct RequestLine {
  std::string method, target, version;
};

struct RequestParse {
  Progress progress = Progress::need_more;
  RequestLine line;
  Head head;  // head.start is the request line as received (it passed the checks below)
  size_t consumed = 0;
  int status = 0;     // when bad: 400, 431 (too large) or 505 (version)
  std::string error;  // when bad
};

// Parse a request head at the start of `buf`, strictly: the method is a
// token (RFC 9110 section 5.6.2 tchar), then exactly one SP, a target of
// visible ASCII (no space, TAB or control byte), exactly one SP, and
// "HTTP/1.0" or "HTTP/1.1"; the fields as parse_head() reads them. There
// is no lenient reading: a server may split a line on TAB or runs of
// whitespace (RFC 9112 section 3 allows it), and what it would then see
// must be what was checked.
RequestParse parse_request(std::string_view buf, size_t max = kMaxHead);

// The forms of a request target (RFC 9112 section 3.2).
enum class TargetForm { origin, absolute, authority, asterisk, invalid };
TargetForm target_form(const RequestLine& line);

// What an intercepted connection to host:port may send upstream for
// `line`: the origin-form target. A server takes the authority of an
// absolute-form target over Host (RFC 9112 section 3.2.2), so an
// absolute-form target is accepted only when its authority is host:port
// (the scheme's default port when none is given), and is rewritten to
// origin form. CONNECT and the asterisk form are refused (403): they
// would address something other than this host's resources.
struct OriginTarget {
  std::string target;  // set: what to send
  int status = 0;      // when refused: 400 or 403
  std::string error;   // when refused: a reason the jail can read
};
OriginTarget intercepted_target(const RequestLine& line, std::string_view host, uint16_t port);

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

// Base64 (RFC 4648, padded), for Basic credentials.
std::string base64_encode(std::string_view in);
std::optional<std::string> base64_decode(std::string_view in);

}  // namespace pj::netproxy::http1
