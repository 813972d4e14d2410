// A token request as the jail sends it to a token endpoint: its target
// and body, and its Authorization fields, judged a renewal (and rebuilt)
// or a login. A renewal must say plainly what the host's refresh token
// buys: no query, its body the filter's own with the real token, never a
// placeholder.
#include <memory>
#include <string>
#include <vector>

#include "credentials/credentials.h"
#include "credentials/token_exchange.h"
#include "fuzz.h"

using namespace pj::credentials;

namespace {

constexpr const char* kPlaceholder = "sk-ant-ort01-PHrefresh0123456789abcdef";
constexpr const char* kReal = "sk-ant-ort01-REALrefresh/+=0123456789";

// Anthropic's endpoint (a refresh_token grant) or Copilot's (a header).
const TokenEndpoint* endpoint(bool header) {
  for (const auto& p : providers())
    for (const auto& t : p.token_endpoints)
      if (t.renewal == (header ? Renewal::header_token : Renewal::refresh_grant)) return &t;
  pj::fuzz::broken("the provider table has no such token endpoint");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  const uint8_t choice = pj::fuzz::take_byte(in);
  // PATH \n BODY \n AUTHORIZATION...; "PH" anywhere stands for the placeholder.
  auto parts = pj::fuzz::split(in, '\n', 4);
  auto expand = [](std::string_view s) {
    const std::string_view ph = kPlaceholder;
    std::string out(s);
    for (size_t at = out.find("PH"); at != std::string::npos; at = out.find("PH", at)) {
      out.replace(at, 2, ph);
      at += ph.size();
    }
    return out;
  };
  const TokenEndpoint* t = endpoint(choice & 1);
  const std::string path = expand(parts[0]);
  const std::string body = parts.size() > 1 ? expand(parts[1]) : "";
  std::vector<std::string> authorization;
  for (size_t i = 2; i < parts.size(); ++i) authorization.push_back(expand(parts[i]));
  auto table = std::make_shared<Table>();
  table->add({"auth.json x.refresh", kPlaceholder, kReal, {{t->host, t->port}}});
  table->add_slot(kPlaceholder, Slot{t->id, "refresh"}, Origin::host);
  OAuthExchange ex(table, Settings{}, "", nullptr);
  auto out = ex.request_body(t->host, path, body, {kPlaceholder}, authorization);
  if (!out) return 0;
  if (out->kind == ExchangeKind::renewal) {
    if (path.find('?') != std::string::npos) pj::fuzz::broken("a renewal with a query");
    if (out->body.find(kPlaceholder) != std::string::npos) pj::fuzz::broken("a renewal's body with the placeholder");
    if (t->renewal == Renewal::refresh_grant && out->content_type.empty())
      pj::fuzz::broken("a rebuilt renewal without its own type");
  } else if (!out->content_type.empty()) {
    pj::fuzz::broken("a login's type changed");
  }
  return 0;
}
