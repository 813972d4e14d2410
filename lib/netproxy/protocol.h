// The two proxy protocols the jail speaks, parsed without I/O: an HTTP
// proxy request head (CONNECT, or an absolute-form http:// request), and
// SOCKS5 (no authentication, CONNECT only). Every input is bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pj::netproxy {

inline constexpr size_t kMaxHttpHead = 16 * 1024;

enum class Progress { need_more, done, bad };

// Where a proxy request wants to go.
struct Target {
  std::string host;  // as given (normalised later by the rules)
  int port = 0;
};

struct HttpRequest {
  Progress progress = Progress::need_more;
  int status = 0;       // when bad: the status to answer (400, 405, 431, ...)
  std::string error;    // when bad
  bool tunnel = false;  // CONNECT
  Target target;
  std::string upstream;  // absolute-form: the request head to send upstream (Host from `target`)
  size_t consumed = 0;   // bytes of the buffer that were the head
};

// Parse the head at the start of `buf` (http1::parse_request reads it).
HttpRequest parse_http_request(std::string_view buf);

// "host:port" or "[v6]:port" (RFC 3986 section 3.2, no userinfo), the
// host as written (brackets kept); `default_port` when none is given (0:
// a port is required).
std::optional<Target> parse_authority(std::string_view authority, int default_port);

// The standard reason phrase of an HTTP status (RFC 9110 section 15).
const char* reason_phrase(int status);

// The reason phrase of a 403 for a destination the rules refused: clients
// that show only the status line (Node's HTTPS client for a CONNECT) then
// still name the host and the fix. `host` is the jail's text: kept to
// letters, digits and ".-:_[]" (anything else becomes '?'), at most
// kMaxPhraseHost bytes, so the line stays one printable header line.
inline constexpr size_t kMaxPhraseHost = 100;
std::string refusal_reason_phrase(std::string_view host, int port);

// A complete HTTP response for a refusal or an error (closes the connection).
std::string http_response(int status, std::string_view reason, std::string_view body);

// SOCKS5 replies (RFC 1928 section 6).
enum class SocksReply : uint8_t {
  succeeded = 0,
  general_failure = 1,
  not_allowed = 2,
  network_unreachable = 3,
  host_unreachable = 4,
  connection_refused = 5,
  command_not_supported = 7,
  address_type_not_supported = 8,
};

struct SocksGreeting {
  Progress progress = Progress::need_more;
  bool no_auth_offered = false;
  size_t consumed = 0;
};
SocksGreeting parse_socks_greeting(std::string_view buf);

struct SocksRequest {
  Progress progress = Progress::need_more;
  SocksReply reply = SocksReply::succeeded;  // when bad: what to answer
  uint8_t command = 0;
  Target target;
  size_t consumed = 0;
};
SocksRequest parse_socks_request(std::string_view buf);

std::string socks_reply(SocksReply r);

}  // namespace pj::netproxy
