#include "credentials/token_exchange.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "credentials/substitution.h"
#include "netproxy/http1.h"
#include "util/json.h"
#include "util/json_value.h"
#include "util/escape.h"
#include "util/untrusted.h"

namespace pj::credentials {

using util::Error;
namespace json = util::json;

namespace {

util::Result<std::string> inflate_with(std::string_view body, int window_bits) {
  z_stream z{};
  if (::inflateInit2(&z, window_bits) != Z_OK) return Error::invalid("zlib: cannot start inflating");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    char buf[16384];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = ::inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > kMaxTokenBody) {
      ::inflateEnd(&z);
      return Error::invalid(fmt::format("the decoded body is larger than {} bytes", kMaxTokenBody));
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) break;  // truncated
  }
  ::inflateEnd(&z);
  if (rc != Z_STREAM_END) return Error::invalid("the compressed body is corrupt or truncated");
  return out;
}

util::Result<std::string> unzstd(std::string_view body) {
  ZSTD_DStream* d = ::ZSTD_createDStream();
  if (!d) return Error::invalid("zstd: cannot start decoding");
  ::ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 23);  // 8 MiB window at most
  std::string out;
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  size_t rc = 1;
  while (in.pos < in.size || rc != 0) {
    char buf[16384];
    ZSTD_outBuffer o{buf, sizeof buf, 0};
    rc = ::ZSTD_decompressStream(d, &o, &in);
    if (::ZSTD_isError(rc)) {
      ::ZSTD_freeDStream(d);
      return Error::invalid(fmt::format("zstd: {}", ::ZSTD_getErrorName(rc)));
    }
    out.append(buf, o.pos);
    if (out.size() > kMaxTokenBody) {
      ::ZSTD_freeDStream(d);
      return Error::invalid(fmt::format("the decoded body is larger than {} bytes", kMaxTokenBody));
    }
    if (in.pos == in.size && o.pos == 0 && rc != 0) {
      ::ZSTD_freeDStream(d);
      return Error::invalid("zstd: the compressed body is truncated");
    }
  }
  ::ZSTD_freeDStream(d);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

bool bound_to(const Binding& b, std::string_view host) {
  return std::any_of(b.hosts.begin(), b.hosts.end(), [&](const BoundHost& h) { return h.name == host; });
}

std::optional<double> number_of(const json::Value* v) {
  if (!v || !v->as_number()) return std::nullopt;
  char* end = nullptr;
  const std::string& t = v->as_number()->text();
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !(d >= 0 && d < 1e13)) return std::nullopt;
  return d;
}

}  // namespace

util::Result<std::string> decode_body(std::string_view content_encoding, std::string_view body) {
  const std::string enc = lower(content_encoding);
  if (enc.empty() || enc == "identity") {
    if (body.size() > kMaxTokenBody)
      return Error::invalid(fmt::format("the body is larger than {} bytes", kMaxTokenBody));
    return std::string(body);
  }
  if (enc == "gzip" || enc == "x-gzip") return inflate_with(body, 15 + 16);
  if (enc == "deflate") {
    auto z = inflate_with(body, 15);  // RFC 9110: zlib; some servers send raw deflate
    return z ? std::move(z) : inflate_with(body, -15);
  }
  if (enc == "zstd") return unzstd(body);
  return Error::invalid(fmt::format("a token response encoded as \"{}\" cannot be read (known: gzip, deflate, zstd)",
                                    util::printable(content_encoding.substr(0, 40))));
}

const Provider* token_endpoint_provider(std::string_view host, std::string_view path) {
  path = path.substr(0, path.find('?'));
  for (const auto& p : providers())
    for (const auto& t : p.token_endpoints)
      if (t.host == host && t.path == path) return &p;
  return nullptr;
}

