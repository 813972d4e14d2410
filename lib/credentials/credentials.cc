#include "credentials/credentials.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include <fmt/format.h>

#include "net/address.h"
#include "util/escape.h"
#include "util/json_value.h"
#include "util/numbers.h"

namespace pj::credentials {

namespace json = util::json;

const std::vector<Provider>& providers() {
  // Hosts are those of the pi profile's [network] allow; a provider
  // without a fixed host (Azure: a resource of its own) has none, so its
  // key is withheld unless an operator binds it.
  static const std::vector<Provider> table = {
      {{"anthropic"},
       {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN"},
       {"api.anthropic.com"},
       {{"platform.claude.com", "/v1/oauth/token", "anthropic"},
        {"console.anthropic.com", "/v1/oauth/token", "anthropic"}},
       // An OAuth token with scope org:create_api_key (Pi asks for it)
       // mints a real API key at /api/oauth/claude_cli/create_api_key.
       {"/api/oauth/"}},
      // An admin key creates admin keys, and project service accounts and
      // their keys, in the response. Sign in with ChatGPT (pi-ai
      // providers/openai.js, auth/oauth/openai-chatgpt.js) stores its
      // tokens as the "openai" entry and sends them to api.openai.com.
      {{"openai"},
       {"OPENAI_API_KEY"},
       {"api.openai.com"},
       {{"auth.openai.com", "/api/accounts/oauth/token", "openai"}},
       {"/v1/organization/admin_api_keys", "/v1/organization/projects/*/service_accounts",
        "/v1/organization/projects/*/api_keys"}},
      {{"openai-codex"}, {}, {"chatgpt.com"}, {{"auth.openai.com", "/oauth/token", "openai-codex"}}},
      {{"azure", "azure-openai-responses"}, {"AZURE_OPENAI_*"}, {}, {}},
      {{"google", "google-vertex"},
       {"GEMINI_API_KEY", "GOOGLE_CLOUD_API_KEY"},
       {"generativelanguage.googleapis.com"},
       {}},
      {{"mistral"}, {"MISTRAL_API_KEY"}, {"api.mistral.ai"}, {}},
      {{"groq"}, {"GROQ_API_KEY"}, {"api.groq.com"}, {}},
      {{"cerebras"}, {"CEREBRAS_API_KEY"}, {"api.cerebras.ai"}, {}},
      {{"xai"}, {"XAI_API_KEY"}, {"api.x.ai"}, {{"auth.x.ai", "/oauth2/token", "xai"}}},
      {{"deepseek"}, {"DEEPSEEK_API_KEY"}, {"api.deepseek.com"}, {}},
      {{"together"}, {"TOGETHER_API_KEY"}, {"api.together.ai"}, {}},
      {{"fireworks"}, {"FIREWORKS_API_KEY"}, {"api.fireworks.ai"}, {}, {"/v1/accounts/*/users/*/apiKeys"}},
      {{"openrouter"},
       {"OPENROUTER_API_KEY"},
       {"openrouter.ai", "us.openrouter.ai"},
       // A PKCE code exchange: it hands out a new key, never renews one.
       {{"openrouter.ai", "/api/v1/auth/keys", "openrouter", 443, Renewal::none}},
       // A provisioning key creates API keys.
       {"/api/v1/keys"}},
      {{"huggingface"}, {"HF_TOKEN"}, {"router.huggingface.co"}, {}},
      {{"nvidia"}, {"NVIDIA_API_KEY"}, {"integrate.api.nvidia.com"}, {}},
      {{"baseten"}, {"BASETEN_API_KEY"}, {"inference.baseten.co"}, {}},
      {{"moonshotai", "moonshotai-cn"}, {"MOONSHOT_API_KEY"}, {"api.moonshot.ai", "api.moonshot.cn"}, {}},
      {{"kimi-coding"}, {"KIMI_API_KEY"}, {"api.kimi.com"}, {{"auth.kimi.com", "/api/oauth/token", "kimi-coding"}}},
      {{"zai", "zai-coding-cn"}, {"ZAI_API_KEY", "ZAI_CODING_CN_API_KEY"}, {"api.z.ai", "open.bigmodel.cn"}, {}},
      {{"minimax", "minimax-cn"},
       {"MINIMAX_API_KEY", "MINIMAX_CN_API_KEY"},
       {"api.minimax.io", "api.minimaxi.com"},
       {}},
      {{"xiaomi", "xiaomi-token-plan-cn", "xiaomi-token-plan-ams", "xiaomi-token-plan-sgp"},
       {"XIAOMI_*"},
       {"api.xiaomimimo.com", "token-plan-ams.xiaomimimo.com", "token-plan-cn.xiaomimimo.com",
        "token-plan-sgp.xiaomimimo.com"},
       {}},
      {{"qwen-token-plan", "qwen-token-plan-cn", "qwen-token-plan-individual", "qwen-token-plan-individual-cn"},
       {"QWEN_TOKEN_PLAN_*"},
       {"token-plan.ap-southeast-1.maas.aliyuncs.com", "token-plan.cn-beijing.maas.aliyuncs.com"},
       {}},
      // Meta's device login gives an identity token (auth.json "refresh")
      // that mints the API key ("access") at api.meta.ai, sent in a header
      // (pi-ai auth/oauth/meta.js).
      {{"meta"},
       {"META_API_KEY"},
       {"api.meta.ai"},
       // The minted key lives a day: pi-ai meta.js API_KEY_LIFETIME_MS.
       {{"api.meta.ai", "/muse-code/key", "meta", 443, Renewal::header_token, "access", "Authorization",
         24 * 60 * 60 * 1000},
        {"auth.meta.com", "/oidc/device/token/", "meta", 443, Renewal::none, "refresh"}}},
      {{"ant-ling"}, {"ANT_LING_API_KEY"}, {"api.ant-ling.com"}, {}},
      {{"typesafe"}, {"TYPESAFE_API_KEY"}, {"api.typesafe.ai"}, {}},
      {{"vercel-ai-gateway"}, {"AI_GATEWAY_API_KEY"}, {"ai-gateway.vercel.sh"}, {}},
      {{"cloudflare-workers-ai", "cloudflare-ai-gateway"},
       {"CLOUDFLARE_API_KEY"},
       {"gateway.ai.cloudflare.com", "api.cloudflare.com"},
       {},
       // A token with the token-creation permission creates (and rolls) API tokens.
       {"/client/v4/user/tokens", "/client/v4/accounts/*/tokens"}},
      // The GitHub token (auth.json "refresh") buys a Copilot token
      // ("access") at api.github.com, sent in a header.
      {{"github-copilot"},
       {"COPILOT_GITHUB_TOKEN"},
       {"api.individual.githubcopilot.com"},
       {{"api.github.com", "/copilot_internal/v2/token", "github-copilot", 443, Renewal::header_token, "access",
         "Authorization"},
        // The device login's GitHub token: rewritten too, never given to the jail.
        {"github.com", "/login/oauth/access_token", "github-copilot", 443, Renewal::none, "refresh"}}},
      {{"opencode", "opencode-go"}, {"OPENCODE_API_KEY"}, {"opencode.ai"}, {}},
      {{"radius"}, {"RADIUS_API_KEY"}, {"radius.pi.dev"}, {{"radius.pi.dev", "/v1/oauth/token", "radius"}}},
      {{"amazon-bedrock"},
       {"AWS_BEARER_TOKEN_BEDROCK"},
       {"bedrock-runtime.us-east-1.amazonaws.com", "bedrock-runtime.eu-central-1.amazonaws.com"},
       {}},
  };
  return table;
}

namespace {

bool env_matches(std::string_view pattern, std::string_view name) {
  if (!pattern.ends_with('*')) return pattern == name;
  pattern.remove_suffix(1);
  return name.starts_with(pattern);
}

bool is_secret_name(std::string_view name) { return name.ends_with("_KEY") || name.ends_with("_TOKEN"); }

bool passed(const std::vector<std::string>& env_pass, std::string_view name) {
  return std::any_of(env_pass.begin(), env_pass.end(), [&](const std::string& p) { return env_matches(p, name); });
}

std::string host_str(const BoundHost& h) {
  const bool v6 = h.name.find(':') != std::string::npos;
  return fmt::format("{}{}{}{}:{}", h.wire == netproxy::Wire::plain_http ? "http://" : "", v6 ? "[" : "", h.name,
                     v6 ? "]" : "", h.port);
}

void add_host(std::vector<BoundHost>& hosts, BoundHost h) {
  if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(std::move(h));
}

BoundHost parse_bound(std::string_view text) {
  // Already normalised by the policy loader (parse_net_pattern): "name",
  // "name:port", "[v6]" or "[v6]:port"; no port: 443; "http://" before
  // a loopback host and port (policy::parse_bind_target): plain HTTP.
  BoundHost h;
  if (text.starts_with("http://")) {
    text.remove_prefix(7);
    h.wire = netproxy::Wire::plain_http;
  }
  auto split = net::split_host_port(text);
  std::string_view host = split ? split->host : text;
  if (split && split->has_port)
    if (auto port = util::parse_port(split->port)) h.port = static_cast<uint16_t>(*port);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  h.name = std::string(host);
  return h;
}

}  // namespace

void carry_as_refresh(Binding& b, const Provider* p) {
  b.carriage = Carriage::token_exchange;
  b.header.clear();
  if (p)
    for (const auto& t : p->token_endpoints)
      if (t.renewal == Renewal::header_token && !t.renewal_header.empty()) b.header = std::string(t.renewal_header);
}

util::Result<std::vector<MintingEndpoint>> minting_refusals(const std::vector<policy::Entry>& allowed) {
  std::vector<MintingEndpoint> refused;
  std::vector<std::string> known;
  for (const auto& p : providers())
    for (const auto& host : p.hosts)
      for (const auto& prefix : p.minting) {
        known.push_back(host + prefix);
        refused.push_back({host, prefix});
      }
  std::string errors;
  for (const auto& a : allowed)
    if (std::find(known.begin(), known.end(), a.text) == known.end())
      errors += fmt::format("{}{}: credentials.allow_minting \"{}\" is not a minting endpoint pi-jail refuses",
                            errors.empty() ? "" : "\n", a.src.str(), util::printable(a.text));
  if (!errors.empty()) return util::Error::invalid(fmt::format("{}\n  known: {}", errors, fmt::join(known, ", ")));
  std::erase_if(refused, [&](const MintingEndpoint& m) {
    return std::any_of(allowed.begin(), allowed.end(),
                       [&](const policy::Entry& a) { return a.text == m.host + m.path_prefix; });
  });
  return refused;
}

const Provider* provider_of_env(std::string_view name) {
  for (const auto& p : providers())
    for (const auto& e : p.env)
      if (e.ends_with('*') ? env_matches(e, name) && is_secret_name(name) : e == name) return &p;
  return nullptr;
}

const Provider* provider_by_id(std::string_view id) {
  for (const auto& p : providers())
    if (std::find(p.ids.begin(), p.ids.end(), id) != p.ids.end()) return &p;
  return nullptr;
}

// ---- placeholders ----

std::string placeholder_prefix(std::string_view real) {
  static constexpr std::string_view kKnown[] = {
      "sk-ant-api03-", "sk-ant-oat01-", "sk-ant-ort01-", "sk-ant-", "sk-proj-", "sk-or-v1-", "sk-svcacct-",
      "sk-",           "gsk_",          "xai-",          "ghu_",    "gho_",     "ghp_",      "github_pat_",
      "hf_",           "nvapi-",        "csk-",          "fw_",     "AIza",     "tgp_v1_"};
  // A JWT: header and claims kept, the signature replaced.
  if (real.starts_with("eyJ")) {
    size_t dot = real.rfind('.');
    if (dot != std::string_view::npos && std::count(real.begin(), real.end(), '.') == 2 && dot + 1 < real.size())
      return std::string(real.substr(0, dot + 1));
  }
  for (auto k : kKnown)
    if (real.starts_with(k) && real.size() > k.size()) return std::string(k);
  // A leading run of letters ending with '-' or '_' ("nvapi-", "tok_"):
  // a type marker, not part of the secret.
  for (size_t i = 0; i < real.size() && i < 12; ++i) {
    char c = real[i];
    if ((c == '-' || c == '_') && i > 0) return std::string(real.substr(0, i + 1));
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) break;
  }
  return {};
}

std::string make_placeholder(std::string_view real) {
  static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static constexpr std::string_view kB64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const std::string prefix = placeholder_prefix(real);
  const bool jwt = prefix.ends_with('.');
  const std::string_view alphabet = jwt ? kB64url : kAlnum;
  const size_t body = std::max<size_t>(32, real.size() > prefix.size() ? real.size() - prefix.size() : 0);
  for (;;) {
    std::string out = prefix;
    out.reserve(prefix.size() + body);
    while (out.size() < prefix.size() + body) {
      std::array<unsigned char, 64> buf;
      ssize_t n = ::getrandom(buf.data(), buf.size(), 0);
      if (n <= 0) {
        if (errno == EINTR) continue;
        std::abort();  // the kernel's random source is gone: nothing safe to return
      }
      // Rejection sampling: no modulo bias.
      const size_t limit = 256 - 256 % alphabet.size();
      for (ssize_t i = 0; i < n && out.size() < prefix.size() + body; ++i)
        if (buf[static_cast<size_t>(i)] < limit) out.push_back(alphabet[buf[static_cast<size_t>(i)] % alphabet.size()]);
    }
    // Never the real value, nor holding its secret part (what follows the
    // prefix) in what was drawn: 32 random characters make either all but
    // impossible, and this loop ends at once for any real value. A match
    // inside the kept prefix alone ("at--": the secret "-") is no match:
    // no draw could avoid it.
    const std::string_view secret = real.size() > prefix.size() ? real.substr(prefix.size()) : std::string_view();
    const size_t drawn_from = prefix.size() + 1 > secret.size() ? prefix.size() + 1 - secret.size() : 0;
    if (out != real && (secret.empty() || out.find(secret, drawn_from) == std::string::npos)) return out;
  }
}

// ---- the table ----

void Table::add(Binding b) {
  std::lock_guard lock(mu_);
  bindings_.push_back(std::move(b));
}

std::vector<Binding> Table::snapshot() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

std::optional<Binding> Table::by_placeholder(std::string_view placeholder) const {
  std::lock_guard lock(mu_);
  for (const auto& b : bindings_)
    if (b.placeholder == placeholder) return b;
  return std::nullopt;
}

std::optional<std::string> Table::placeholder_of(std::string_view real) const {
  std::lock_guard lock(mu_);
  for (const auto& b : bindings_)
    if (b.real == real) return b.placeholder;
  return std::nullopt;
}

std::vector<Binding> Table::take_added() {
  std::lock_guard lock(mu_);
  std::vector<Binding> out(bindings_.begin() + static_cast<std::ptrdiff_t>(taken_), bindings_.end());
  taken_ = bindings_.size();
  return out;
}

void Table::add_withheld(std::string placeholder, std::string real, Slot slot) {
  std::lock_guard lock(mu_);
  slots_.push_back({placeholder, {std::move(slot), Origin::host}});
  withheld_.emplace_back(std::move(placeholder), std::move(real));
}

void Table::add_slot(std::string placeholder, Slot slot, Origin origin) {
  std::lock_guard lock(mu_);
  slots_.push_back({std::move(placeholder), {std::move(slot), origin}});
}

std::vector<Table::Issued> Table::issued() const {
  std::lock_guard lock(mu_);
  std::vector<Issued> out;
  for (const auto& [placeholder, where] : slots_) {
    const std::string* real = nullptr;
    for (const auto& b : bindings_)
      if (b.placeholder == placeholder) real = &b.real;
    for (const auto& [ph, r] : withheld_)
      if (ph == placeholder) real = &r;
    if (real) out.push_back({placeholder, *real, where.first, where.second});
  }
  return out;
}

std::optional<TokenEndpoint> stand_in_endpoint(std::string_view id, std::string host, uint16_t port, std::string path) {
  const Provider* p = provider_by_id(id);
  if (!p) return std::nullopt;
  TokenEndpoint stand_in{std::move(host), std::move(path), std::string(id), port};
  for (const auto& real : p->token_endpoints)
    if (real.path == stand_in.path) {
      stand_in.renewal = real.renewal;
      stand_in.access_token_field = real.access_token_field;
      stand_in.renewal_header = real.renewal_header;
    }
  return stand_in;
}

bool Table::overlaps_placeholder(std::string_view s) const {
  std::lock_guard lock(mu_);
  return any_secret(
      [&](std::string_view ph, std::string_view) { return s.find(ph) != s.npos || ph.find(s) != ph.npos; });
}

bool Table::holds_real(std::string_view real) const {
  std::lock_guard lock(mu_);
  return any_secret([&](std::string_view, std::string_view r) { return r == real; });
}

bool Table::has_slot(std::string_view placeholder, const Slot& slot) const {
  std::lock_guard lock(mu_);
  for (const auto& [ph, where] : slots_)
    if (ph == placeholder && where.first == slot) return true;
  return false;
}

Table::Mark Table::mark() const {
  std::lock_guard lock(mu_);
  return {bindings_.size(), slots_.size()};
}

std::vector<Binding> Table::bindings_since(const Mark& m) const {
  std::lock_guard lock(mu_);
  if (m.bindings >= bindings_.size()) return {};
  return {bindings_.begin() + static_cast<std::ptrdiff_t>(m.bindings), bindings_.end()};
}

std::vector<std::pair<std::string, Slot>> Table::slots_since(const Mark& m) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, Slot>> out;
  for (size_t i = m.slots; i < slots_.size(); ++i) out.emplace_back(slots_[i].first, slots_[i].second.first);
  return out;
}

