// One real Pi's world for end-to-end tests: a sandbox (harness.h), a
// scripted model server (model_server.py) and Pi's agent dir, and ways to
// run Pi in it, jailed or directly on the host.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "stand_in.h"

namespace pj::test {

// The value of environment variable `name`; throws (the test fails, naming
// it) when it is unset or empty.
std::string need_env(const char* name);

// The Pi installations the agent-dir tests run against: {"Pi 1.4.0
// (pinned, ...)", prefix} from PJ_PI_PREFIX and {"Pi X.Y.Z (newest, ...)",
// prefix} from PJ_PI_NEWEST_PREFIX (tests/e2e/install-pi: the newest on
// npm at test time). Throws when either is unset,
// so that no version is skipped silently.
std::vector<std::pair<std::string, std::string>> pi_versions();

// The version of the Pi installed in `prefix` (its package.json), "?"
// when unreadable.
std::string pi_version_in(const std::string& prefix);

class PiWorld {
public:
  // `prefix`: where Pi and its Node are installed (default PJ_PI_PREFIX).
  explicit PiWorld(const std::string& script, const std::string& prefix = "");
  ~PiWorld();
  PiWorld(const PiWorld&) = delete;
  PiWorld& operator=(const PiWorld&) = delete;

  std::vector<std::string> env() const;
  // Replace the model's script (read again for every request).
  void script(const std::string& steps) const;

  // pi-jail [jail_opts] -- pi -p ... --model `model` [pi_opts] "go"
  // (stdin /dev/null)
  Outcome pi(const std::vector<std::string>& jail_opts = {}, const std::vector<std::string>& pi_opts = {},
             const std::string& model = "m") const;
  // The same Pi, same HOME and agent dir, with no jail.
  Outcome pi_unjailed(const std::vector<std::string>& pi_opts = {}, const std::string& model = "m") const;
  // The argv of pi(): to start it in the background with spawn().
  std::vector<std::string> pi_argv(const std::vector<std::string>& jail_opts = {},
                                   const std::vector<std::string>& pi_opts = {}, const std::string& model = "m") const;

  // The tool results the model received, in order (the last request of
  // `model` holds the whole conversation).
  std::vector<std::string> tool_results(const std::string& model = "m") const;
  // The system prompt of the last request of `model`, as the JSON text the
  // server logged (a string or a list of parts); empty when there is none.
  std::string system_prompt(const std::string& model = "m") const;

  Sandbox sb;
  std::string agent;
  std::string port;
  std::vector<std::string> jail{pi_jail()};  // the supervisor, with its own options

private:
  std::string last_request(const std::string& model) const;
  std::vector<std::string> pi_words(const std::vector<std::string>& pi_opts, const std::string& model) const;

  std::string prefix_;
  std::string log_;
  pid_t server_ = -1;
};

// A second model_server.py, over HTTPS with `certs`' certificate, serving
// the world's script (PiWorld::script): a model server whose CA only the
// filter trusts. Its files are name.{port,jsonl} in the world's base;
// stopped (SIGTERM) by stop() or with the object.
class TlsModelServer {
public:
  TlsModelServer(const PiWorld& w, const TestCerts& certs, const std::string& name);
  ~TlsModelServer() { stop(); }
  TlsModelServer(const TlsModelServer&) = delete;
  TlsModelServer& operator=(const TlsModelServer&) = delete;
  void stop();
  // The requests it logged so far; "" before the first.
  std::string log() const;

  std::string port;

private:
  std::string log_;
  pid_t pid_ = -1;
};

// `s` as a JSON string literal.
std::string json_str(const std::string& s);
// A script step: a call of Pi's tool `name` with JSON `args`.
std::string tool(const std::string& name, const std::string& args);
// A script step: Pi's bash tool runs `command`.
std::string bash(const std::string& command);

}  // namespace pj::test
