// The SSH agent proxy's judge (sshagent/agent.h), the host-key signature
// check, the known_hosts reader, and the policy's `[network] ssh`.
#include <doctest/doctest.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <memory>
#include <string>

#include "netproxy/http1.h"
#include "policy/layer.h"
#include "policy/policy.h"
#include "sshagent/jail_config.h"
#include "sshagent/agent.h"
#include "sshagent/hostkey.h"
#include "sshagent/known_hosts.h"
#include "sshagent/wire.h"

using namespace pj::sshagent;

namespace {

struct Ed25519 {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, EVP_PKEY_free};
  Ed25519() {
    EVP_PKEY* k = nullptr;
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
    REQUIRE(ctx);
    REQUIRE(EVP_PKEY_keygen_init(ctx) == 1);
    REQUIRE(EVP_PKEY_keygen(ctx, &k) == 1);
    EVP_PKEY_CTX_free(ctx);
    key.reset(k);
  }
  std::string blob() const {
    unsigned char pk[32];
    size_t n = sizeof pk;
    REQUIRE(EVP_PKEY_get_raw_public_key(key.get(), pk, &n) == 1);
    std::string out;
    put_string(out, "ssh-ed25519");
    put_string(out, std::string_view(reinterpret_cast<char*>(pk), n));
    return out;
  }
  std::string sign(std::string_view data) const {
    unsigned char sig[64];
    size_t n = sizeof sig;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    REQUIRE(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1);
    REQUIRE(EVP_DigestSign(ctx, sig, &n, reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1);
    EVP_MD_CTX_free(ctx);
    std::string out;
    put_string(out, "ssh-ed25519");
    put_string(out, std::string_view(reinterpret_cast<char*>(sig), n));
    return out;
  }
};

std::string bind_msg(std::string_view host_key, std::string_view sid, std::string_view sig, bool forwarding) {
  std::string m(1, static_cast<char>(kExtension));
  put_string(m, "session-bind@openssh.com");
  put_string(m, host_key);
  put_string(m, sid);
  put_string(m, sig);
  m += static_cast<char>(forwarding ? 1 : 0);
  return m;
}

std::string userauth(std::string_view sid, std::string_view key, std::string_view method = "publickey",
                     std::string_view algorithm = "ssh-ed25519") {
  std::string d;
  put_string(d, sid);
  d += static_cast<char>(50);
  put_string(d, "git");
  put_string(d, "ssh-connection");
  put_string(d, method);
  d += static_cast<char>(1);
  put_string(d, algorithm);
  put_string(d, key);
  return d;
}

std::string sign_msg(std::string_view key, std::string_view data, std::uint32_t flags = 0) {
  std::string m(1, static_cast<char>(kSignRequest));
  put_string(m, key);
  put_string(m, data);
  put_u32(m, flags);
  return m;
}

}  // namespace

TEST_CASE("the agent judge lists identities, and signs a login only for a session bound to an allowed host") {
  Ed25519 host, user;
  const std::string sid(32, '\x42');
  Session s({host.blob()});
  CHECK(s.judge(std::string(1, static_cast<char>(kRequestIdentities))).action == Action::forward);
  // Before any bind: refused.
  auto unbound = s.judge(sign_msg(user.blob(), userauth(sid, user.blob())));
  CHECK(unbound.action == Action::refuse);
  CHECK(unbound.refusal.find("not bound") != std::string::npos);
  // The host's own signature over the session id binds it.
  CHECK(s.judge(bind_msg(host.blob(), sid, host.sign(sid), false)).action == Action::forward_then_success);
  CHECK(s.judge(sign_msg(user.blob(), userauth(sid, user.blob()))).action == Action::forward);
  // Another session's id, another method, another key, arbitrary data: refused.
  CHECK(s.judge(sign_msg(user.blob(), userauth(std::string(32, 'x'), user.blob()))).action == Action::refuse);
  CHECK(s.judge(sign_msg(user.blob(), userauth(sid, user.blob(), "hostbased"))).action == Action::refuse);
  CHECK(s.judge(sign_msg(user.blob(), userauth(sid, host.blob()))).action == Action::refuse);
  CHECK(s.judge(sign_msg(user.blob(), "a git commit to sign")).action == Action::refuse);
}