bool Table::is_placeholder(std::string_view s) const {
  std::lock_guard lock(mu_);
  return any_secret([&](std::string_view ph, std::string_view) { return ph == s; });
}

std::optional<std::pair<std::string, Origin>> Table::current_in(const Slot& slot) const {
  std::lock_guard lock(mu_);
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it)
    if (it->second.first == slot) return std::pair{it->first, it->second.second};
  return std::nullopt;
}

size_t Table::size() const {
  std::lock_guard lock(mu_);
  return bindings_.size();
}

// ---- plans ----

std::vector<BoundHost> bound_hosts(const Provider* p, std::string_view name, bool refresh, const Settings& s,
                                   std::vector<std::string>& why) {
  std::vector<BoundHost> hosts;
  if (p) {
    if (refresh) {
      for (const auto& t : p->token_endpoints) add_host(hosts, {t.host, t.port});
      for (const auto& t : s.test_token_endpoints)
        if (std::find(p->ids.begin(), p->ids.end(), t.id) != p->ids.end()) add_host(hosts, {t.host, t.port});
    } else
      for (const auto& h : p->hosts) add_host(hosts, {h, 443});
    if (!hosts.empty()) why.push_back("the profile's provider table");
  }
  for (const auto& x : s.extra_hosts) {
    bool mine = x.credential == name || (p && std::find(p->ids.begin(), p->ids.end(), x.credential) != p->ids.end());
    // An operator's extra host takes API keys and access tokens; a refresh
    // token goes only to the provider's own token endpoints.
    if (!mine || refresh) continue;
    add_host(hosts, parse_bound(x.host.text));
    why.push_back(x.host.src.str());
  }
  return hosts;
}

