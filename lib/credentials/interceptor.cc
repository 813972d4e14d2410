#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "credentials/interceptor.h"
#include "credentials/substitution.h"
#include "credentials/tls_ca.h"
#include "credentials/websocket.h"
#include "netproxy/http1.h"
#include "netproxy/protocol.h"
#include "netproxy/rules.h"
#include "util/bounded_io.h"
#include "util/escape.h"
#include "util/secret.h"

namespace pj::credentials {

namespace http1 = netproxy::http1;
using netproxy::Decision;
using netproxy::http_response;
using netproxy::kMaxEntries;
using netproxy::kMaxIntercepted;
using netproxy::Progress;
using netproxy::Protocol;
using netproxy::reason_phrase;
using netproxy::Wire;
using util::Error;
using Clock = std::chrono::steady_clock;

namespace {

// One side's TLS, over a non-blocking socket, with poll-bounded waits;
// without `ssl` (a plain-HTTP binding to a loopback port) the same calls
// read and write the socket as it is.
struct Tls {
  SSL* ssl = nullptr;
  int fd = -1;
  int stop = -1;
  std::string buf;  // read but not yet used
  bool eof = false;
  std::string error;
  ~Tls() { SSL_free(ssl); }

  bool wait_for(int err, std::chrono::milliseconds t) {
    short ev = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
    util::WaitEnd r = util::wait_ready(fd, ev, stop, t);
    if (r == util::WaitEnd::timed_out)
      error = "timed out";
    else if (r == util::WaitEnd::stopped)
      error = "stopped";
    return r == util::WaitEnd::ready;
  }
  bool handshake(std::chrono::milliseconds t) {
    while (true) {
      ERR_clear_error();
      int rc = SSL_do_handshake(ssl);
      if (rc == 1) return true;
      int err = SSL_get_error(ssl, rc);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        error = openssl_error();
        return false;
      }
      if (!wait_for(err, t)) return false;
    }
  }
  // Read what is there into buf, waiting up to `t` for something. 1: read;
  // 0: end of stream; -1: error or timeout; -2 (`wait` false): nothing now.
  int fill(std::chrono::milliseconds t, bool wait = true) {
    if (!ssl) return fill_plain(t, wait);
    char tmp[16384];
    while (true) {
      size_t n = 0;
      ERR_clear_error();
      if (SSL_read_ex(ssl, tmp, sizeof tmp, &n) == 1) {
        buf.append(tmp, n);
        return 1;
      }
      int err = SSL_get_error(ssl, 0);
      if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
        eof = true;
        return 0;
      }
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        error = openssl_error();
        return -1;
      }
      if (!wait) return -2;
      if (!wait_for(err, t)) return -1;
    }
  }
  int fill_plain(std::chrono::milliseconds t, bool wait) {
    char tmp[16384];
    while (true) {
      ssize_t n = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) {
        buf.append(tmp, static_cast<size_t>(n));
        return 1;
      }
      if (n == 0) {
        eof = true;
        return 0;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        error = std::strerror(errno);
        return -1;
      }
      if (!wait) return -2;
      if (!wait_for(SSL_ERROR_WANT_READ, t)) return -1;
    }
  }
  bool write(std::string_view data, std::chrono::milliseconds t) {
    if (!ssl) return write_plain(data, t);
    while (!data.empty()) {
      size_t n = 0;
      ERR_clear_error();
      if (SSL_write_ex(ssl, data.data(), data.size(), &n) == 1) {
        data.remove_prefix(n);
        continue;
      }
      int err = SSL_get_error(ssl, 0);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        error = openssl_error();
        return false;
      }
      if (!wait_for(err, t)) return false;
    }
    return true;
  }
  bool write_plain(std::string_view data, std::chrono::milliseconds t) {
    util::SendEnd end = util::send_all(fd, data, t, stop);
    switch (end.how) {
      case util::SendEnd::How::sent: return true;
      case util::SendEnd::How::failed: error = std::strerror(end.error); break;
      case util::SendEnd::How::timed_out: error = "timed out"; break;
      case util::SendEnd::How::stopped: error = "stopped"; break;
    }
    return false;
  }
};

std::string authority(const std::string& host, int port, Wire wire) {
  std::string h = net::parse_ip(host) ? net::bracketed(host) : host;
  return port == (wire == Wire::plain_http ? 80 : 443) ? h : h + ":" + std::to_string(port);
}

}  // namespace

// One intercepted connection, on its worker thread.
struct InterceptConn {
  Interceptor& owner;
  Interceptor::Worker& self;
  Interceptor::Handoff h;
  Tls jail, server;
  std::uint64_t up = 0, down = 0;
  std::chrono::milliseconds hs, idle;
  const Clock::time_point started = Clock::now();
  sockaddr_storage peer_{};  // the checked address (kept when the first server connection closes)
  bool have_peer_ = false;
  int upstream_requests_ = 0;  // sent on the current server connection
  bool desync_ = false;        // the server answered before a request was sent

  InterceptConn(Interceptor& o, Interceptor::Worker& w, Interceptor::Handoff&& handoff)
      : owner(o), self(w), h(std::move(handoff)) {
    hs = o.limits_.handshake;
    idle = o.limits_.idle;
  }