namespace {

// The response fields rewrite_token_response() binds, and the name of
// such a binding (reports, and the supervisor's check of a filter's).
constexpr std::string_view kTokenKeys[] = {"access_token", "refresh_token", "id_token", "token", "key", "api_key"};
std::string token_binding_name(const Provider& p, std::string_view key) {
  return fmt::format("token response {}.{}", p.ids.front(), key);
}

}  // namespace

util::Result<std::string> rewrite_token_response(std::string_view body, const Provider& p, const TokenEndpoint& t,
                                                 Origin origin, const Settings& s, Table& table, NewTokens& tokens,
                                                 int64_t now_ms) {
  auto doc = json::parse(body);
  if (!doc) return Error::invalid(fmt::format("the token response is not JSON ({})", doc.error().message()));
  if (!doc->as_object()) return Error::invalid("the token response is not a JSON object");
  auto known = table.snapshot();
  // Any real value anywhere becomes its placeholder (an endpoint may echo
  // the refresh token it was sent).
  auto mask = [&](auto& self, const json::Value& v) -> json::Value {
    if (const std::string* str = v.as_string()) {
      for (const auto& b : known)
        if (b.real == *str) return json::Value::string(b.placeholder);
      return v;
    }
    if (const json::Object* o = v.as_object()) {
      json::Object out;
      for (const auto& m : *o) out.push_back({m.key, self(self, m.value)});
      return json::Value::object(std::move(out));
    }
    if (const json::Array* a = v.as_array()) {
      json::Array out;
      for (const auto& e : *a) out.push_back(self(self, e));
      return json::Value::array(std::move(out));
    }
    return v;
  };
  json::Value out = mask(mask, *doc);
  json::Object& top = *out.as_object();
  const json::Object& orig = *doc->as_object();
  for (size_t i = 0; i < top.size(); ++i) {
    const std::string& key = top[i].key;
    const std::string* real = orig[i].value.as_string();
    // Where Pi stores it: the refresh token as "refresh", the access
    // token where the endpoint says, every other token as "access"
    // (Copilot's token, OpenRouter's key, Meta's api_key).
    const std::string field = key == "refresh_token"  ? "refresh"
                              : key == "access_token" ? std::string(t.access_token_field)
                                                      : "access";
    const bool refresh = field == "refresh";
    if (!real || real->empty() || std::find(std::begin(kTokenKeys), std::end(kTokenKeys), key) == std::end(kTokenKeys))
      continue;
    if (refresh)
      tokens.refresh = *real;
    else if (key != "id_token")
      tokens.access = *real;
    if (auto known_ph = table.placeholder_of(*real)) {  // known before, or a new one's echo under another key
      top[i].value = json::Value::string(*known_ph);
      if (key != "id_token") table.add_slot(*known_ph, Slot{t.id, field}, origin);
      continue;
    }
    std::vector<std::string> why;
    auto hosts = bound_hosts(&p, p.ids.front(), refresh, s, why);
    if (hosts.empty()) return Error::invalid(fmt::format("the token response's {} is bound to no host", key));
    Binding b{token_binding_name(p, key), make_placeholder(*real), *real, hosts};
    if (refresh) carry_as_refresh(b, &p);
    top[i].value = json::Value::string(b.placeholder);
    if (key != "id_token") table.add_slot(b.placeholder, Slot{t.id, field}, origin);
    table.add(std::move(b));
  }
  // A new token echoed anywhere else ({"session": {"bearer": ...}}) becomes
  // its placeholder too.
  known = table.snapshot();
  out = mask(mask, out);
  // Anthropic: {"account": {"email_address": ...}}; others: "email".
  for (const json::Value* a : {doc->find("account"), static_cast<const json::Value*>(&*doc)})
    if (a && a->as_object() && tokens.account.empty())
      for (std::string_view f : {"email_address", "email"})
        if (const json::Value* e = a->find(f); e && e->as_string() && tokens.account.empty())
          tokens.account = e->as_string()->substr(0, 128);
  if (auto in = number_of(doc->find("expires_in")))
    tokens.expires_ms = now_ms + static_cast<int64_t>(*in * 1000) - 5 * 60 * 1000;
  else if (auto at = number_of(doc->find("expires_at")))
    tokens.expires_ms = static_cast<int64_t>(*at * 1000) - 5 * 60 * 1000;
  else if (t.access_lifetime_ms > 0 && tokens.access)
    tokens.expires_ms = now_ms + t.access_lifetime_ms;  // as Pi stores it (no early margin)
  return json::stringify(out);
}