LoginHosts login_hosts(const Settings& s) {
  LoginHosts out;
  std::vector<std::string> why;
  for (const auto& p : providers()) {
    auto endpoints = bound_hosts(&p, "", true, s, why);
    if (endpoints.empty()) continue;  // no OAuth login
    for (auto& h : endpoints) add_host(out.endpoints, std::move(h));
    // The CA vouches for TLS hosts only: an operator's http:// bind (a
    // local model server) needs none.
    for (auto& h : bound_hosts(&p, "", false, s, why))
      if (h.wire == netproxy::Wire::tls) add_host(out.bound_later, std::move(h));
  }
  return out;
}

Plan plan_env(const std::vector<std::string>& host_env, const Settings& s, Table& table) {
  Plan plan;
  auto through = [&](std::string_view name) {
    return std::any_of(s.pass_through.begin(), s.pass_through.end(),
                       [&](const policy::Entry& e) { return e.text == name; });
  };
  auto operator_bound = [&](std::string_view name) {
    return std::any_of(s.extra_hosts.begin(), s.extra_hosts.end(),
                       [&](const policy::Layer::CredentialHost& x) { return x.credential == name; });
  };
  for (const auto& kv : host_env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    const std::string_view value = std::string_view(kv).substr(eq + 1);
    const Provider* p = provider_of_env(name);
    const bool signed_cred =
        std::find(std::begin(kSignedCredentials), std::end(kSignedCredentials), name) != std::end(kSignedCredentials);
    const bool custom = operator_bound(name) && !p;
    if (!p && !signed_cred && !custom) continue;         // not a credential
    if (!custom && !passed(s.env_pass, name)) continue;  // not passed anyway
    if (value.empty()) continue;
    if (through(name)) {
      plan.provenance.push_back({name, "pass-through", "", {}, "[credentials] pass_through: the real value"});
      continue;
    }
    if (signed_cred) {
      plan.errors.push_back(fmt::format(
          "{} is passed into the jail, but requests are signed with it (or tokens minted from it), which a "
          "placeholder cannot do, and the real value is never put inside\n"
          "  fix: remove it from [env] pass, or pass it as it is, knowing the jail can read it: [credentials] "
          "pass_through = [\"{}\"] in ~/.config/pi-jail/policy.toml",
          name, name));
      continue;
    }
    std::vector<std::string> why;
    auto hosts = bound_hosts(p, name, false, s, why);
    if (hosts.empty()) {
      plan.withheld.push_back(name);
      plan.provenance.push_back({name, "withheld", "", {}, "bound to no host: not passed"});
      continue;
    }
    Binding b{name, make_placeholder(value), std::string(value), hosts};
    Provenance pv{name, "placeholder", placeholder_prefix(value), {}, fmt::format("{}", fmt::join(why, ", "))};
    for (const auto& h : hosts) pv.hosts.push_back(host_str(h));
    plan.env.emplace_back(name, b.placeholder);
    plan.provenance.push_back(std::move(pv));
    table.add(std::move(b));
  }
  return plan;
}