TEST_CASE("the agent judge signs only with the flags the login's algorithm asks for") {
  Ed25519 host, user;
  const std::string sid(32, '\x42');
  Session s({host.blob()});
  REQUIRE(s.judge(bind_msg(host.blob(), sid, host.sign(sid), false)).action == Action::forward_then_success);
  // An Ed25519 key has no choice of hash: any flag is refused.
  CHECK(s.judge(sign_msg(user.blob(), userauth(sid, user.blob()), 0)).action == Action::forward);
  for (std::uint32_t flags : {1U, 2U, 4U, 6U, 0x80000000U}) {
    auto j = s.judge(sign_msg(user.blob(), userauth(sid, user.blob()), flags));
    CHECK_MESSAGE(j.action == Action::refuse, flags);
    CHECK(j.refusal.find("flags") != std::string::npos);
  }
  // An RSA key (only its type is read here): the flags pick the hash the
  // login names, and nothing else.
  std::string rsa;
  put_string(rsa, "ssh-rsa");
  put_string(rsa, std::string(3, '\x01'));
  put_string(rsa, std::string(257, '\x7f'));
  auto judged = [&](std::string_view algorithm, std::uint32_t flags) {
    return s.judge(sign_msg(rsa, userauth(sid, rsa, "publickey", algorithm), flags)).action;
  };
  CHECK(judged("rsa-sha2-512", 4) == Action::forward);
  CHECK(judged("rsa-sha2-256", 2) == Action::forward);
  CHECK(judged("ssh-rsa", 0) == Action::forward);
  CHECK(judged("rsa-sha2-512", 2) == Action::refuse);
  CHECK(judged("rsa-sha2-512", 0) == Action::refuse);
  CHECK(judged("rsa-sha2-512", 6) == Action::refuse);
  CHECK(judged("rsa-sha2-256", 4) == Action::refuse);
  CHECK(judged("ssh-rsa", 4) == Action::refuse);
  // RSA's flags for a key of another type, even when the login names them.
  CHECK(s.judge(sign_msg(user.blob(), userauth(sid, user.blob(), "publickey", "rsa-sha2-512"), 4)).action ==
        Action::refuse);
}

TEST_CASE("the agent judge refuses a bind to another host's key, a bad signature and a forwarding bind") {
  Ed25519 allowed, other;
  const std::string sid(32, '\x07');
  SUBCASE("a key of no allowed host") {
    Session s({allowed.blob()});
    auto j = s.judge(bind_msg(other.blob(), sid, other.sign(sid), false));
    CHECK(j.action == Action::refuse);
    CHECK(j.refusal.find("no allowed host") != std::string::npos);
  }
  SUBCASE("a signature by another key") {
    Session s({allowed.blob()});
    CHECK(s.judge(bind_msg(allowed.blob(), sid, other.sign(sid), false)).action == Action::refuse);
  }
  SUBCASE("a forwarding bind, after which nothing is signed on the connection") {
    Session s({allowed.blob()});
    CHECK(s.judge(bind_msg(allowed.blob(), sid, allowed.sign(sid), false)).action == Action::forward_then_success);
    auto j = s.judge(bind_msg(allowed.blob(), sid, allowed.sign(sid), true));
    CHECK(j.action == Action::refuse);
    CHECK(j.refusal.find("forward") != std::string::npos);
    CHECK(s.judge(sign_msg(other.blob(), userauth(sid, other.blob()))).action == Action::refuse);
  }
}

TEST_CASE("the agent judge refuses adding, removing and locking keys, other extensions and malformed messages") {
  Session s({});
  for (int type : {7, 8, 9, 17, 18, 19, 20, 21, 22, 23, 25, 26, 1, 3, 200})
    CHECK_MESSAGE(s.judge(std::string(1, static_cast<char>(type)) + "xx").action == Action::refuse, type);
  std::string ext(1, static_cast<char>(kExtension));
  put_string(ext, "query");
  CHECK(s.judge(ext).refusal.find("\"query\"") != std::string::npos);
  CHECK(s.judge("").action == Action::refuse);
  CHECK(s.judge(std::string(1, static_cast<char>(kRequestIdentities)) + "x").action == Action::refuse);
  std::string truncated(1, static_cast<char>(kSignRequest));
  put_u32(truncated, 1000);
  CHECK(s.judge(truncated).action == Action::refuse);
}

TEST_CASE("an agent message's length is bounded before anything is read") {
  CHECK_FALSE(frame_length("\0\0\0").body);
  CHECK(frame_length(std::string("\0\0\0\0", 4)).bad);
  std::string big;
  put_u32(big, kMaxMessage + 1);
  CHECK(frame_length(big).bad);
  std::string ok;
  put_u32(ok, kMaxMessage);
  CHECK(frame_length(ok).body == kMaxMessage);
}