agent::NewContent apply_tokens(agent::Content host_now, std::string_view id, const NewTokens& tokens) {
  if (!tokens.access && !tokens.refresh) return std::nullopt;
  auto doc = json::parse(host_now ? *host_now : std::string_view("{}"));
  if (!doc || !doc->as_object()) return std::nullopt;
  json::Object& top = *doc->as_object();
  auto it = std::find_if(top.begin(), top.end(), [&](const json::Member& m) { return m.key == id; });
  if (it == top.end()) {
    top.push_back({std::string(id), json::Value::object({{"type", json::Value::string("oauth")}})});
    it = top.end() - 1;
  }
  json::Object* entry = it->value.as_object();
  if (!entry) return std::nullopt;  // not Pi's shape: left for the host's Pi to judge
  auto set = [&](std::string_view field, json::Value v) {
    auto f = std::find_if(entry->begin(), entry->end(), [&](const json::Member& m) { return m.key == field; });
    if (f == entry->end())
      entry->push_back({std::string(field), std::move(v)});
    else
      f->value = std::move(v);
  };
  if (tokens.refresh) set("refresh", json::Value::string(*tokens.refresh));
  if (tokens.access) set("access", json::Value::string(*tokens.access));
  if (tokens.expires_ms) set("expires", json::Value::number(json::Number::from_int(*tokens.expires_ms)));
  return json::stringify(*doc);
}

void HeldLogins::hold(Login l) {
  std::lock_guard lock(mu_);
  // A login in two exchanges (Copilot's and Meta's: the refresh token,
  // then the access token it buys) is one login: what the later one did
  // not give is kept from the earlier.
  for (auto& o : logins_)
    if (o.id == l.id) {
      NewTokens& t = l.tokens;
      if (!t.refresh) t.refresh = o.tokens.refresh;
      if (!t.access) t.access = o.tokens.access;
      if (!t.expires_ms) t.expires_ms = o.tokens.expires_ms;
      if (t.account.empty()) t.account = o.tokens.account;
    }
  std::erase_if(logins_, [&](const Login& o) { return o.id == l.id; });
  logins_.push_back(std::move(l));
}

std::vector<HeldLogins::Login> HeldLogins::list() const {
  std::lock_guard lock(mu_);
  return logins_;
}

namespace {

// The parameters a renewal may carry: Pi's (grant_type, refresh_token,
// client_id; OpenAI's resource), and client_secret and scope (RFC 6749
// section 6). Any other (a code, a device code, a verifier) is a login's.
constexpr std::string_view kRenewalParameters[] = {"grant_type",    "client_id", "client_secret",
                                                   "refresh_token", "scope",     "resource"};

// A renewal's body as it plainly reads: JSON (an object of strings) or a
// form (name=value pairs joined by '&', names as written, values
// percent-decoded), in printable ASCII, with renewal parameters only,
// each once, spelt exactly.
struct RenewalBody {
  bool json = false;
  std::vector<std::pair<std::string, std::string>> params;