namespace {

// The placeholder for `real` under `name`, reusing one already made for
// the same value and hosts (an env key that is also in auth.json), and
// recorded as standing in `slot`.
std::string bind(Table& table, std::string name, std::string_view real, std::vector<BoundHost> hosts,
                 std::vector<std::string> why, std::vector<Provenance>& provenance, Slot slot) {
  Provenance pv{name, "placeholder", placeholder_prefix(real), {}, fmt::format("{}", fmt::join(why, ", "))};
  for (const auto& h : hosts) pv.hosts.push_back(host_str(h));
  provenance.push_back(std::move(pv));
  std::string ph;
  const bool refresh = slot.field == "refresh";
  for (const auto& b : table.snapshot())
    if (b.real == real && b.hosts == hosts && (b.carriage == Carriage::token_exchange) == refresh) ph = b.placeholder;
  if (ph.empty()) {
    Binding b{std::move(name), make_placeholder(real), std::string(real), std::move(hosts)};
    if (refresh) carry_as_refresh(b, provider_by_id(slot.entry));
    ph = b.placeholder;
    table.add(std::move(b));
  }
  table.add_slot(ph, std::move(slot), Origin::host);
  return ph;
}

}  // namespace

util::Result<std::string> synthesize_auth(std::string_view host_auth, const Settings& s, Table& table,
                                          std::vector<Provenance>& provenance) {
  auto doc = json::parse(host_auth);
  if (!doc) return util::Error::invalid(fmt::format("auth.json: {}", doc.error().message()));
  json::Object* top = doc->as_object();
  if (!top) return util::Error::invalid("auth.json: not a JSON object");
  for (auto& [provider, entry] : *top) {
    json::Object* fields = entry.as_object();
    if (!fields) continue;  // Pi ignores it; nothing secret we could recognise
    const Provider* p = provider_by_id(provider);
    for (auto& [field, value] : *fields) {
      const std::string* v = value.as_string();
      // The secret fields of Pi's two credential types (and Copilot's
      // minted token): everything else (expires, accountId, ...) is kept.
      const bool refresh = field == "refresh";
      if (!v || v->empty() || !is_secret_field(field)) continue;
      const std::string name = fmt::format("auth.json {}.{}", provider, field);
      if (field == "key" && (v->starts_with('!') || v->starts_with('$'))) {
        provenance.push_back({name, "kept", "", {}, "a command or variable Pi resolves inside the jail"});
        continue;
      }
      std::vector<std::string> why;
      auto hosts = bound_hosts(p, provider, refresh, s, why);
      if (hosts.empty()) {
        provenance.push_back({name, "withheld", "", {}, "bound to no host: not passed"});
        // A placeholder, not "": what the jail leaves maps back to the real
        // value, so the write-back never empties the host's entry.
        std::string ph = make_placeholder(*v);
        table.add_withheld(ph, *v, Slot{provider, field});
        value = json::Value::string(std::move(ph));
        continue;
      }
      value = json::Value::string(
          bind(table, name, *v, std::move(hosts), std::move(why), provenance, Slot{provider, field}));
    }
  }
  return json::stringify(*doc);
}

