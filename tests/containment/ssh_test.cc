// Git over SSH to allowed hosts only (--allow-ssh), in real jails against
// a real sshd of the test's own on the host's loopback (its own config,
// host key and authorized_keys) and an ssh-agent of the test's own: git
// clone and push work to the allowed host; the same agent, through
// pi-jail's proxy, signs for no other host and for no unbound session;
// the user's agent socket is out of the jail's reach.
#include <doctest/doctest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

using namespace pj::test;

namespace {

int free_port() {
  int port = 0;
  int fd = loopback_socket(SOCK_STREAM, port);
  ::close(fd);
  return port;
}

std::string user_name() {
  const passwd* pw = ::getpwuid(::getuid());
  return pw ? pw->pw_name : "root";
}

// "TYPE BASE64" of a .pub file.
std::string public_key(const std::string& pub) {
  std::string text = trim(read_file(pub));
  auto second_space = text.find(' ', text.find(' ') + 1);
  return text.substr(0, second_space);
}

// A real sshd on 127.0.0.1:port with a host key of its own, letting in
// the holder of `user_pub`. As root, sshd needs its privilege separation
// directory; as anyone else it runs without one (and can log in only
// its own user, whose shell runs the remote command, through PAM).
struct Sshd {
  std::string dir;
  int port = free_port();
  pid_t pid = -1;
  Sshd(const std::string& at, const std::string& user_pub) : dir(at) {
    std::filesystem::create_directories(dir);
    REQUIRE(run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir + "/host_key"}).status == 0);
    write_file(dir + "/authorized_keys", read_file(user_pub));
    write_file(dir + "/sshd_config", "Port " + std::to_string(port) + "\nListenAddress 127.0.0.1\nHostKey " + dir +
                                         "/host_key\n"
                                         "AuthorizedKeysFile " +
                                         dir + "/authorized_keys\nPidFile " + dir +
                                         "/pid\n"
                                         "StrictModes no\nPasswordAuthentication no\n"
                                         // Without PAM, sshd takes nobody's "*" password for a locked
                                         // account; as root PAM would need a login session.
                                         "UsePAM " +
                                         std::string(::getuid() == 0 ? "no" : "yes") +
                                         "\n"
                                         "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                                         "LogLevel VERBOSE\n");
    if (::getuid() == 0) ::mkdir("/run/sshd", 0755);
    pid = spawn({"/bin/sh", "-c", "exec /usr/sbin/sshd -D -e -f \"$0/sshd_config\" 2>\"$0/log\"", dir});
    REQUIRE(eventually([&] { return read_file(dir + "/log").find("Server listening") != std::string::npos; }));
  }
  ~Sshd() {
    ::kill(pid, SIGTERM);
    wait_status(pid);
  }
  std::string host_key() const { return public_key(dir + "/host_key.pub"); }
};

// The user's ssh-agent, holding the user's key (of `type`).
struct Agent {
  std::string sock, key;
  pid_t pid = -1;
  explicit Agent(const Sandbox& sb, const std::string& type = "ed25519")
      : sock(sb.outside + "/agent.sock"), key(sb.outside + "/id_" + type) {
    pid = spawn({"/bin/sh", "-c", "exec /usr/bin/ssh-agent -D -a \"$0\" >/dev/null", sock});
    REQUIRE(eventually([&] { return exists(sock); }));
    REQUIRE(run({"/usr/bin/ssh-keygen", "-q", "-t", type, "-N", "", "-C", "pj-ssh-key", "-f", key}).status == 0);
    REQUIRE(run({"/usr/bin/ssh-add", "-q", key}, {"SSH_AUTH_SOCK=" + sock}).status == 0);
  }
  ~Agent() {
    ::kill(pid, SIGTERM);
    wait_status(pid);
  }
};

