// Helpers for containment tests: run pi-jail (a real jail) with the probe
// and capture what happened. One pi-jail process per check.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pj::test {

struct Outcome {
  int status = -1;  // exit code, or 128+N for signal N
  std::string out;
  std::string err;
};

// Paths of the binaries under test, from the environment (PJ_BIN,
// PJ_PROBE, PJ_PROBE_SUID), set by tests/run.
const std::string& pi_jail();
const std::string& probe();
const std::string& probe_dir();
// PJ_DATA_DIR: the schema, validate_json.py and model_server.py (tests/run).
std::string data_dir();
// Validate a --report file against man/pi-jail-report.schema.json;
// status 0 when it parses and validates, the validator's words otherwise.
Outcome validate_report(const std::string& report);
std::string probe_suid();  // empty when not staged (not run as root)

// Run argv with stdin from /dev/null; stdout/stderr captured. `env` adds
// or replaces NAME=value entries of this process's environment.
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// The same with another guard than 60 s against a hung jail (not a timing
// assertion): for runs that wait on many others (fleet_test), which a slow
// host or a sanitizer build starts one by one.
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::chrono::seconds guard);

// Start argv in the background (stdin /dev/null, output inherited); `env`
// as for run(). The caller waits for it.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// Wait for `pid`: its exit code, or 128+N for signal N.
int wait_status(pid_t pid);
// The same with a guard against a hung pi-jail (not a timing assertion):
// after 60 s `pid` is killed and the result is -1.
int wait_status_guarded(pid_t pid);
// The state letter of `pid` in /proc/PID/stat (R, S, T for stopped, Z,
// ...); 0 when there is no such process.
char process_state(pid_t pid);
// Poll `cond` until it holds (a guard of 10 s, not a timing assertion).
bool eventually(const std::function<bool()>& cond);

// A socket bound to 127.0.0.1 on a free port (SOCK_STREAM: listening).
// Returns the fd; `port` gets the port. Throws on failure.
int loopback_socket(int type, int& port);

// An HTTP server on 127.0.0.1 for the network tests: answers every
// request with `body` and keeps each request head (heads(), separated by
// "--" lines); or, `silent`, accepts and holds every connection without
// a byte.
class HttpServer {
public:
  explicit HttpServer(std::string body = "served\n", bool silent = false);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  std::string port() const { return std::to_string(port_); }
  int hits() const { return hits_; }
  std::string heads();

private:
  void serve();
  std::string body_;
  bool silent_;
  int fd_ = -1, port_ = 0;
  std::vector<int> held_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::mutex m_;
  std::string heads_;
};

// A fresh layout under /tmp for one test: base/{ws,home,outside}, with
// canaries in home/.ssh and home/.aws. Removed on destruction.
class Sandbox {
public:
  Sandbox();
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  std::string base, ws, home, outside;

  // pi-jail -w ws --allow-read probe_dir [extra...] -- args..., with
  // HOME=home and `env` (NAME=value), from cwd `cwd` (default ws).
  Outcome jail(const std::vector<std::string>& args, const std::vector<std::string>& extra = {},
               const std::string& cwd = "", const std::vector<std::string>& env = {}) const;
  // The same, running the probe: jail_probe({"write", path}).
  Outcome probe(const std::vector<std::string>& args, const std::vector<std::string>& extra = {}) const;
};

// A real terminal: a private tmux server running one window.
class Tmux {
public:
  Tmux(const std::string& command, int width = 100, int height = 30);
  ~Tmux();
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;
  void send(const std::vector<std::string>& keys);  // tmux send-keys words
  void type(const std::string& line);               // literal text + Enter
  std::string screen();
  // Poll the screen until `text` shows (a guard of 10 s, not a timing
  // assertion). Returns whether it showed.
  bool wait_for(const std::string& text);
  void resize(int width, int height);
  // Append every byte the window's program writes to `path` (tmux pipe-pane).
  void copy_output_to(const std::string& path);

private:
  std::vector<std::string> tmux(std::vector<std::string> args);
  std::string socket_;
};

std::string read_file(const std::string& path);
bool exists(const std::string& path);
void write_file(const std::string& path, const std::string& content);
std::string unique_token();
// PIDs on the host whose command line (arguments joined by spaces)
// starts with `needle`.
std::vector<pid_t> host_processes_with(const std::string& needle);
std::string trim(std::string s);
// The name under Pi's sessions/ of the sessions started in `dir`
// (absolute): "--" + dir without its first "/", "/" as "-", + "--".
std::string pi_session_dir(const std::string& dir);

}  // namespace pj::test