namespace {

// What an entry says of its account, for the consent question: Pi's
// accountId (openai-codex), or an email field; never a secret field.
std::string account_of(const json::Value& entry) {
  for (std::string_view f : {"email", "accountId", "account"})
    if (const json::Value* v = entry.find(f))
      if (const std::string* s = v->as_string()) return s->substr(0, 128);
  return {};
}

// How one string of the jail's auth.json stands.
enum class Found { not_placeholder, in_its_slot, moved };

struct SlotMatch {
  Found found = Found::not_placeholder;
  const Table::Issued* issued = nullptr;  // in_its_slot: the one revealed
};

SlotMatch match(const std::vector<Table::Issued>& issued, const Table& table, std::string_view s, const Slot* where) {
  SlotMatch m;
  for (const auto& i : issued)
    if (i.placeholder == s) {
      if (where && i.slot == *where) return {Found::in_its_slot, &i};
      m.found = Found::moved;
    }
  if (m.found == Found::not_placeholder && table.is_placeholder(s)) m.found = Found::moved;
  return m;
}

// One pass over the jail's auth.json: reveals placeholders in their own
// slots, remembers the first one found anywhere else, and which entries
// are logins.
class Revealer {
public:
  Revealer(const Table& table, const json::Value* given) : table_(table), issued_(table.issued()), given_(given) {}

