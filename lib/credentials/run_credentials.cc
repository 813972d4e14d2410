#include "run_credentials.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "net/address.h"
#include "credentials/token_exchange.h"
#include "util/escape.h"
#include "util/paths.h"
#include "util/untrusted.h"

namespace pj::credentials {

util::Result<RunCredentials> RunCredentials::prepare(const policy::Policy* p, runtime::Request& r,
                                                     const std::vector<std::string>& test_token_endpoints) {
  RunCredentials rc;
  State& st = *rc.state_;
  for (const auto& t : test_token_endpoints) {
    // PROVIDER@HOST:PORT/PATH
    size_t at = t.find('@'), slash = t.find('/', at == std::string::npos ? 0 : at);
    auto hostport = at == std::string::npos || slash == std::string::npos
                        ? std::nullopt
                        : net::parse_host_port(std::string_view(t).substr(at + 1, slash - at - 1));
    auto stand_in = hostport ? stand_in_endpoint(t.substr(0, at), hostport->host, static_cast<uint16_t>(hostport->port),
                                                 t.substr(slash))
                             : std::nullopt;
    if (!stand_in) return util::Error::invalid(fmt::format("--test-token-endpoint {}: not PROVIDER@HOST:PORT/PATH", t));
    st.settings.test_token_endpoints.push_back(std::move(*stand_in));
  }
  if (p) {
    st.settings.extra_hosts = p->credential_hosts();
    st.settings.pass_through = p->credential_pass_through();
    st.logins = p->credential_logins();
  }
  auto minting = minting_refusals(p ? p->credential_allow_minting() : std::vector<policy::Entry>{});
  if (!minting) return minting.take_error();
  st.minting = std::move(*minting);
  st.settings.env_pass = r.env_pass;
  st.logs_in = r.logs_in;
  for (const auto& w : r.write_back)
    if (util::parent_path(w.path) != w.path && w.path.ends_with("/auth.json")) st.agent_dir = util::parent_path(w.path);
  if (st.agent_dir.empty() && !r.private_dirs.empty()) st.agent_dir = r.private_dirs.front().path;

  auto plan = plan_env(r.host_env, st.settings, *st.table);
  if (!plan.errors.empty()) {
    std::string all;
    for (const auto& e : plan.errors) all += (all.empty() ? "" : "\n") + e;
    return util::Error::invalid(all);
  }
  for (auto& kv : r.host_env) {
    const std::string name = kv.substr(0, kv.find('='));
    for (const auto& [n, placeholder] : plan.env)
      if (n == name) kv = name + "=" + placeholder;
  }
  std::erase_if(r.host_env, [&](const std::string& kv) {
    const std::string name = kv.substr(0, kv.find('='));
    return std::find(plan.withheld.begin(), plan.withheld.end(), name) != plan.withheld.end();
  });
  // A variable only an operator's bind names is passed (as its placeholder).
  for (const auto& [n, placeholder] : plan.env)
    if (std::find(r.env_pass.begin(), r.env_pass.end(), n) == r.env_pass.end()) r.env_pass.push_back(n);
  st.provenance = std::move(plan.provenance);
  return rc;
}

pi::SecretFile RunCredentials::auth_file() const {
  auto st = state_;
  return pi::SecretFile{
      "auth.json",
      [st](std::string_view host) { return synthesize_auth(host, st->settings, *st->table, st->provenance); },
      [st](std::string_view jail, std::string_view given_jail) -> util::Result<pi::RevealedSecret> {
        auto r = reveal_auth(jail, given_jail, *st->table);
        if (!r) return r.take_error();
        pi::RevealedSecret out{std::move(r->text), {}};
        for (auto& h : r->held) out.held.push_back({std::move(h.entry), std::move(h.account)});
        return out;
      },
  };
}

std::vector<pi::HeldLogin> RunCredentials::held_logins() const {
  std::vector<pi::HeldLogin> out;
  for (const auto& l : state_->held->list()) out.push_back({l.id, l.tokens.account});
  return out;
}

std::vector<std::string> RunCredentials::settle_logins(pi::Consent c) const {
  const auto logins = state_->held->list();
  if (c == pi::Consent::given) return apply_held(state_->agent_dir, logins);
  std::vector<std::string> out;
  for (const auto& l : logins) out.push_back(pi::refusal_note({l.id, l.tokens.account}, c));
  return out;
}

void RunCredentials::preview_auth() {
  State& st = *state_;
  if (st.agent_dir.empty()) return;
  auto dir = util::open_dir_nofollow(st.agent_dir);
  if (!dir) return;
  auto text = util::read_untrusted_file(dir->get(), "auth.json", size_t{1} << 20, "auth.json");
  if (!text || !*text) return;
  auto jail = synthesize_auth(**text, st.settings, *st.table, st.provenance);
  if (!jail) st.provenance.push_back({"auth.json", "refused", "", {}, jail.error().message()});
}

Intercept RunCredentials::intercept(std::function<void(const std::string&)> warn) const {
  Intercept in;
  in.bindings = state_->table->take_added();
  in.refused = state_->minting;
  state_->exchange = std::make_shared<OAuthExchange>(state_->table, state_->settings, state_->agent_dir,
                                                     std::move(warn), state_->held);
  in.exchange = state_->exchange;
  if (state_->logs_in) {
    auto logins = login_hosts(state_->settings);
    in.login_endpoints = std::move(logins.endpoints);
    in.bound_later = std::move(logins.bound_later);
  }
  return in;
}

std::vector<netproxy::Watched> RunCredentials::watched() const {
  std::vector<netproxy::Watched> out;
  auto add = [&](netproxy::Watched w) {
    for (const auto& o : out)
      if (o.placeholder == w.placeholder) return;
    out.push_back(std::move(w));
  };
  // auth.json secrets by their entry (Pi's provider name), refresh tokens
  // aside: a bind line cannot send one of those to a model server.
  for (const auto& i : state_->table->issued())
    if (i.slot.field != "refresh")
      add({i.placeholder, fmt::format("auth.json {}.{}", i.slot.entry, i.slot.field), i.slot.entry});
  // Variables by their name.
  for (const auto& b : state_->table->snapshot())
    if (b.carriage == Carriage::any_header && !b.name.starts_with("auth.json ")) add({b.placeholder, b.name, b.name});
  return out;
}

std::vector<std::string> RunCredentials::explain_lines() const {
  auto lines = credentials::explain_lines(state_->provenance);  // the free function, not this one
  if (lines.empty()) lines.push_back("(none)");
  for (auto& l : lines) l = util::printable(l);
  return lines;
}

std::vector<std::string> RunCredentials::login_endpoints() const {
  std::vector<std::string> out;
  if (state_->logs_in)
    for (const auto& h : login_hosts(state_->settings).endpoints) out.push_back(net::authority(h.name, h.port));
  return out;
}

void RunCredentials::write_json(util::JsonWriter& j) const {
  j.key("bindings").begin_array();
  for (const auto& p : state_->provenance) {
    j.begin_object();
    j.field("name", p.name);
    j.field("treatment", p.treatment);
    if (!p.prefix.empty()) j.field("prefix", p.prefix);
    j.key("hosts").begin_array();
    for (const auto& h : p.hosts) j.value(h);
    j.end_array();
    j.field("why", p.why);
    j.end_object();
  }
  j.end_array();
}

}  // namespace pj::credentials