TEST_CASE("known_hosts gives a host's plain and hashed keys, not revoked or another host's") {
  Ed25519 a, b, c;
  auto b64 = [](const std::string& blob) { return pj::netproxy::http1::base64_encode(blob); };
  const std::string salt(20, 's');
  unsigned char mac[20];
  unsigned int len = 0;
  const std::string name = "[git.example]:2222";
  HMAC(EVP_sha1(), salt.data(), 20, reinterpret_cast<const unsigned char*>(name.data()), name.size(), mac, &len);
  const std::string hashed = "|1|" + b64(salt) + "|" + b64(std::string(reinterpret_cast<char*>(mac), 20));
  const std::string text =
      "# comment\n"
      "git.example,other ssh-ed25519 " +
      b64(a.blob()) + " user@host\n" + hashed + " ssh-ed25519 " + b64(b.blob()) + "\n" +
      "*.example,!git.example ssh-ed25519 " + b64(c.blob()) + "\n" + "@revoked * ssh-ed25519 " + b64(c.blob()) + "\n" +
      "git.example ssh-rsa " + b64(a.blob()) + "\n";  // the blob's type is not the one written
  auto on22 = find_host_keys(text, "GIT.example", 22);
  REQUIRE(on22.size() == 1);
  CHECK(on22[0].blob == a.blob());
  auto on2222 = find_host_keys(text, "git.example", 2222);
  REQUIRE(on2222.size() == 1);
  CHECK(on2222[0].blob == b.blob());
  CHECK(find_host_keys(text, "www.example", 22).empty());  // matched, then revoked
  CHECK(known_hosts_text("git.example", on22) == "git.example ssh-ed25519 " + b64(a.blob()) + "\n");
}

TEST_CASE("a host missing from known_hosts stops the run, saying how to add it") {
  std::vector<std::string> blobs;
  auto r = pj::sshagent::jail_known_hosts("", "/home/u/.ssh/known_hosts", {{"git.example", 2222, 2201, "--allow-ssh"}},
                                          blobs);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("ssh-keyscan -p 2222 git.example >> /home/u/.ssh/known_hosts") != std::string::npos);
}

TEST_CASE("the jail's ssh config maps each allowed host and refuses the others with the option's name") {
  auto text = pj::sshagent::jail_config_text({{"git.example", 22, 2201, "--allow-ssh"}});
  CHECK(text.find("Host git.example\n  HostName 127.0.0.1\n  Port 2201\n  HostKeyAlias git.example\n") !=
        std::string::npos);
  CHECK(text.find("StrictHostKeyChecking yes") != std::string::npos);
  CHECK(text.find("--allow-ssh %h") != std::string::npos);
}

TEST_CASE("[network] ssh is an operator's: a project's entry is refused at its line") {
  using namespace pj::policy;
  auto user = load_layer("[network]\nssh = [\"git.example\", \"[::1]:2222\"]\n", "user.toml", Authority::user);
  REQUIRE(user.errors.empty());
  CHECK(user.layer.ssh.size() == 2);
  CHECK(user.layer.ssh[0].text == "git.example:22");
  auto project = load_layer("[network]\nssh = [\"evil.example\"]\n", ".pi/jail.toml", Authority::project);
  REQUIRE(project.errors.empty());
  Context ctx{"/w", "/h", "/w", {}, [](const std::string& p) { return std::optional<std::string>(p); }, std::nullopt};
  auto r = resolve({user.layer, project.layer}, ctx);
  REQUIRE(r.policy);
  CHECK(r.policy->ssh_hosts().size() == 2);
  REQUIRE(r.refused.size() == 1);
  CHECK(r.refused[0].str().find(".pi/jail.toml:2:8") != std::string::npos);
  CHECK(r.refused[0].str().find("operators") != std::string::npos);
  auto wildcard = load_layer("[network]\nssh = [\"*.example\"]\n", "user.toml", Authority::user);
  REQUIRE(wildcard.errors.size() == 1);
  CHECK(wildcard.errors[0].str().find("user.toml:2:8") != std::string::npos);
}

TEST_CASE("OpenSSH's host-bound login is signed only when it names the bound host's key") {
  Ed25519 host, other, user;
  const std::string sid(32, '\x11');
  auto hostbound = [&](const std::string& named) {
    std::string d;
    put_string(d, sid);
    d += static_cast<char>(50);
    put_string(d, "git");
    put_string(d, "ssh-connection");
    put_string(d, "publickey-hostbound-v00@openssh.com");
    d += static_cast<char>(1);
    put_string(d, "ssh-ed25519");
    put_string(d, user.blob());
    put_string(d, named);
    return d;
  };
  Session s({host.blob(), other.blob()});
  REQUIRE(s.judge(bind_msg(host.blob(), sid, host.sign(sid), false)).action == Action::forward_then_success);
  CHECK(s.judge(sign_msg(user.blob(), hostbound(host.blob()))).action == Action::forward);
  CHECK(s.judge(sign_msg(user.blob(), hostbound(other.blob()))).action == Action::refuse);
}