  // Reveal the provider entry `entry` in place; a login when it was not
  // given, or a secret field holds what the host never had.
  void entry(json::Member& entry, std::vector<HeldEntry>& held) {
    json::Object* fields = entry.value.as_object();
    if (!fields) return nested(entry.value, entry.key);
    const json::Value* given_entry = given_ ? given_->find(entry.key) : nullptr;
    bool login = !given_entry;
    for (json::Member& f : *fields)
      if (field(entry.key, f, given_entry ? given_entry->find(f.key) : nullptr) == Field::login) login = true;
    if (login) held.push_back({entry.key, account_of(entry.value)});
  }

  // No placeholder may stand below an entry's fields, or outside entries.
  void nested(const json::Value& v, std::string_view entry) {
    if (const std::string* s = v.as_string()) {
      if (match(issued_, table_, *s, nullptr).found != Found::not_placeholder) refuse(entry, "");
      return;
    }
    if (const json::Object* o = v.as_object())
      for (const auto& m : *o) nested(m.value, entry);
    if (const json::Array* a = v.as_array())
      for (const auto& e : *a) nested(e, entry);
  }

  // The first placeholder found out of its slot, as the error to return.
  const std::optional<std::string>& moved() const { return moved_; }

private:
  enum class Field { kept, login };