// pi-jail -w ws --allow-ssh git.test (routed to `sshd`) [extra...] -- sh -c script
Outcome jail_ssh(const Sandbox& sb, const Agent& agent, const Sshd& sshd, const std::string& script,
                 const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{"/usr/bin/env",
                                "-C",
                                sb.ws,
                                pi_jail(),
                                "-w",
                                sb.ws,
                                "--allow-ssh",
                                "git.test",
                                "--test-resolve",
                                "git.test:22=127.0.0.1:" + std::to_string(sshd.port)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (std::string a : {"--", "/bin/sh", "-c"}) argv.push_back(a);
  argv.push_back(script);
  return run(argv, {"HOME=" + sb.home, "SSH_AUTH_SOCK=" + agent.sock}, std::chrono::seconds(60));
}

void trust(const Sandbox& sb, const std::string& name, const Sshd& sshd) {
  std::filesystem::create_directories(sb.home + "/.ssh");
  write_file(sb.home + "/.ssh/known_hosts", name + " " + sshd.host_key() + "\n");
}

// A bare repository outside the workspace with one commit on main.
std::string bare_repo(const Sandbox& sb) {
  const std::string repo = sb.outside + "/repo.git", seed = sb.outside + "/seed";
  const std::vector<std::string> env{"HOME=" + sb.home, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
                                     "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"};
  REQUIRE(run({"/usr/bin/git", "init", "-q", "--bare", "-b", "main", repo}, env).status == 0);
  REQUIRE(run({"/usr/bin/git", "init", "-q", "-b", "main", seed}, env).status == 0);
  write_file(seed + "/README", "seed\n");
  REQUIRE(run({"/usr/bin/git", "-C", seed, "add", "README"}, env).status == 0);
  REQUIRE(run({"/usr/bin/git", "-C", seed, "commit", "-q", "-m", "seed"}, env).status == 0);
  REQUIRE(run({"/usr/bin/git", "-C", seed, "push", "-q", repo, "main"}, env).status == 0);
  return repo;
}

// A python3 client of $SSH_AUTH_SOCK inside the jail: lists the keys,
// then asks for a signature of a login request on a connection it never
// bound, and for adding a key; prints each answer's type.
const char* kCraftedClient = R"(
import os, socket, struct
def s(b): return struct.pack('>I', len(b)) + b
def ask(c, body):
    c.sendall(s(body))
    n = struct.unpack('>I', c.recv(4))[0]
    data = b''
    while len(data) < n: data += c.recv(n - len(data))
    return data
c = socket.socket(socket.AF_UNIX); c.connect(os.environ['SSH_AUTH_SOCK'])
ids = ask(c, b'\x0b')
print('identities', ids[0], struct.unpack('>I', ids[1:5])[0])
key = ids[9:9 + struct.unpack('>I', ids[5:9])[0]]
login = s(b'\x42' * 32) + b'\x32' + s(b'git') + s(b'ssh-connection') + s(b'publickey') + b'\x01' + s(b'ssh-ed25519') + s(key)
print('unbound sign', ask(c, b'\x0d' + s(key) + s(login) + b'\0\0\0\0')[0])
print('add key', ask(c, b'\x11' + s(b'ssh-ed25519'))[0])
)";

}  // namespace

TEST_CASE("git clone and push over SSH reach an allowed host, checked by its key and signed by the user's agent") {
  Sandbox sb;
  Agent agent(sb);
  Sshd sshd(sb.outside + "/sshd", agent.key + ".pub");
  trust(sb, "git.test", sshd);
  const std::string repo = bare_repo(sb);
  const std::string url = user_name() + "@git.test:" + repo;
  if (::getuid() != 0) {
    // sshd as an ordinary user logs in only that user, and runs the
    // remote command with the user's shell: nobody's is nologin. The
    // login itself, signed through pi-jail's proxy, is what shows here.
    auto o = jail_ssh(sb, agent, sshd, "ssh -v " + url.substr(0, url.find(':')) + " true 2>&1; echo rc=$?");
    CAPTURE(o.out);
    CAPTURE(o.err);
    // ssh names the address it dialled: the jail's listener for git.test.
    CHECK(o.out.find("Authenticated to 127.0.0.1 ([127.0.0.1]:2201) using \"publickey\"") != std::string::npos);
    return;
  }
  auto o = jail_ssh(sb, agent, sshd,
                    "git clone -q " + url +
                        " clone && cd clone && echo from-jail > pushed && git add pushed && "
                        "git -c user.name=j -c user.email=j@j commit -q -m from-jail && git push -q origin main && "
                        "echo pushed; ssh-add -l");
  CAPTURE(o.err);
  CHECK(o.status == 0);
  CHECK(o.out.find("pushed\n") != std::string::npos);
  CHECK(o.out.find("pj-ssh-key (ED25519)") != std::string::npos);  // listed through the proxy
  auto log = run({"/usr/bin/git", "--git-dir", repo, "log", "--format=%s", "main"});
  CHECK(log.out == "from-jail\nseed\n");
  CHECK(o.err.find("ssh agent: refused") == std::string::npos);
}