  std::string_view operator[](std::string_view name) const {
    for (const auto& [n, v] : params)
      if (n == name) return v;
    return {};
  }
  // The body the filter sends: these parameters, `refresh_token` the real one.
  std::string rebuilt(const std::string& real_refresh) const {
    std::string out;
    for (const auto& [name, value] : params) {
      const std::string& v = name == "refresh_token" ? real_refresh : value;
      if (json)
        out += (out.empty() ? "{" : ",") + util::json_escape(name) + ":" + util::json_escape(v);
      else
        out += (out.empty() ? "" : "&") + name + "=" + percent_encode(v);
    }
    return json ? out + "}" : out;
  }
};

// Whether a token request's body is JSON (else a form): its first
// non-space byte opens an object.
bool json_body(std::string_view body) {
  const size_t first = body.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && body[first] == '{';
}

std::optional<RenewalBody> renewal_body(std::string_view body) {
  if (!std::all_of(body.begin(), body.end(),
                   [](char c) { return (c >= 0x20 && c <= 0x7e) || c == '\t' || c == '\r' || c == '\n'; }))
    return std::nullopt;  // a BOM, UTF-16, NULs: not plainly either
  RenewalBody out;
  if (json_body(body)) {
    out.json = true;
    auto doc = json::parse(body);  // refuses duplicate names
    if (!doc || !doc->as_object()) return std::nullopt;
    for (const auto& m : *doc->as_object()) {
      const std::string* v = m.value.as_string();
      if (!v) return std::nullopt;
      out.params.emplace_back(m.key, *v);
    }
  } else {
    for (size_t at = 0; at <= body.size();) {
      const size_t amp = body.find('&', at);
      std::string_view pair = body.substr(at, amp == std::string_view::npos ? std::string_view::npos : amp - at);
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos) return std::nullopt;
      std::string value(pair.substr(eq + 1));
      std::replace(value.begin(), value.end(), '+', ' ');
      out.params.emplace_back(std::string(pair.substr(0, eq)), percent_decode(value));
      if (amp == std::string_view::npos) break;
      at = amp + 1;
    }
  }
  for (size_t i = 0; i < out.params.size(); ++i) {
    const std::string& name = out.params[i].first;
    if (std::find(std::begin(kRenewalParameters), std::end(kRenewalParameters), name) == std::end(kRenewalParameters))
      return std::nullopt;
    for (size_t j = 0; j < i; ++j)
      if (out.params[j].first == name) return std::nullopt;
  }
  return out;
}

