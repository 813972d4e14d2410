#include "sshagent/agent.h"

#include <algorithm>

#include <fmt/format.h>

#include "sshagent/hostkey.h"
#include "sshagent/wire.h"

namespace pj::sshagent {

namespace {

constexpr std::uint8_t kUserauthRequest = 50;  // SSH_MSG_USERAUTH_REQUEST (RFC 4250)
constexpr std::string_view kSessionBind = "session-bind@openssh.com";
constexpr std::string_view kHostBoundMethod = "publickey-hostbound-v00@openssh.com";
// A session id is a hash output (RFC 4253 section 7.2): SHA-512 at most.
constexpr size_t kMaxSessionId = 64;
// A sign request's flags (draft-miller-ssh-agent, section 5.3).
constexpr std::uint32_t kRsaSha2_256 = 2;
constexpr std::uint32_t kRsaSha2_512 = 4;

Judgement refused(std::string why) { return {Action::refuse, std::move(why)}; }

std::string_view message_name(std::uint8_t type) {
  switch (type) {
    case 1: return "list identities (protocol 1)";
    case 3: return "sign (protocol 1)";
    case 7:
    case 17:
    case 25: return "add a key";
    case 8:
    case 18: return "remove a key";
    case 9:
    case 19: return "remove all keys";
    case 20:
    case 26: return "add a smartcard key";
    case 21: return "remove a smartcard key";
    case 22: return "lock the agent";
    case 23: return "unlock the agent";
    default: return "";
  }
}

}  // namespace

std::string frame(std::string_view body) {
  std::string out;
  put_string(out, body);
  return out;
}

FrameLength frame_length(std::string_view buffered) {
  if (buffered.size() < 4) return {};
  WireReader r(buffered.substr(0, 4));
  std::uint32_t n = r.u32();
  if (n == 0 || n > kMaxMessage) return {std::nullopt, true};
  return {n, false};
}

std::optional<std::string_view> login_algorithm(std::string_view data, std::string_view session_id,
                                                std::string_view key_blob, std::string_view host_key) {
  WireReader r(data);
  std::string_view sid = r.string();
  std::uint8_t type = r.byte();
  r.string();  // the user name: the server's business
  std::string_view service = r.string(), method = r.string();
  bool has_signature = r.boolean();
  std::string_view algorithm = r.string();  // rsa-sha2-512 for an ssh-rsa key
  std::string_view key = r.string();
  // OpenSSH's host-bound method also names the server's host key, which
  // must be the one the session was bound to.
  const bool host_bound = method == kHostBoundMethod;
  if (host_bound && r.string() != host_key) return std::nullopt;
  if (r.done() && !session_id.empty() && sid == session_id && type == kUserauthRequest && service == "ssh-connection" &&
      (method == "publickey" || host_bound) && has_signature && key == key_blob)
    return algorithm;
  return std::nullopt;
}

bool flags_match(std::uint32_t flags, std::string_view algorithm, std::string_view key_type) {
  // ssh-rsa, and its certificate ssh-rsa-cert-v01@openssh.com.
  const bool rsa = key_type.starts_with("ssh-rsa");
  if (algorithm.starts_with("rsa-sha2-256")) return rsa && flags == kRsaSha2_256;
  if (algorithm.starts_with("rsa-sha2-512")) return rsa && flags == kRsaSha2_512;
  return flags == 0;
}

bool Session::allowed_host_key(std::string_view blob) const {
  return std::find(host_keys_.begin(), host_keys_.end(), blob) != host_keys_.end();
}

Judgement Session::judge(std::string_view body) {
  if (body.empty()) return refused("an empty message");
  const auto type = static_cast<std::uint8_t>(body.front());
  std::string_view rest = body.substr(1);
  switch (type) {
    case kRequestIdentities:
      if (!rest.empty()) return refused("a malformed identity listing");
      return {Action::forward, {}};
    case kSignRequest: return sign(rest);
    case kExtension: {
      WireReader r(rest);
      std::string_view name = r.string();
      if (!r.ok()) return refused("a malformed extension request");
      if (name != kSessionBind) return refused(fmt::format("the agent extension \"{}\"", name.substr(0, 80)));
      return bind(rest);
    }
    default: {
      std::string_view what = message_name(type);
      return refused(what.empty() ? fmt::format("agent message type {}", type) : std::string(what));
    }
  }
}

// session-bind@openssh.com: string hostkey, string session id, string
// the host's signature over the session id, bool is_forwarding.
Judgement Session::bind(std::string_view rest) {
  WireReader r(rest);
  r.string();  // the extension's name
  std::string_view host_key = r.string(), sid = r.string(), signature = r.string();
  bool forwarding = r.boolean();
  auto refuse = [this](std::string why) {
    spoiled_ = true;
    return refused(std::move(why));
  };
  if (!r.done() || sid.empty() || sid.size() > kMaxSessionId) return refuse("a malformed session bind");
  if (forwarding) return refuse("a session bind for a forwarded agent (agent forwarding is not allowed)");
  if (binds_ >= kMaxBinds) return refuse(fmt::format("more than {} session binds on one connection", kMaxBinds));
  if (!allowed_host_key(host_key)) {
    std::string type = key_type(host_key);
    return refuse(
        fmt::format("a session bind to a host key ({}) of no allowed host", type.empty() ? "unknown type" : type));
  }
  if (!verify_signature(host_key, sid, signature)) return refuse("a session bind whose host signature does not verify");
  ++binds_;
  bound_.assign(sid);
  bound_host_key_.assign(host_key);
  return {Action::forward_then_success, {}};
}

// string key blob, string data, uint32 flags.
Judgement Session::sign(std::string_view rest) {
  WireReader r(rest);
  std::string_view key = r.string(), data = r.string();
  const std::uint32_t flags = r.u32();
  if (!r.done()) return refused("a malformed sign request");
  if (spoiled_) return refused("a sign request on a connection whose session bind was refused");
  if (bound_.empty()) return refused("a sign request on a connection not bound to an allowed host's session");
  auto algorithm = login_algorithm(data, bound_, key, bound_host_key_);
  if (!algorithm)
    return refused("a sign request for data that is not a login (user authentication) to the bound session");
  // The agent picks the signature's hash from the flags alone: it must be
  // the one the login names (the algorithm is the jail's text: not shown).
  if (!flags_match(flags, *algorithm, key_type(key)))
    return refused(
        fmt::format("a sign request whose flags ({:#x}) ask for another signature than its login names", flags));
  return {Action::forward, {}};
}

}  // namespace pj::sshagent