  // One field of `entry`: revealed when it holds a placeholder made for
  // it; `before`: the field as given.
  Field field(std::string_view entry, json::Member& f, const json::Value* before) {
    const std::string* s = f.value.as_string();
    if (!s) {
      nested(f.value, entry);
      return Field::kept;
    }
    const Slot here{std::string(entry), f.key};
    const SlotMatch m = match(issued_, table_, *s, &here);
    switch (m.found) {
      case Found::moved: refuse(entry, f.key); return Field::kept;
      case Found::in_its_slot: {
        const Origin origin = m.issued->origin;
        f.value = json::Value::string(m.issued->real);
        return origin == Origin::login ? Field::login : Field::kept;
      }
      case Found::not_placeholder:
        // A secret the jail changed holds a value the host never had.
        return is_secret_field(f.key) && !(before && *before == f.value) ? Field::login : Field::kept;
    }
    return Field::kept;
  }

  void refuse(std::string_view entry, std::string_view field) {
    if (moved_) return;
    moved_ = fmt::format(
        "auth.json: the entry \"{}\" holds, in {}, a placeholder made for another entry or field: not written back",
        util::printable(entry.substr(0, 64)),
        field.empty() ? std::string("a nested value") : fmt::format("\"{}\"", util::printable(field.substr(0, 64))));
  }