// The provider's renewal at endpoint `t`, as the filter sends it, when the
// request is plainly one: the current placeholder of the host's (or a
// renewed) refresh credential of `t.id`, as t.renewal defines, and nothing
// a server could read otherwise. A refresh_token grant: no query (many
// servers read one before the body), and a body renewal_body() reads whose
// refresh_token is that placeholder, which is rebuilt from those
// parameters and sent with its own type, so the server reads what the
// filter read. A header renewal (Copilot's token GET, Meta's mint): one
// Authorization field, a scheme and the real token alone (a server reads
// the first or the last of several). Else nullopt: a login.
std::optional<ExchangeRequest> renewal_request(const TokenEndpoint& t, std::string_view path, std::string_view body,
                                               const std::vector<std::string>& header_placeholders,
                                               const std::vector<std::string>& authorization, const Table& table) {
  auto current = table.current_in(Slot{t.id, "refresh"});
  // A credential that came from a login inside renews into a login too.
  if (!current || current->second == Origin::login || path.find('?') != std::string_view::npos) return std::nullopt;
  const auto bound = table.by_placeholder(current->first);
  if (!bound) return std::nullopt;
  switch (t.renewal) {
    case Renewal::refresh_grant: {
      auto b = renewal_body(body);
      if (!b || (*b)["grant_type"] != "refresh_token" || (*b)["refresh_token"] != current->first) return std::nullopt;
      for (const auto& [name, value] : b->params)  // the placeholder in refresh_token alone
        if (name != "refresh_token" && value.find(current->first) != std::string::npos) return std::nullopt;
      return ExchangeRequest{b->rebuilt(bound->real), ExchangeKind::renewal,
                             b->json ? "application/json" : "application/x-www-form-urlencoded"};
    }
    case Renewal::header_token: {
      if (authorization.size() != 1 || std::find(header_placeholders.begin(), header_placeholders.end(),
                                                 current->first) == header_placeholders.end())
        return std::nullopt;
      const std::string& a = authorization.front();
      const size_t space = a.find(' ');
      if (space == std::string::npos || std::string_view(a).substr(space + 1) != bound->real) return std::nullopt;
      const std::string_view scheme = std::string_view(a).substr(0, space);
      if (!netproxy::http1::iequal(scheme, "Bearer") && !netproxy::http1::iequal(scheme, "token")) return std::nullopt;
      return ExchangeRequest{std::string(body), ExchangeKind::renewal, ""};
    }
    case Renewal::none: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

OAuthExchange::OAuthExchange(std::shared_ptr<Table> table, Settings settings, std::string agent_dir,
                             std::function<void(const std::string&)> warn, std::shared_ptr<HeldLogins> held)
    : table_(std::move(table)),
      settings_(std::move(settings)),
      agent_dir_(std::move(agent_dir)),
      warn_(std::move(warn)),
      held_(std::move(held)) {}

// The path is compared as a lenient server reads it (names_path): another
// spelling of a token endpoint ("/v1/oauth/token/", "//v1/oauth/token")
// is the token endpoint, else a login through it would bring the real
// tokens into the jail unrewritten.
const TokenEndpoint* OAuthExchange::endpoint(std::string_view host, std::string_view path) const {
  for (const auto& t : settings_.test_token_endpoints)
    if (t.host == host && names_path(path, t.path) && provider_by_id(t.id)) return &t;
  for (const auto& p : providers())
    for (const auto& t : p.token_endpoints)
      if (t.host == host && names_path(path, t.path)) return &t;
  return nullptr;
}

bool OAuthExchange::is_token_endpoint(std::string_view host, std::string_view path) const {
  return endpoint(host, path) != nullptr;
}

bool OAuthExchange::is_exact_token_endpoint(std::string_view host, std::string_view path) const {
  const TokenEndpoint* t = endpoint(host, path);
  return t && path == t->path;
}

util::Result<ExchangeRequest> OAuthExchange::request_body(std::string_view host, std::string_view path,
                                                          std::string_view body,
                                                          const std::vector<std::string>& header_placeholders,
                                                          const std::vector<std::string>& authorization) {
  const TokenEndpoint* t = endpoint(host, path);
  if (!t) return Error::invalid("not a token endpoint");
  if (body.size() > kMaxTokenBody) return Error::invalid("the token request body is too large");
  // A credential goes only to the endpoint itself, spelt as the
  // provider's clients spell it: another spelling (which a server may
  // route to content the jail controls) is rewritten like a login, and
  // carries none.
  const bool exact = path == t->path;
  if (exact)
    if (auto renewal = renewal_request(*t, path, body, header_placeholders, authorization, *table_))
      return std::move(*renewal);
  // A login: the placeholders bound here (a login's own refresh token)
  // become the real values; the host's refresh token is never spent on
  // one (the provider may rotate it, leaving the host's dead).
  // (Every placeholder that ever stood for a refresh token of the host's
  // or of a renewal: a login inside leaves the host's still valid.)
  std::vector<std::string> host_refresh;
  for (const auto& i : table_->issued())
    if (i.slot.field == "refresh" && i.origin != Origin::login) host_refresh.push_back(i.placeholder);
  std::string out(body);
  const bool is_json = json_body(body);
  for (const auto& b : table_->snapshot()) {
    if (out.find(b.placeholder) == std::string::npos) continue;
    if (!bound_to(b, host))
      return Error::invalid(fmt::format("the token request carries the placeholder of {}, which is not bound to {}",
                                        b.name, util::printable(host)));
    if (!exact)
      return Error::invalid(
          fmt::format("the token request to {} carries the placeholder of {}: a credential goes "
                      "only to {} itself, spelt so",
                      util::printable(path.substr(0, 256)), b.name, t->path));
    if (std::find(host_refresh.begin(), host_refresh.end(), b.placeholder) != host_refresh.end())
      return Error::invalid(fmt::format(
          "the token request carries the host's refresh token ({}) but is not plainly the provider's renewal "
          "(pi-jail.toml(5), [credentials]): refused, so that it is not spent on another exchange",
          b.name));
    std::string real;
    if (is_json) {
      real = util::json_escape(b.real);
      real = real.substr(1, real.size() - 2);
    } else {
      real = percent_encode(b.real);
    }
    replace_all(out, b.placeholder, real);
  }
  return ExchangeRequest{std::move(out), ExchangeKind::login, ""};
}

util::Result<std::string> OAuthExchange::response_body(std::string_view host, std::string_view path, int status,
                                                       std::string_view content_encoding, std::string_view body,
                                                       ExchangeKind kind) {
  const TokenEndpoint* t = endpoint(host, path);
  if (!t) return Error::invalid("not a token endpoint");
  const Provider* p = provider_by_id(t->id);
  auto decoded = decode_body(content_encoding, body);
  if (!decoded) return decoded.take_error();
  NewTokens tokens;
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const bool renewal = kind == ExchangeKind::renewal;
  const bool ok_status = status >= 200 && status < 300;
  // One reported exchange at a time: its messages stay together, and the
  // table's growth since `before` is this exchange's.
  std::unique_lock<std::mutex> reporting;
  if (report_) reporting = std::unique_lock<std::mutex>(report_mu_);
  const Table::Mark before = table_->mark();
  auto rewritten = rewrite_token_response(*decoded, *p, *t, renewal ? Origin::renewal : Origin::login, settings_,
                                          *table_, tokens, now_ms);
  if (!rewritten) return rewritten.take_error();
  if (!report_) {
    if (ok_status) settle(*t, kind, tokens, agent::LockTiming{}.wait);
    return rewritten;
  }
  ExchangeReport e{kind, std::string(host), std::string(path), t->id, ok_status, tokens, table_->bindings_since(before),
                   {}};
  for (auto& [placeholder, slot] : table_->slots_since(before)) e.slots.emplace_back(placeholder, slot.field);
  if (auto st = report_(e); !st) return st.take_error();
  return rewritten;
}

void OAuthExchange::settle(const TokenEndpoint& t, ExchangeKind kind, const NewTokens& tokens,
                           std::chrono::milliseconds lock_wait) {
  if (!tokens.access && !tokens.refresh) return;
  if (kind != ExchangeKind::renewal) {
    // A login inside the jail: used for the rest of the run (the new
    // placeholders are bound), written to the host only with consent.
    if (held_) held_->hold({t.id, tokens});
    return;
  }
  if (agent_dir_.empty()) return;
  const std::string id = t.id;
  auto dir = util::open_dir_nofollow(agent_dir_);
  util::Result<agent::WriteOutcome> written =
      dir ? agent::update_locked(
                dir->get(), agent::kAuthFile.name, [&](agent::Content now) { return apply_tokens(now, id, tokens); },
                agent::LockTiming{.wait = lock_wait})
          : util::Result<agent::WriteOutcome>(dir.take_error());
  if (!written && warn_)
    warn_(
        fmt::format("refreshed {} tokens could not be written to the host's auth.json now ({}); the write-back "
                    "at the end tries again",
                    id, written.error().message()));
}

OAuthExchange::Seed OAuthExchange::seed(const std::vector<Binding>& bound) const {
  Seed out{{}, settings_.test_token_endpoints, settings_.extra_hosts};
  for (const auto& i : table_->issued())
    if (std::any_of(bound.begin(), bound.end(), [&](const Binding& b) { return b.placeholder == i.placeholder; }))
      out.slots.push_back({i.placeholder, i.slot, i.origin});
  return out;
}

namespace {

// What make_placeholder() makes: long, and of letters, digits and a
// JWT's or a provider prefix's punctuation only.
bool placeholder_form(std::string_view s) {
  return s.size() >= 32 && s.size() <= 16 * 1024 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                  c == '.';
         });
}

// What a run may take from a filter's reports: every token of a long
// run's refreshes, and not the supervisor's memory.
constexpr size_t kMaxAcceptedBytes = size_t{4} << 20;
constexpr auto kRenewalGap = std::chrono::seconds(60);

}  // namespace