  Decision decision(Protocol protocol, bool allowed, std::string reason) {
    Decision d;
    d.time = d.last = std::chrono::system_clock::now();
    d.protocol = protocol;
    d.host = h.host;
    d.port = h.port;
    d.address = h.address;
    d.allowed = allowed;
    d.reason = std::move(reason);
    return d;
  }
  // A request refused by the credential rules (never holds a secret: names only).
  void credential_refusal(std::string reason) {
    owner.record(decision(Protocol::credential, false, std::move(reason)));
  }

  // Answer the jail and end the connection.
  void answer(int status, const std::string& told, std::string_view reason = {}) {
    (void)jail.write(http_response(status, reason.empty() ? reason_phrase(status) : reason, "pi-jail: " + told + "\n"),
                     hs);
  }

  // Read a head from `s`. nullopt with `s.error` empty: a clean end before any byte.
  std::optional<http1::HeadParse> read_head(Tls& s, std::chrono::milliseconds t) {
    while (true) {
      auto p = http1::parse_head(s.buf);
      if (p.progress != Progress::need_more) {
        if (p.progress == Progress::done) s.buf.erase(0, p.consumed);
        return p;
      }
      int r = s.fill(t);
      if (r == 0 && s.buf.empty()) return std::nullopt;
      if (r <= 0) {
        if (s.error.empty()) s.error = "the connection closed inside a head";
        return std::nullopt;
      }
    }
  }

  // Read a body as `f` frames it, giving the decoded bytes to `sink`;
  // more than `max` bytes (0: no bound) is an error.
  bool read_body(Tls& s, const http1::BodyFraming& f, size_t max, const std::function<bool(std::string_view)>& sink) {
    std::uint64_t total = 0;
    auto give = [&](std::string_view b) {
      total += b.size();
      if (max && total > max) {
        s.error = fmt::format("body larger than {} bytes", max);
        return false;
      }
      return b.empty() || sink(b);
    };
    if (f.framing == http1::Framing::none) return true;
    if (f.framing == http1::Framing::length) {
      std::uint64_t left = f.length;
      while (left) {
        if (s.buf.empty() && s.fill(idle) <= 0) {
          if (s.error.empty()) s.error = "the connection closed inside a body";
          return false;
        }
        size_t take = static_cast<size_t>(std::min<std::uint64_t>(left, s.buf.size()));
        std::string part = s.buf.substr(0, take);
        s.buf.erase(0, take);
        left -= take;
        if (!give(part)) return false;
      }
      return true;
    }
    if (f.framing == http1::Framing::chunked) {
      http1::ChunkDecoder dec;
      while (true) {
        if (s.buf.empty() && s.fill(idle) <= 0) {
          if (s.error.empty()) s.error = "the connection closed inside a chunked body";
          return false;
        }
        std::string out;
        size_t used = 0;
        Progress p = dec.feed(s.buf, out, used);
        s.buf.erase(0, used);
        if (p == Progress::bad) return s.error = dec.error(), false;
        if (!give(out)) return false;
        if (p == Progress::done) return true;
      }
    }
    while (true) {  // until the close
      if (!s.buf.empty()) {
        std::string part = std::move(s.buf);
        s.buf.clear();
        if (!give(part)) return false;
      }
      int r = s.fill(idle);
      if (r == 0) return true;
      if (r < 0) return false;
    }
  }

  void run() {
    std::string reason = h.reason + "; TLS intercepted for credentials";
    bool allowed = true;
    auto end = [&](bool ok, std::string why) {
      allowed = ok;
      reason = std::move(why);
    };
    [&] {
      if (!h.reply.empty() && !util::send_all(h.client.get(), h.reply, hs, owner.stop_r_.get()).sent())
        return end(true, h.reason + "; the client went away");
      if (h.wire == Wire::plain_http) return serve_plain(end);
      if (spoke_plain_http()) {
        // A TLS binding of a server that has no TLS (a local model server
        // bound without http://): said, rather than a reset the client
        // cannot explain.
        const std::string why = fmt::format(
            "{} is bound for TLS, but the jail spoke plain HTTP to it; for a server without TLS bind http://{}",
            authority(h.host, h.port, Wire::tls), authority(h.host, h.port, Wire::plain_http));
        credential_refusal(why);
        (void)util::send_all(h.client.get(), http_response(502, reason_phrase(502), "pi-jail: refused: " + why + "\n"),
                             hs, owner.stop_r_.get());
        return end(false, why);
      }
      auto tls = owner.tls();
      if (!tls) return end(false, tls.error().message());
      auto js = (*tls)->server_ssl(h.host);
      if (!js) return end(false, js.error().message());
      jail.ssl = *js;
      jail.fd = h.client.get();
      jail.stop = owner.stop_r_.get();
      SSL_set_fd(jail.ssl, jail.fd);
      SSL_set_app_data(jail.ssl, const_cast<char*>(h.host.c_str()));
      SSL_set_accept_state(jail.ssl);
      if (!jail.handshake(hs)) return end(true, h.reason + "; TLS with the jail failed: " + jail.error);
      std::string why;
      if (!server_tls(why)) {
        (void)read_head(jail, hs);  // its request, then the answer
        answer(502, "refused: " + why);
        return end(false, why);
      }
      serve_requests();
    }();
    // A refusal (a failed upstream TLS check, say) stays what the log shows.
    if (self.state == Interceptor::Worker::kReaped && allowed)
      end(true, h.reason + "; closed while waiting for a request, to make room for a new connection");
    Decision d = decision(h.protocol, allowed, reason);
    d.time = h.wall;
    d.bytes_up = up;
    d.bytes_down = down;
    d.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    owner.record(std::move(d));
  }

