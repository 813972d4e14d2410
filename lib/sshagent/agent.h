// The SSH agent protocol (draft-ietf-sshm-ssh-agent, and OpenSSH's
// PROTOCOL.agent for session-bind@openssh.com) as pi-jail's agent proxy
// judges it: what a client in the jail may ask of the user's agent.
//
// The jail may list identities, and have a request signed only when
// - the connection was first bound with session-bind@openssh.com to a
//   host key of an allowed host, the host's signature over the session id
//   checked here, and not for a forwarded agent;
// - the data to sign is an SSH user-authentication request
//   (SSH_MSG_USERAUTH_REQUEST, service ssh-connection, method publickey,
//   or OpenSSH's publickey-hostbound-v00@openssh.com naming the bound host
//   key, with a signature) for that bound session's id, for the key asked
//   to sign.
// Everything else (adding, removing or locking keys, other extensions,
// arbitrary data, an unbound session) is refused with SSH_AGENT_FAILURE
// and its reason recorded. Messages are bounded (kMaxMessage); a longer
// length prefix ends the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pj::sshagent {

// A message (its type byte and contents, without the length prefix) is
// at most this long, either way.
inline constexpr size_t kMaxMessage = 256 * 1024;
// Session binds one connection may make (OpenSSH's agent keeps 16).
inline constexpr size_t kMaxBinds = 16;

enum MessageType : std::uint8_t {
  kAgentFailure = 5,
  kAgentSuccess = 6,
  kRequestIdentities = 11,
  kIdentitiesAnswer = 12,
  kSignRequest = 13,
  kSignResponse = 14,
  kExtension = 27,
};

// A whole message on the wire: the length prefix, then `body`.
std::string frame(std::string_view body);
// The length a buffer's first four bytes announce: nullopt while fewer
// than four bytes are there; 0 or past kMaxMessage is `too_long`.
struct FrameLength {
  std::optional<size_t> body;  // the body's length, when known and allowed
  bool bad = false;            // 0, or past kMaxMessage: end the connection
};
FrameLength frame_length(std::string_view buffered);

// What the proxy does with one message from the jail.
enum class Action {
  forward,               // pass it to the user's agent, its answer back
  forward_then_success,  // pass it on (the agent may keep the bind too), answer success whatever it says
  refuse,                // answer SSH_AGENT_FAILURE; `refusal` says why
};
struct Judgement {
  Action action = Action::refuse;
  std::string refusal;  // the jail's request as text: escape before showing
};

// One connection from the jail.
class Session {
public:
  // The public key blobs of the allowed hosts' keys (from known_hosts).
  explicit Session(std::vector<std::string> host_keys) : host_keys_(std::move(host_keys)) {}
  Judgement judge(std::string_view body);
  // The last session id bound (empty: none).
  const std::string& bound_session() const { return bound_; }

private:
  Judgement bind(std::string_view rest);
  Judgement sign(std::string_view rest);
  bool allowed_host_key(std::string_view blob) const;

  std::vector<std::string> host_keys_;
  std::string bound_, bound_host_key_;
  size_t binds_ = 0;
  bool spoiled_ = false;  // a bind was refused: nothing is signed on this connection
};

// When `data` is the user-authentication request OpenSSH signs with
// `key_blob` in the session `session_id` (RFC 4252 section 7), bound to
// the server's `host_key` (for the host-bound method): the signature
// algorithm it names (a view into `data`); otherwise nothing.
std::optional<std::string_view> login_algorithm(std::string_view data, std::string_view session_id,
                                                std::string_view key_blob, std::string_view host_key);

// Whether a sign request's `flags` ask the agent for the signature
// `algorithm` names, made with a key of `key_type`: only an RSA key has
// a choice of hash, which the flags make (SSH_AGENT_RSA_SHA2_256 or
// _512); every other key, and RSA's SHA-1 "ssh-rsa", takes none.
bool flags_match(std::uint32_t flags, std::string_view algorithm, std::string_view key_type);

}  // namespace pj::sshagent