util::Status OAuthExchange::check_new_binding(const ExchangeReport& e, size_t i, const Provider& p,
                                              const std::vector<BoundHost>& api_hosts,
                                              const std::vector<BoundHost>& refresh_hosts) const {
  const Binding& b = e.bindings[i];
  if (std::none_of(std::begin(kTokenKeys), std::end(kTokenKeys),
                   [&](std::string_view k) { return b.name == token_binding_name(p, k); }))
    return Error::invalid(fmt::format("a new binding not named for a token response of {}", e.entry));
  if (!placeholder_form(b.placeholder) || table_->overlaps_placeholder(b.placeholder))
    return Error::invalid(fmt::format("{}: not a new placeholder", b.name));
  if (b.real.empty() || table_->holds_real(b.real))
    return Error::invalid(fmt::format("{}: a value the run holds already", b.name));
  for (size_t j = 0; j < i; ++j)
    if (e.bindings[j].placeholder.find(b.placeholder) != std::string::npos ||
        b.placeholder.find(e.bindings[j].placeholder) != std::string::npos || e.bindings[j].real == b.real)
      return Error::invalid(fmt::format("{}: given twice", b.name));
  const bool refresh = b.carriage == Carriage::token_exchange;
  const auto& allowed = refresh ? refresh_hosts : api_hosts;
  const bool within = !b.hosts.empty() && std::all_of(b.hosts.begin(), b.hosts.end(), [&](const BoundHost& h) {
    return std::find(allowed.begin(), allowed.end(), h) != allowed.end();
  });
  if (!within)
    return Error::invalid(fmt::format("{}: bound to a host not of provider {} for its kind", b.name, e.entry));
  return {};
}