  // A plain-HTTP binding: the real value goes in clear, so only to a
  // loopback address, whatever the rules allowed (the binding was checked
  // to name a loopback host; this is the address actually connected to).
  template <class End>
  void serve_plain(End& end) {
    end(true, h.reason + "; plain HTTP to a loopback port, for credentials");
    jail.fd = h.client.get();
    jail.stop = server.stop = owner.stop_r_.get();
    jail.buf = std::move(h.prefill);
    if (!loopback_peer()) {
      const std::string why = fmt::format("plain-HTTP substitution refused: {} is not a loopback address",
                                          h.address.empty() ? "the server's address" : h.address);
      credential_refusal(why);
      answer(502, "refused: " + why);
      return end(false, why);
    }
    server.fd = h.upstream.get();
    serve_requests();
  }
  bool loopback_peer() {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (!h.upstream.valid() || ::getpeername(h.upstream.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
      return false;
    if (ss.ss_family == AF_INET)
      return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
    return ss.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
  }
  bool plain() const { return h.wire == Wire::plain_http; }
  // What a binding must name for its placeholder to be replaced here: the
  // host the rules checked; for plain HTTP, the loopback address actually
  // connected to (a binding of 127.0.0.1 is not sent to ::1 or 127.0.0.2,
  // whatever name the jail used).
  const std::string& bound_name() const { return plain() && !h.address.empty() ? h.address : h.host; }
  // Whether the jail's first byte starts an HTTP method rather than a TLS
  // record (a ClientHello is 0x16).
  bool spoke_plain_http() {
    if (util::wait_ready(h.client.get(), POLLIN, owner.stop_r_.get(), hs) != util::WaitEnd::ready) return false;
    char b = 0;
    return ::recv(h.client.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && b >= 'A' && b <= 'Z';
  }
  // Whether a server connection is open (TLS: its session; plain: its socket).
  bool server_open() const { return plain() ? server.fd >= 0 : server.ssl != nullptr; }

  // TLS with the server over h.upstream, verified; `why` when not.
  bool server_tls(std::string& why) {
    auto tls = owner.tls();
    if (!tls) return why = tls.error().message(), false;
    auto ss = (*tls)->client_ssl(h.host);
    if (!ss) return why = ss.error().message(), false;
    server.ssl = *ss;
    server.fd = h.upstream.get();
    server.stop = owner.stop_r_.get();
    SSL_set_fd(server.ssl, server.fd);
    SSL_set_connect_state(server.ssl);
    if (server.handshake(hs)) return true;
    long v = SSL_get_verify_result(server.ssl);
    why = v != X509_V_OK
              ? fmt::format("the server's certificate was not verified: {}", X509_verify_cert_error_string(v))
              : "TLS with the server failed: " + server.error;
    return false;
  }

  // Close the server connection (its unread bytes are dropped with it).
  void close_server() {
    SSL_free(server.ssl);
    server.ssl = nullptr;
    server.buf.clear();
    server.eof = false;
    server.error.clear();
    if (h.upstream.valid()) {
      socklen_t len = sizeof peer_;
      if (!have_peer_ && ::getpeername(h.upstream.get(), reinterpret_cast<sockaddr*>(&peer_), &len) == 0)
        have_peer_ = true;
    }
    track_upstream(-1);  // before the fd is closed: start() never shuts a reused one
    h.upstream.reset();
    server.fd = -1;
    upstream_requests_ = 0;
  }

  // The server connection start() shuts down with the jail's when it
  // closes this one to make room (a worker may wait on either).
  void track_upstream(int fd) {
    std::lock_guard<std::mutex> lock(owner.m_);
    self.upstream_fd = fd;
  }

  // A new, verified connection to the address this connection was
  // checked for (the first connection's peer: the rules are not asked
  // again, the address is the one they allowed).
  bool fresh_server(std::string& why) {
    close_server();
    if (!have_peer_) return why = "the server's address is unknown", false;
    util::UniqueFd fd(::socket(peer_.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return why = fmt::format("socket: {}", std::strerror(errno)), false;
    socklen_t len = peer_.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&peer_), len) != 0 && errno != EINPROGRESS)
      return why = fmt::format("connect: {}", std::strerror(errno)), false;
    if (util::wait_ready(fd.get(), POLLOUT, owner.stop_r_.get(), hs) != util::WaitEnd::ready)
      return why = "connect timed out", false;
    int err = 0;
    len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return why = fmt::format("connect: {}", std::strerror(err)), false;
    if (h.via && !open_tunnel(fd.get(), *h.via, h.host, h.port, owner.stop_r_.get(), hs, why)) return false;
    h.upstream = std::move(fd);
    track_upstream(h.upstream.get());
    if (plain()) {
      server.fd = h.upstream.get();
      return true;
    }
    return server_tls(why);
  }

  // RFC 9112 section 9.3.2: responses come in the order of the requests.
  // A byte from the server before the current request was fully sent
  // answers something else (a body the server read as a request of its
  // own): its framing and ours disagree, and no response on this
  // connection can be paired with a request any more.
  bool server_quiet() {
    if (!server.buf.empty() || server.eof) return false;
    return server.fill(std::chrono::milliseconds(0), false) == -2;
  }

  bool to_server(std::string_view b) {
    if (!server_quiet()) {
      desync_ = true;
      return false;
    }
    up += b.size();
    return server.write(b, idle);
  }
  bool to_jail(std::string_view b) {
    down += b.size();
    return jail.write(b, idle);
  }

  // Read a request head from the jail (http1::parse_request). nullopt: a
  // clean end before any byte, or the connection failed.
  std::optional<http1::RequestParse> read_request() {
    self.since = Clock::now().time_since_epoch().count();
    int busy = Interceptor::Worker::kBusy;
    self.state.compare_exchange_strong(busy, Interceptor::Worker::kWaiting);
    while (true) {
      auto p = http1::parse_request(jail.buf);
      if (p.progress != Progress::need_more) {
        // From here until the response is relayed it is not closed to
        // make room: a request in flight is never cut. Closed already: over.
        int waiting = Interceptor::Worker::kWaiting;
        if (!self.state.compare_exchange_strong(waiting, Interceptor::Worker::kBusy)) return std::nullopt;
        ++self.served;
        if (p.progress == Progress::done) jail.buf.erase(0, p.consumed);
        return p;
      }
      if (jail.fill(idle) <= 0) return std::nullopt;
    }
  }

  void serve_requests() {
    const auto port = static_cast<uint16_t>(h.port);
    while (true) {
      auto rp_req = read_request();
      const auto snapshot = owner.bindings();  // this request's view (a refresh may add to it)
      const std::vector<Binding>& bindings = *snapshot;
      if (!rp_req) return;
      if (rp_req->progress == Progress::bad)
        return answer(rp_req->status ? rp_req->status : 400, "malformed request: " + rp_req->error);
      http1::Head req = std::move(rp_req->head);
      const http1::RequestLine& line = rp_req->line;
      http1::OriginTarget ot = http1::intercepted_target(line, h.host, port);
      if (ot.status) {
        if (ot.status == 403) credential_refusal(ot.error);
        return answer(ot.status, "refused: " + ot.error);
      }
      // Only the checked line leaves, in origin form (RFC 9112 section 3.2.1).
      const std::string method = line.method, path = ot.target, version = line.version;
      req.start = method + " " + path + " " + version;
      TokenExchange* ex = owner.intercept_.exchange.get();
      bool exchange = ex && ex->is_token_endpoint(h.host, path);
      const bool carries_refresh = exchange && ex->is_exact_token_endpoint(h.host, path);
      Substitution sub = substitute(req, bindings, bound_name(), port,
                                    carries_refresh ? RequestKind::token_exchange : RequestKind::api, h.wire);
      if (sub.refused) {
        credential_refusal(sub.refused_why);
        return answer(403, "refused: " + sub.refused_why);
      }
      for (const auto& m : owner.intercept_.refused)
        if (m.host == h.host && path_under(path, m.path_prefix)) {
          std::string why = fmt::format("{}{} hands out new credentials, which the filter cannot keep from the jail",
                                        h.host, m.path_prefix);
          credential_refusal(why);
          // The reason phrase too: a client may show only the status line.
          return answer(403,
                        "refused: " + why +
                            " (only an operator can allow it: [credentials] allow_minting, "
                            "pi-jail.toml(5))",
                        "Forbidden by pi-jail: credential-minting endpoint");
        }
      http1::BodyFraming rf = http1::request_framing(req);
      if (!rf.error.empty()) return answer(400, "malformed request: " + rf.error);
      bool close_after = version == "HTTP/1.0" || req.lists("Connection", "close");
      bool upgrade = !exchange && req.lists("Connection", "upgrade") && req.get("Upgrade");
      if (upgrade) {
        // Only WebSocket, whose frames the filter reads (websocket.h), and
        // with no extension negotiated: a compressed frame cannot be masked.
        if (::strcasecmp(std::string(*req.get("Upgrade")).c_str(), "websocket") != 0)
          return answer(403, "refused: only a WebSocket upgrade is relayed on a connection that carries credentials");
        req.erase("Sec-WebSocket-Extensions");
      }
      if (req.get("Expect")) {
        req.erase("Expect");
        if (!to_jail("HTTP/1.1 100 Continue\r\n\r\n")) return;
      }
      req.set("Host", authority(h.host, h.port, h.wire));
      req.set("Accept-Encoding", "identity");  // bodies must be readable to be masked
      req.erase("Proxy-Connection");
      req.erase("Proxy-Authorization");
      ExchangeKind exchange_kind = ExchangeKind::login;
      // A token exchange carries the refresh token: it goes alone on a
      // server connection of its own (no earlier request whose body the
      // server might have read as a request, one response, then closed),
      // and it cannot be upgraded.
      if (!server_open() || (exchange && upstream_requests_ != 0)) {
        std::string why;
        if (!fresh_server(why)) return answer(502, "cannot reach the server again: " + why);
      }
      if (exchange) {
        req.erase("Upgrade");
        req.set("Connection", "close");
      }
      ++upstream_requests_;
      if (exchange) {
        std::string body;
        if (!read_body(jail, rf, kMaxExchangeBody, [&](std::string_view b) { return body.append(b), true; }))
          return answer(400, "token request: " + jail.error);
        std::vector<std::string> authorization;
        for (const auto& f : req.fields)
          if (::strcasecmp(f.name.c_str(), "Authorization") == 0) authorization.push_back(f.value);
        auto rewritten = ex->request_body(h.host, path, body, sub.used_placeholders, authorization);
        for (auto& a : authorization) util::wipe(a);
        if (!rewritten) {
          credential_refusal("token request refused: " + rewritten.error().message());
          return answer(403, "refused: " + rewritten.error().message());
        }
        exchange_kind = rewritten->kind;
        if (!rewritten->content_type.empty()) {  // the filter's own body: plain, of its own type
          req.set("Content-Type", rewritten->content_type);
          req.erase("Content-Encoding");
        }
        req.erase("Transfer-Encoding");
        req.set("Content-Length", std::to_string(rewritten->body.size()));
        if (!to_server(req.serialise() + rewritten->body)) return answer_desync();
      } else if (rf.framing == http1::Framing::length && rf.length <= jail.buf.size()) {
        // A body already here goes with its head, in one write.
        std::string whole = req.serialise() + jail.buf.substr(0, rf.length);
        jail.buf.erase(0, rf.length);
        if (!to_server(whole)) return answer_desync();
      } else {
        if (!to_server(req.serialise())) return answer_desync();
        bool chunked = rf.framing == http1::Framing::chunked;
        if (!read_body(jail, rf, 0,
                       [&](std::string_view b) { return to_server(chunked ? http1::chunk(b) : std::string(b)); }))
          return answer_desync();
        if (chunked && !to_server(http1::chunk(""))) return answer_desync();
      }
      if (!sub.used.empty()) {
        std::string names;
        for (const auto& n : sub.used) names += (names.empty() ? "" : ", ") + n;
        owner.record(decision(Protocol::credential, true, "substituted " + names));
      }
      // The response(s): 1xx heads first.
      Masker masker(bindings, sub.renderings);
      std::optional<http1::HeadParse> rp;
      int status = 0;
      while (true) {
        rp = read_head(server, idle);
        if (!rp || rp->progress == Progress::bad) {
          std::string why = rp ? rp->error : server.error.empty() ? "no response" : server.error;
          return answer(502, "bad response from the server: " + why);
        }
        status = http1::status_of(rp->head);
        if (status == 0) return answer(502, "bad response from the server: malformed status line");
        rp->head.start = masker.mask(rp->head.start);  // a reason phrase may echo too
        for (auto& f : rp->head.fields) {
          f.name = masker.mask(f.name);  // a name can echo too (placeholders are tokens: the name stays one)
          f.value = masker.mask(f.value);
        }
        if (status == 101) {
          // A 101 the request did not ask for (a token exchange never may)
          // switches to bytes nobody can frame: nothing of it goes on.
          if (!upgrade) {
            credential_refusal("the server switched protocols for a request that did not ask for it");
            return answer(502, "refused: the server switched protocols unasked");
          }
          if (rp->head.get("Sec-WebSocket-Extensions")) {
            credential_refusal("the server chose a WebSocket extension the filter did not offer");
            return answer(502, "refused: the server chose a WebSocket extension, whose frames cannot be checked");
          }
          if (!to_jail(rp->head.serialise())) return;
          return relay_both_ways(ws::ServerFrames(bindings, sub.renderings));
        }
        if (status / 100 != 1) break;
        if (!to_jail(rp->head.serialise())) return;
      }
      http1::Head resp = std::move(rp->head);
      http1::BodyFraming sf = http1::response_framing(resp, method);
      if (!sf.error.empty()) return answer(502, "bad response from the server: " + sf.error);
      // Every Content-Encoding field, joined: a second one must not slip a
      // compressed body past the masker ("identity, gzip" is not identity).
      std::string ce;
      for (const auto& f : resp.fields)
        if (::strcasecmp(f.name.c_str(), "Content-Encoding") == 0 && !f.value.empty())
          ce += (ce.empty() ? "" : ", ") + f.value;
      if (exchange) {
        std::string body;
        if (!read_body(server, sf, kMaxExchangeBody, [&](std::string_view b) { return body.append(b), true; })) {
          credential_refusal("token response not read: " + server.error);
          return answer(502, "the token response could not be read");
        }
        auto rewritten = ex->response_body(h.host, path, status, ce, body, exchange_kind);
        if (!rewritten) {
          credential_refusal("token response refused: " + rewritten.error().message());
          return answer(502, "the token response could not be rewritten: " + rewritten.error().message());
        }
        // Every token in the response must have become a placeholder, at
        // any depth: one the exchange did not rewrite is a real token.
        std::vector<Binding> fresh = ex->take_new_bindings();
        std::vector<std::string> placeholders;
        for (const std::vector<Binding>* list : {&bindings, static_cast<const std::vector<Binding>*>(&fresh)})
          for (const auto& b : *list) placeholders.push_back(b.placeholder);
        if (auto token = unrewritten_token(*rewritten, placeholders)) {
          std::string why = fmt::format("the token response holds a {} that was not rewritten", *token);
          credential_refusal(why);
          return answer(502, "refused: " + why);
        }
        // The new tokens are masked too, wherever the server echoed them
        // (a field of the head, the body); the head was masked before
        // they were known.
        std::vector<Binding> known = bindings;
        known.insert(known.end(), fresh.begin(), fresh.end());
        Masker with_fresh(known, sub.renderings);
        resp.start = with_fresh.mask(resp.start);
        for (auto& f : resp.fields) {
          f.name = with_fresh.mask(f.name);
          f.value = with_fresh.mask(f.value);
        }
        const std::string body_out = with_fresh.mask(*rewritten);
        for (auto& b : known) util::wipe(b.real);
        // New placeholders are substituted from the jail's next request on.
        owner.add_bindings(std::move(fresh));
        resp.erase("Content-Encoding");
        resp.erase("Transfer-Encoding");
        resp.set("Content-Length", std::to_string(body_out.size()));
        if (!to_jail(resp.serialise() + body_out)) return;
        close_server();  // one request, one response: the next request gets a connection of its own
        continue;
      } else if (sf.framing == http1::Framing::none) {
        if (!to_jail(resp.serialise())) return;
      } else {
        if (!ce.empty() && ce != "identity") {
          // The server ignored Accept-Encoding: identity. A compressed body
          // cannot be scanned for an echoed key: fail closed.
          std::string why = fmt::format(
              "the server sent a {}-encoded body, which cannot be checked for echoed credentials", ce.substr(0, 32));
          credential_refusal(why);
          return answer(502, "refused: " + why);
        }
        // Masking changes lengths: the body is re-framed (chunked, or to the close for HTTP/1.0).
        resp.erase("Content-Length");
        resp.erase("Transfer-Encoding");
        bool chunked = version == "HTTP/1.1";
        if (chunked)
          resp.set("Transfer-Encoding", "chunked");
        else
          close_after = true, resp.set("Connection", "close");
        auto out = [&](std::string_view b) { return b.empty() || to_jail(chunked ? http1::chunk(b) : std::string(b)); };
        // The head waits for the body's first bytes: a compressed body under
        // an identity label (or none) is refused before anything is sent.
        BodyStart start;
        auto sink = [&](std::string_view b) {
          if (start.decided) return out(masker.feed(b));
          start.bytes.append(b);
          if (start.bytes.size() < BodyStart::kSniff) return true;
          return start.decide(*this, resp) && out(masker.feed(std::exchange(start.bytes, {})));
        };
        bool ok = read_body(server, sf, 0, sink);
        if (start.refused) return;
        if (!ok) return;
        if (!start.decided && !(start.decide(*this, resp) && out(masker.feed(std::exchange(start.bytes, {}))))) return;
        if (!out(masker.finish())) return;
        if (chunked && !to_jail(http1::chunk(""))) return;
        if (sf.framing == http1::Framing::until_close) close_after = true;
      }
      if (resp.lists("Connection", "close")) close_after = true;
      if (close_after) return;
    }
  }

  // A response body's first bytes, held until it is known whether they
  // are compressed (looks_compressed), with the head.
  struct BodyStart {
    static constexpr size_t kSniff = 4;  // the longest magic (zstd)
    std::string bytes;
    bool decided = false, refused = false;
    // Refuse a compressed body (502), else send the head.
    bool decide(InterceptConn& c, const http1::Head& head) {
      decided = true;
      if (looks_compressed(bytes)) {
        refused = true;
        const std::string why =
            "the server sent a compressed body labelled identity, which cannot be checked for echoed credentials";
        c.credential_refusal(why);
        c.answer(502, "refused: " + why);
        return false;
      }
      return c.to_jail(head.serialise());
    }
  };

  // The server answered before the request was sent (server_quiet()),
  // or a write failed: nothing more on this connection.
  void answer_desync() {
    if (!desync_) return;
    credential_refusal("the server answered before the request was sent: its framing differs from the filter's");
    answer(502, "refused: the server answered before the request was sent");
  }

  // After a WebSocket 101, until either side ends: the jail's bytes go on
  // unchanged (placeholders only); the server's through `frames`, each
  // message masked. A frame that cannot be checked ends the connection.
  void relay_both_ways(ws::ServerFrames frames) {
    while (true) {
      for (auto [from, to, count] : {std::tuple{&jail, &server, &up}, std::tuple{&server, &jail, &down}}) {
        while (true) {
          if (!from->buf.empty()) {
            *count += from->buf.size();
            std::string pass = std::exchange(from->buf, {});
            if (from == &server) {
              auto masked = frames.feed(pass);
              if (!masked) return credential_refusal("the WebSocket was closed: " + masked.error().message());
              pass = std::move(*masked);
            }
            if (!pass.empty() && !to->write(pass, idle)) return;
          }
          int r = from->fill(idle, false);
          if (r == 0 || r == -1) return;
          if (r == -2) break;
        }
      }
      pollfd p[3] = {{jail.fd, POLLIN, 0}, {server.fd, POLLIN, 0}, {owner.stop_r_.get(), POLLIN, 0}};
      int n = ::poll(p, 3, static_cast<int>(idle.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || (p[2].revents & POLLIN)) return;
    }
  }
};

namespace {

// A binding the filter can use safely, its hosts normalised; `others`:
// the bindings beside it (no placeholder may contain another).
util::Status check_binding(Binding& b, const std::vector<Binding>& others) {
  if (b.placeholder.empty() || b.real.empty() || b.hosts.empty())
    return Error::invalid(fmt::format("credential {}: a placeholder, a value and a host are needed", b.name));
  if (b.real.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
    return Error::invalid(fmt::format("credential {}: its value holds CR, LF or NUL", b.name));
  for (const auto& o : others)
    if (&o != &b && (o.placeholder.find(b.placeholder) != std::string::npos ||
                     b.placeholder.find(o.placeholder) != std::string::npos))
      return Error::invalid(fmt::format("credentials {} and {}: one placeholder contains the other", b.name, o.name));
  for (auto& h : b.hosts) {
    auto n = net::normalise_host(h.name);
    if (!n) return Error::invalid(fmt::format("credential {}: host '{}' is not a valid name", b.name, h.name));
    h.name = *n;
    // In clear only where the bytes never leave the machine.
    if (h.wire == Wire::plain_http && !net::is_loopback_host(h.name))
      return Error::invalid(
          fmt::format("credential {}: plain HTTP to '{}', which is not a host loopback address", b.name, h.name));
  }
  return {};
}

}  // namespace

util::Result<std::shared_ptr<Interceptor>> Interceptor::create(Intercept intercept) {
  return make(std::move(intercept), TlsAuthority::create);
}

util::Result<std::shared_ptr<Interceptor>> Interceptor::serving_with(Intercept intercept, const CaPems& ca) {
  return make(std::move(intercept), [&ca](const std::vector<BoundHost>&, const UpstreamTrust& upstream) {
    return TlsAuthority::serving_with(ca, upstream);
  });
}

util::Result<std::shared_ptr<Interceptor>> Interceptor::to_hand_over(Intercept intercept) {
  auto made = make(std::move(intercept), [](const std::vector<BoundHost>& hosts, const UpstreamTrust&) {
    return TlsAuthority::to_hand_over(hosts);
  });
  if (made) (*made)->serves_ = false;
  return made;
}

util::Result<std::shared_ptr<Interceptor>> Interceptor::serving_later(Intercept intercept, std::string ca_pem,
                                                                      MakeTls make_tls) {
  auto made = make(std::move(intercept), [](const std::vector<BoundHost>&, const UpstreamTrust&) {
    return util::Result<std::unique_ptr<TlsAuthority>>(std::unique_ptr<TlsAuthority>());
  });
  if (!made) return made;
  (*made)->ca_pem_ = std::move(ca_pem);
  (*made)->make_later_ = std::move(make_tls);
  return made;
}

util::Result<TlsAuthority*> Interceptor::tls() {
  std::lock_guard<std::mutex> lock(tls_mu_);
  if (ca_) return ca_.get();
  if (!tls_failed_.empty()) return Error::invalid(tls_failed_);
  if (!make_later_) return Error::invalid("the credential filter has no TLS authority");
  auto made = make_later_();
  make_later_ = nullptr;  // what it held goes with it
  if (!made || !*made) {
    tls_failed_ = "the credential filter's TLS: " + (made ? std::string("none made") : made.error().message());
    return Error::invalid(tls_failed_);
  }
  ca_ = std::move(*made);
  return ca_.get();
}

util::Result<std::shared_ptr<Interceptor>> Interceptor::make(Intercept intercept, const MakeCa& make_ca) {
  std::vector<BoundHost> hosts;
  for (auto& b : intercept.bindings) {
    if (auto st = check_binding(b, intercept.bindings); !st) return st.take_error();
    hosts.insert(hosts.end(), b.hosts.begin(), b.hosts.end());
  }
  for (auto& m : intercept.refused) {
    auto n = net::normalise_host(m.host);
    if (!n) return Error::invalid(fmt::format("credential filter: host '{}' is not a valid name", m.host));
    m.host = *n;
  }
  for (auto* login : {&intercept.login_endpoints, &intercept.bound_later})
    for (auto& h : *login) {
      auto n = net::normalise_host(h.name);
      if (!n || h.port == 0 || h.wire != Wire::tls)
        return Error::invalid(fmt::format("credential filter: login host '{}' is not a valid name and TLS port",
                                          util::printable(h.name)));
      h.name = *n;
      hosts.push_back(h);
    }
  std::vector<BoundHost>().swap(intercept.bound_later);  // the CA's alone
  std::shared_ptr<Interceptor> me(new Interceptor());
  me->bindings_ = std::make_shared<const std::vector<Binding>>(std::move(intercept.bindings));
  intercept.bindings.clear();
  auto ca = make_ca(hosts, intercept.upstream);
  if (!ca) return ca.take_error();
  me->ca_ = std::move(*ca);
  me->serves_ = true;
  if (me->ca_ && me->ca_->serves()) me->ca_pem_ = me->ca_->ca_pem();
  // The anchors' text: the TLS contexts hold what they need of it.
  intercept.upstream.roots_pem.reset();
  std::string().swap(intercept.upstream.extra_ca_pem);
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return Error::from_errno("make the credential filter's stop pipe", errno);
  me->stop_r_.reset(p[0]);
  me->stop_w_.reset(p[1]);
  me->intercept_ = std::move(intercept);
  return me;
}

Interceptor::~Interceptor() { shutdown(); }

const std::string& Interceptor::ca_pem() const { return serves_ ? ca_pem_ : ca_->ca_pem(); }

util::Status Interceptor::made() const { return serves_ ? util::Status{} : ca_->made(); }

util::Result<CaPems> Interceptor::hand_over_ca() {
  if (!ca_) return Error::invalid("hand over the per-run CA: this filter makes its TLS later");
  return ca_->hand_over();
}

std::shared_ptr<const std::vector<Binding>> Interceptor::bindings() const {
  std::lock_guard<std::mutex> lock(bm_);
  return bindings_;
}

void Interceptor::add_bindings(std::vector<Binding> more) {
  if (more.empty()) return;
  std::lock_guard<std::mutex> lock(bm_);
  auto next = std::make_shared<std::vector<Binding>>(*bindings_);
  for (auto& b : more) {
    std::vector<Binding> all = *next;
    all.push_back(b);
    if (auto st = check_binding(all.back(), all); !st) {
      Decision d;
      d.time = d.last = std::chrono::system_clock::now();
      d.protocol = Protocol::credential;
      d.host = b.hosts.empty() ? "" : b.hosts.front().name;
      d.port = b.hosts.empty() ? 0 : b.hosts.front().port;
      d.reason = "a refreshed credential was not taken: " + st.error().message();
      record(std::move(d));
      continue;
    }
    next->push_back(std::move(all.back()));
  }
  bindings_ = std::move(next);
}

std::optional<Wire> Interceptor::bound_wire(const std::string& host, int port) const {
  if (port <= 0 || port > 65535) return std::nullopt;
  auto snapshot = bindings();
  std::optional<Wire> out;
  for (const auto& b : *snapshot) {
    if (bound_to(b, host, static_cast<uint16_t>(port), Wire::plain_http)) return Wire::plain_http;
    if (bound_to(b, host, static_cast<uint16_t>(port), Wire::tls)) out = Wire::tls;
  }
  // A token endpoint a login inside may reach, nothing bound to it yet.
  for (const auto& h : intercept_.login_endpoints)
    if (h.name == host && h.port == port) out = Wire::tls;
  return out;
}

std::optional<std::string> Interceptor::unbound_placeholder(std::string_view text, const std::string& host, int port,
                                                            Wire wire) const {
  auto snapshot = bindings();
  if (snapshot->empty()) return std::nullopt;  // only logins intercepted: nothing to look for
  for (const Binding* b : placeholders_in(text, *snapshot))
    if (port <= 0 || port > 65535 || !bound_to(*b, host, static_cast<uint16_t>(port), wire)) return b->name;
  return std::nullopt;
}

void Interceptor::join_done() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Interceptor::start(Handoff h) {
  if (!serves_) return false;
  std::lock_guard<std::mutex> lock(m_);
  join_done();
  if (stopping_) return false;
  if (workers_.size() >= kMaxIntercepted) {
    // Closed ones end at once, but not before this returns: at most as
    // many again may be ending.
    if (workers_.size() >= 2 * kMaxIntercepted) return false;
    Worker* victim = nullptr;
    while ((victim = reapable())) {
      int waiting = Worker::kWaiting;
      if (victim->state.compare_exchange_strong(waiting, Worker::kReaped)) break;
    }
    if (!victim) return false;
    // Its reads end, whichever side it waits on; its thread closes the fds.
    ::shutdown(victim->client_fd, SHUT_RDWR);
    if (victim->upstream_fd >= 0) ::shutdown(victim->upstream_fd, SHUT_RDWR);
  }
  Worker& w = workers_.emplace_back();
  w.client_fd = h.client.get();
  w.upstream_fd = h.upstream.valid() ? h.upstream.get() : -1;
  w.since = Clock::now().time_since_epoch().count();
  ++active_;
  try {
    w.thread = std::thread([this, &w, h = std::move(h)]() mutable {
      {
        InterceptConn c(*this, w, std::move(h));
        c.run();
        std::lock_guard<std::mutex> closing(m_);
        w.client_fd = w.upstream_fd = -1;  // before c closes them: start() never shuts a reused fd
      }
      --active_;
      w.done = true;
    });
  } catch (const std::system_error&) {
    // No thread (memory, the process's limits): the connection is closed
    // (its fds went with the lambda), as when no slot is free.
    workers_.pop_back();
    --active_;
    return false;
  }
  return true;
}

bool Interceptor::has_room() {
  std::lock_guard<std::mutex> lock(m_);
  join_done();
  return !stopping_ && (workers_.size() < kMaxIntercepted || (workers_.size() < 2 * kMaxIntercepted && reapable()));
}

Interceptor::Worker* Interceptor::reapable() {
  // Waiting the longest, and one that never sent a request before one
  // that did (a client's idle keep-alive connection).
  Worker* best = nullptr;
  auto rank = [](const Worker& w) { return std::pair{w.served > 0, w.since.load()}; };
  for (auto& w : workers_)
    if (w.state == Worker::kWaiting && !w.done && w.client_fd >= 0 && (!best || rank(w) < rank(*best))) best = &w;
  return best;
}

void Interceptor::record(Decision d) {
  std::lock_guard<std::mutex> lock(m_);
  if (decisions_.size() < 4 * kMaxEntries)
    decisions_.push_back(std::move(d));
  else
    ++overflow_;  // the loop drains the queue every tick; a flood between two ticks is counted
  decided_.store(true, std::memory_order_release);
}

std::vector<Decision> Interceptor::take_decisions() {
  std::lock_guard<std::mutex> lock(m_);
  decided_.store(false, std::memory_order_release);
  auto out = std::exchange(decisions_, {});
  if (overflow_) {
    Decision d;
    d.time = d.last = std::chrono::system_clock::now();
    d.protocol = Protocol::credential;
    d.reason = fmt::format(
        "{} decisions of the credential filter were not recorded (more than {} between two "
        "turns of the loop)",
        std::exchange(overflow_, 0), 4 * kMaxEntries);
    out.push_back(std::move(d));
  }
  return out;
}

void Interceptor::shutdown() {
  std::list<Worker> all;
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
    if (stop_w_.valid()) {
      char x = 1;
      (void)!::write(stop_w_.get(), &x, 1);
    }
    all.splice(all.end(), workers_);
  }
  for (auto& w : all) w.thread.join();
}

}  // namespace pj::credentials
