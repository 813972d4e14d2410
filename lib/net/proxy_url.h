// The upstream HTTP proxy the network filter connects out through
// (`[network] upstream_proxy`, or the host's HTTPS_PROXY and NO_PROXY):
// its URL, and the list of destinations reached without it. Parsed once
// here for the policy (explain, errors at file:line) and the filter (which
// connection goes through the proxy). Pure: no sockets, no DNS.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "util/result.h"

namespace pj::net {

// "http://[USER[:PASSWORD]@]HOST:PORT".
struct ProxyUrl {
  std::string host;  // normalise_host(): lower case; a literal canonical, without brackets
  int port = 0;
  // The userinfo, percent-decoded. Secrets: never in a message, a log, a
  // report or the jail; redacted() is what may be shown.
  std::optional<std::string> user;
  std::string password;
  std::string authority() const;  // "proxy.corp:3128", "[fd00::1]:3128"
  std::string redacted() const;   // "http://user:***@proxy.corp:3128" ("http://proxy.corp:3128" without a user)
  bool operator==(const ProxyUrl&) const = default;
};

// The scheme must be http:// (any case): the filter speaks plain HTTP to
// the proxy, then TLS or anything else inside the tunnel. A port (1 to
// 65535) is required; a trailing "/" is allowed, any other path, a query
// or a fragment is not. USER and PASSWORD may hold %XX escapes (for ':',
// '@' or '/' in them) but no control character once decoded. The error
// never repeats the text (it may hold a password): the caller shows
// redact_userinfo(text).
util::Result<ProxyUrl> parse_proxy_url(std::string_view text);

// `text` with a password masked, for an error message about a value that
// may not parse: everything between the scheme and the last '@' after it
// becomes USER:***, USER being what precedes the first ':' there.
std::string redact_userinfo(std::string_view text);

// NO_PROXY as curl, wget and most tools read it: entries separated by
// commas (spaces around them ignored), each one of
//   *                    every destination (the proxy is never used)
//   example.com          that name and every name below it; a leading
//                        "." or "*." is ignored (".example.com" is the same)
//   192.0.2.7, [2001:db8::7]  that address when the jail asks for it literally
//   10.0.0.0/8, fd00::/8 an address of that range asked for literally
// each name or address with an optional ":PORT" (that port only). A name
// never matches a range: the filter does not resolve names that the
// proxy would. Entries that are none of these are ignored (and listed by
// ignored()): their destinations go through the proxy.
class NoProxy {
public:
  static NoProxy parse(std::string_view list);
  // Whether host:port is reached directly. `host`: normalise_host()'s form.
  bool matches(std::string_view host, int port) const;
  bool empty() const { return !all_ && entries_.empty(); }
  // The entries understood, in their normal form and order, joined by
  // commas: parse(str()) reads the same list.
  std::string str() const;
  const std::vector<std::string>& ignored() const { return ignored_; }

private:
  struct Entry {
    std::string host;  // a name, or an address's canonical text (empty for a range)
    std::optional<IpAddress> net;
    int prefix = -1;  // a range's length; -1: not a range
    int port = 0;     // 0: every port
  };
  bool all_ = false;
  std::vector<Entry> entries_;
  std::vector<std::string> ignored_;
};

}  // namespace pj::net