util::Result<std::pair<std::vector<std::string>, std::vector<std::string>>> OAuthExchange::check_slots(
    const ExchangeReport& e, const TokenEndpoint& t) const {
  std::vector<std::string> refresh_reals, other_reals;
  for (const auto& slot : e.slots) {
    const std::string& placeholder = slot.first;
    const std::string& field = slot.second;
    if (!is_secret_field(field)) return Error::invalid(fmt::format("a slot in field \"{}\"", util::printable(field)));
    const bool refresh_field = field == "refresh";
    auto it = std::find_if(e.bindings.begin(), e.bindings.end(),
                           [&](const Binding& b) { return b.placeholder == placeholder; });
    std::string real;
    if (it != e.bindings.end()) {
      if ((it->carriage == Carriage::token_exchange) != refresh_field || it->name.ends_with(".id_token"))
        return Error::invalid(fmt::format("{} in field \"{}\", not of its kind", it->name, field));
      real = it->real;
    } else {
      // An echo: a placeholder already standing in this very slot.
      auto known = table_->by_placeholder(placeholder);
      if (!known || !table_->has_slot(placeholder, Slot{t.id, field}))
        return Error::invalid(fmt::format("a slot of {}.{} for a credential not in it", e.entry, field));
      real = known->real;
    }
    (refresh_field ? refresh_reals : other_reals).push_back(std::move(real));
  }
  return std::pair{std::move(refresh_reals), std::move(other_reals)};
}

