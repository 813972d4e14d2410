#include "netproxy/protocol.h"

#include "net/address.h"
#include "netproxy/http1.h"
#include "util/numbers.h"

#include <arpa/inet.h>

#include <cstring>

#include <fmt/format.h>

namespace pj::netproxy {

namespace {

HttpRequest bad(int status, std::string error) {
  HttpRequest r;
  r.progress = Progress::bad;
  r.status = status;
  r.error = std::move(error);
  return r;
}

}  // namespace

std::optional<Target> parse_authority(std::string_view a, int default_port) {
  Target t;
  auto split = net::split_host_port(a);
  if (!split) return std::nullopt;
  t.host = std::string(split->host);
  std::string_view port = split->port;
  if (t.host.empty() || t.host.find_first_of("/@\\") != std::string::npos) return std::nullopt;
  for (unsigned char ch : t.host)
    if (ch <= 0x20 || ch >= 0x7f) return std::nullopt;  // controls, spaces, NUL, non-ASCII
  if (port.empty()) {
    if (default_port == 0) return std::nullopt;
    t.port = default_port;
    return t;
  }
  auto number = util::parse_port(port);
  if (!number) return std::nullopt;
  t.port = *number;
  return t;
}

HttpRequest parse_http_request(std::string_view buf) {
  http1::RequestParse p = http1::parse_request(buf, kMaxHttpHead);
  if (p.progress == Progress::need_more) return {};
  if (p.progress == Progress::bad) return bad(p.status, p.error);
  const http1::RequestLine& line = p.line;
  HttpRequest r;
  r.consumed = p.consumed;
  if (line.method == "CONNECT") {
    auto t = parse_authority(line.target, 0);
    if (!t) return bad(400, "CONNECT needs host:port");
    r.tunnel = true;
    r.target = *t;
    r.progress = Progress::done;
    return r;
  }
  // Absolute form: http://authority/path. https:// would need TLS here.
  std::string_view target = line.target;
  constexpr std::string_view kHttp = "http://";
  if (target.size() < kHttp.size() || !http1::iequal(target.substr(0, kHttp.size()), kHttp))
    return bad(400, "a proxy request needs CONNECT or an absolute http:// URL");
  std::string_view rest = target.substr(kHttp.size());
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  path = path.substr(0, path.find('#'));  // a fragment is never sent
  auto t = parse_authority(authority, 80);
  if (!t) return bad(400, "malformed URL authority");
  r.target = *t;
  // "http://h?q" asks for "/?q": the query is kept.
  r.upstream = fmt::format("{} {}{} {}\r\n", line.method, path.starts_with("/") ? "" : "/", path, line.version);
  // The one Host header is the checked target's, whatever the client sent.
  r.upstream += t->port == 80 ? fmt::format("Host: {}\r\n", t->host) : fmt::format("Host: {}:{}\r\n", t->host, t->port);
  for (const auto& f : p.head.fields) {
    const std::string& name = f.name;
    if (http1::iequal(name, "proxy-authorization") || http1::iequal(name, "proxy-connection") ||
        http1::iequal(name, "connection") || http1::iequal(name, "keep-alive") ||
        http1::iequal(name, "host"))  // Host: derived from the checked target above
      continue;
    r.upstream += fmt::format("{}: {}\r\n", name, f.value);
  }
  r.upstream += "Connection: close\r\n\r\n";
  r.progress = Progress::done;
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return status >= 500 ? "Server Error" : status >= 400 ? "Client Error" : "Unknown";
  }
}

std::string refusal_reason_phrase(std::string_view host, int port) {
  std::string shown;
  for (char ch : host.substr(0, kMaxPhraseHost)) {
    const bool safe = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      std::string_view(".-:_[]").find(ch) != std::string_view::npos;
    shown += safe ? ch : '?';
  }
  if (host.size() > kMaxPhraseHost) shown += "...";
  return fmt::format("pi-jail refused {0}:{1} (allow: --allow-net {0}:{1})", shown, port);
}

std::string http_response(int status, std::string_view reason, std::string_view body) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\nX-Pi-Jail: "
      "refused\r\n\r\n{}",
      status, reason, body.size(), body);
}

SocksGreeting parse_socks_greeting(std::string_view buf) {
  SocksGreeting g;
  if (buf.size() < 2) return g;
  if (static_cast<uint8_t>(buf[0]) != 5) {
    g.progress = Progress::bad;
    return g;
  }
  size_t n = static_cast<uint8_t>(buf[1]);
  if (n == 0) {
    g.progress = Progress::bad;
    return g;
  }
  if (buf.size() < 2 + n) return g;
  for (size_t i = 0; i < n; ++i)
    if (buf[2 + i] == 0) g.no_auth_offered = true;
  g.consumed = 2 + n;
  g.progress = Progress::done;
  return g;
}

SocksRequest parse_socks_request(std::string_view buf) {
  SocksRequest r;
  auto fail = [&](SocksReply reply) {
    r.progress = Progress::bad;
    r.reply = reply;
    return r;
  };
  if (buf.size() < 4) return r;
  if (static_cast<uint8_t>(buf[0]) != 5 || buf[2] != 0) return fail(SocksReply::general_failure);
  r.command = static_cast<uint8_t>(buf[1]);
  uint8_t atyp = static_cast<uint8_t>(buf[3]);
  size_t addr_len;
  if (atyp == 1)
    addr_len = 4;
  else if (atyp == 4)
    addr_len = 16;
  else if (atyp == 3) {
    if (buf.size() < 5) return r;
    addr_len = 1 + static_cast<uint8_t>(buf[4]);
    if (addr_len == 1) return fail(SocksReply::general_failure);
  } else {
    return fail(SocksReply::address_type_not_supported);
  }
  if (buf.size() < 4 + addr_len + 2) return r;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(buf.data()) + 4;
  char text[INET6_ADDRSTRLEN];
  if (atyp == 1)
    r.target.host = ::inet_ntop(AF_INET, p, text, sizeof text);
  else if (atyp == 4)
    r.target.host = std::string("[") + ::inet_ntop(AF_INET6, p, text, sizeof text) + "]";
  else {
    r.target.host.assign(reinterpret_cast<const char*>(p) + 1, addr_len - 1);
    if (r.target.host.find('\0') != std::string::npos) return fail(SocksReply::general_failure);
  }
  r.target.port = (p[addr_len] << 8) | p[addr_len + 1];
  r.consumed = 4 + addr_len + 2;
  if (r.command != 1) return fail(SocksReply::command_not_supported);  // BIND, UDP ASSOCIATE
  if (r.target.port == 0) return fail(SocksReply::general_failure);
  r.progress = Progress::done;
  return r;
}

std::string socks_reply(SocksReply reply) {
  std::string out{'\x05', static_cast<char>(reply), '\x00', '\x01'};
  out.append(6, '\0');  // BND.ADDR 0.0.0.0, BND.PORT 0
  return out;
}

}  // namespace pj::netproxy
