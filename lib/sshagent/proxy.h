// The proxy between the jail's SSH_AUTH_SOCK and the user's agent: one
// thread of the supervisor (started after the jail is cloned), at most
// kMaxClients connections, each judged by its own Session (agent.h). It
// asks the user's agent ($SSH_AUTH_SOCK outside) only what a Session
// allows; the user's agent socket never enters the jail.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::sshagent {

class AgentProxy {
public:
  static constexpr size_t kMaxClients = 16;
  // `listener`: a listening unix socket; `upstream`: the user's agent
  // socket path (empty: none, so nothing is signed); `host_keys`: the
  // allowed hosts' key blobs (jail_known_hosts).
  AgentProxy(util::UniqueFd listener, std::string upstream, std::vector<std::string> host_keys);
  AgentProxy(const AgentProxy&) = delete;
  AgentProxy& operator=(const AgentProxy&) = delete;
  ~AgentProxy();
  util::Status start();
  // Stops the thread; the refusals, one line per reason with its count.
  std::vector<std::string> stop();

private:
  void serve();
  void refused(const std::string& why);

  util::UniqueFd listener_;
  std::string upstream_;
  std::vector<std::string> host_keys_;
  util::UniqueFd wake_read_, wake_write_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, size_t> refusals_;  // bounded: kMaxReasons
};

}  // namespace pj::sshagent