util::Status OAuthExchange::check_report(const ExchangeReport& e, const TokenEndpoint& t) const {
  const Provider* p = provider_by_id(t.id);
  if (!p) return Error::invalid(fmt::format("token report for {}: endpoint id {} names no provider", e.entry, t.id));
  std::vector<std::string> why;
  const auto api_hosts = bound_hosts(p, p->ids.front(), false, settings_, why);
  const auto refresh_hosts = bound_hosts(p, p->ids.front(), true, settings_, why);
  size_t bytes = 0;
  for (size_t i = 0; i < e.bindings.size(); ++i) {
    if (auto st = check_new_binding(e, i, *p, api_hosts, refresh_hosts); !st) return st;
    bytes += e.bindings[i].real.size() + e.bindings[i].placeholder.size();
  }
  auto reals = check_slots(e, t);
  if (!reals) return reals.take_error();
  auto slotted = [](const std::optional<std::string>& v, const std::vector<std::string>& in) {
    return !v || std::find(in.begin(), in.end(), *v) != in.end();
  };
  if (!slotted(e.tokens.refresh, reals->first) || !slotted(e.tokens.access, reals->second))
    return Error::invalid(fmt::format("a token of {} that the exchange did not slot", e.entry));
  if (accepted_bytes_ + bytes > kMaxAcceptedBytes)
    return Error::invalid(fmt::format("more than {} bytes of new credentials in one run", kMaxAcceptedBytes));
  return {};
}

util::Status OAuthExchange::accept(const ExchangeReport& e) {
  const TokenEndpoint* t = endpoint(e.host, e.path);
  if (!t)
    return Error::invalid(fmt::format("token report for {}{}: not a token endpoint of this run",
                                      util::printable(e.host), util::printable(e.path)));
  if (t->id != e.entry)
    return Error::invalid(fmt::format("token report for {}{}: entry {} is not the endpoint's ({})",
                                      util::printable(e.host), util::printable(e.path), e.entry, t->id));
  if (auto st = check_report(e, *t); !st) return st;
  // A renewal only where renewal_request could have found one (the
  // endpoint's own path), and not over and over.
  const auto now = std::chrono::steady_clock::now();
  auto current = table_->current_in(Slot{t->id, "refresh"});
  auto last = std::find_if(renewed_.begin(), renewed_.end(), [&](const auto& r) { return r.first == t->id; });
  const bool renewal = e.kind == ExchangeKind::renewal && e.path == t->path && current &&
                       current->second != Origin::login && t->renewal != Renewal::none &&
                       (last == renewed_.end() || now - last->second >= kRenewalGap);
  if (renewal && e.ok) {
    if (last == renewed_.end())
      renewed_.emplace_back(t->id, now);
    else
      last->second = now;
  }
  for (const auto& b : e.bindings) {
    accepted_bytes_ += b.real.size() + b.placeholder.size();
    table_->add(b);
  }
  for (const auto& [placeholder, field] : e.slots)
    table_->add_slot(placeholder, Slot{t->id, field}, renewal ? Origin::renewal : Origin::login);
  // On the supervisor's loop: Pi's lock is waited for briefly; the
  // write-back at the end tries again.
  if (e.ok)
    settle(*t, renewal ? ExchangeKind::renewal : ExchangeKind::login, e.tokens, std::chrono::milliseconds(2000));
  return {};
}

}  // namespace pj::credentials

namespace pj::credentials {

std::vector<std::string> apply_held(const std::string& agent_dir, const std::vector<HeldLogins::Login>& logins) {
  std::vector<std::string> out;
  if (agent_dir.empty()) return out;
  for (const auto& l : logins) {
    auto dir = util::open_dir_nofollow(agent_dir);
    util::Result<agent::WriteOutcome> written =
        dir ? agent::update_locked(dir->get(), agent::kAuthFile.name,
                                   [&](agent::Content now) { return apply_tokens(now, l.id, l.tokens); })
            : util::Result<agent::WriteOutcome>(dir.take_error());
    if (written)
      out.push_back(fmt::format("applied: auth.json: provider \"{}\": the login made in the jail (with your consent)",
                                util::printable(l.id)));
    else
      out.push_back(
          fmt::format("refused: auth.json: provider \"{}\": the login made in the jail could not be "
                      "written ({})",
                      util::printable(l.id), written.error().message()));
  }
  return out;
}

}  // namespace pj::credentials