TEST_CASE("an RSA key logs in through the agent proxy: the SHA-2 flags its login names pass") {
  Sandbox sb;
  Agent agent(sb, "rsa");
  Sshd sshd(sb.outside + "/sshd", agent.key + ".pub");
  trust(sb, "git.test", sshd);
  auto o = jail_ssh(sb, agent, sshd, "ssh -v " + user_name() + "@git.test true 2>&1; echo rc=$?");
  CAPTURE(o.out);
  CAPTURE(o.err);
  CHECK(o.out.find("Authenticated to 127.0.0.1 ([127.0.0.1]:2201) using \"publickey\"") != std::string::npos);
  CHECK(o.out.find("rsa-sha2-") != std::string::npos);  // ssh -v names the algorithm it offered
  CHECK(o.err.find("ssh agent: refused") == std::string::npos);
}

TEST_CASE("the agent proxy refuses to sign for an unallowed sshd and for an unbound session, and says so") {
  Sandbox sb;
  Agent agent(sb);
  Sshd allowed(sb.outside + "/sshd", agent.key + ".pub");
  Sshd other(sb.outside + "/other", agent.key + ".pub");
  trust(sb, "git.test", allowed);
  write_file(sb.ws + "/client.py", kCraftedClient);
  // The other sshd is reachable (a loopback rule) but not an SSH host of
  // the policy: the login reaches it, the agent proxy will not sign it.
  const std::string port = std::to_string(other.port);
  const std::string report = sb.outside + "/r.json";
  auto o = jail_ssh(sb, agent, allowed,
                    "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                    "-p " +
                        port + " " + user_name() + "@127.0.0.1 true; echo other-rc=$?; python3 client.py",
                    {"--allow-net", "127.0.0.1:" + port, "--report", report});
  CAPTURE(o.err);
  CHECK(o.out.find("other-rc=255") != std::string::npos);
  CHECK(o.err.find("Permission denied (publickey)") != std::string::npos);
  CHECK(o.out.find("identities 12 1\n") != std::string::npos);
  CHECK(o.out.find("unbound sign 5\n") != std::string::npos);
  CHECK(o.out.find("add key 5\n") != std::string::npos);
  CHECK(o.err.find("ssh agent: refused a session bind to a host key (ssh-ed25519) of no allowed host") !=
        std::string::npos);
  CHECK(o.err.find("ssh agent: refused a sign request on a connection not bound") != std::string::npos);
  CHECK(o.err.find("ssh agent: refused add a key") != std::string::npos);
  CHECK(read_file(report).find("\"ssh_agent_refusals\": [") != std::string::npos);
  CHECK(validate_report(report).status == 0);
}

TEST_CASE("the jail cannot reach the user's agent socket, and ssh to a host not allowed names --allow-ssh") {
  Sandbox sb;
  Agent agent(sb);
  Sshd sshd(sb.outside + "/sshd", agent.key + ".pub");
  trust(sb, "git.test", sshd);
  auto o = jail_ssh(sb, agent, sshd,
                    "test -e " + agent.sock + " && echo visible; SSH_AUTH_SOCK=" + agent.sock +
                        " ssh-add -l; echo direct-rc=$?; echo \"sock=$SSH_AUTH_SOCK\"; "
                        "git ls-remote other.test:/repo.git; echo other-rc=$?");
  CAPTURE(o.err);
  CHECK(o.out.find("visible") == std::string::npos);
  CHECK(o.out.find("direct-rc=2") != std::string::npos);
  CHECK(o.out.find("sock=/run/pi-jail/ssh/agent\n") != std::string::npos);
  CHECK(o.out.find("other-rc=128") != std::string::npos);
  CHECK(o.err.find("pi-jail: ssh to other.test is not allowed in this jail; to allow it, run pi-jail with "
                   "--allow-ssh other.test") != std::string::npos);
}

TEST_CASE("an allowed SSH host missing from known_hosts stops the run before it starts, saying how to add it") {
  Sandbox sb;
  Agent agent(sb);
  Sshd sshd(sb.outside + "/sshd", agent.key + ".pub");
  auto o = jail_ssh(sb, agent, sshd, "echo ran");
  CHECK(o.status == 125);
  CHECK(o.out.find("ran") == std::string::npos);
  CHECK(o.err.find("ssh-keyscan git.test >> " + sb.home + "/.ssh/known_hosts") != std::string::npos);
}
