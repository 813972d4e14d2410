// A token endpoint's response, as a bound host sends it: decoded from
// gzip, deflate or zstd, rewritten with new placeholders, and its tokens
// put into the host's auth.json.
#include <string>

#include "credentials/credentials.h"
#include "credentials/substitution.h"
#include "fuzz.h"
#include "credentials/token_exchange.h"

using namespace pj::credentials;

namespace {

const char* const kEncodings[] = {"", "identity", "gzip", "x-gzip", "deflate", "zstd", "br", "GZIP"};

// The first provider with a token endpoint, and that endpoint.
std::pair<const Provider*, const TokenEndpoint*> endpoint(uint8_t choice) {
  std::vector<std::pair<const Provider*, const TokenEndpoint*>> all;
  for (const auto& p : providers())
    for (const auto& t : p.token_endpoints) all.emplace_back(&p, &t);
  if (all.empty()) pj::fuzz::broken("the provider table has no token endpoint");
  return all[choice % all.size()];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  const uint8_t choice = pj::fuzz::take_byte(in);
  auto decoded = decode_body(kEncodings[choice % std::size(kEncodings)], in);
  if (!decoded) return 0;
  if (decoded->size() > kMaxTokenBody) pj::fuzz::broken("a decoded body past the cap");
  (void)looks_compressed(*decoded);
  auto [p, t] = endpoint(choice >> 3);
  Table table;
  table.add({"auth.json refresh", "PH-refresh-0000", "real-refresh-token", {{t->host, t->port}}});
  NewTokens tokens;
  auto out = rewrite_token_response(*decoded, *p, *t, Origin::renewal, Settings{}, table, tokens, 1'700'000'000'000);
  if (!out) return 0;
  std::vector<std::string> placeholders;
  for (const auto& b : table.snapshot()) placeholders.push_back(b.placeholder);
  (void)unrewritten_token(*out, placeholders);
  (void)apply_tokens(std::string_view(*decoded), t->id, tokens);
  (void)apply_tokens(std::nullopt, t->id, tokens);
  return 0;
}