  const Table& table_;
  const std::vector<Table::Issued> issued_;
  const json::Value* given_;
  std::optional<std::string> moved_;
};

}  // namespace

util::Result<RevealedAuth> reveal_auth(std::string_view jail_auth, std::string_view given_jail, const Table& table) {
  auto doc = json::parse(jail_auth);
  if (!doc) return util::Error::invalid(fmt::format("auth.json: {}", doc.error().message()));
  auto given_doc = json::parse(given_jail);
  Revealer r(table, given_doc && given_doc->as_object() ? &*given_doc : nullptr);
  RevealedAuth out;
  if (json::Object* top = doc->as_object())
    for (json::Member& entry : *top) r.entry(entry, out.held);
  else
    r.nested(*doc, "");  // not Pi's shape (merge_auth refuses it): nothing revealed in it either
  if (r.moved()) return util::Error::invalid(*r.moved());
  out.text = json::stringify(*doc);
  return out;
}

std::vector<std::string> explain_lines(const std::vector<Provenance>& provenance) {
  std::vector<std::string> out;
  for (const auto& p : provenance) {
    if (p.treatment == "placeholder")
      out.push_back(
          fmt::format("{}: placeholder {}<random> -> {} ({})", p.name, p.prefix, fmt::join(p.hosts, ", "), p.why));
    else
      out.push_back(fmt::format("{}: {} ({})", p.name, p.treatment, p.why));
  }
  return out;
}

}  // namespace pj::credentials
