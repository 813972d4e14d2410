#include "harness.h"

#include <algorithm>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace pj::test {

namespace {

std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run through tests/run)");
  return v;
}

}  // namespace

const std::string& pi_jail() {
  static const std::string p = env_or_die("PJ_BIN");
  return p;
}
const std::string& probe() {
  static const std::string p = env_or_die("PJ_PROBE");
  return p;
}
const std::string& probe_dir() {
  static const std::string d = std::filesystem::path(probe()).parent_path().string();
  return d;
}
std::string data_dir() { return env_or_die("PJ_DATA_DIR"); }

Outcome validate_report(const std::string& report) {
  return run(
      {"/usr/bin/python3", data_dir() + "/validate_json.py", data_dir() + "/pi-jail-report.schema.json", report});
}

std::string probe_suid() {
  const char* v = std::getenv("PJ_PROBE_SUID");
  return v && exists(v) ? v : "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace {

std::vector<std::string> merged_env(const std::vector<std::string>& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& o : env)
      if (o.substr(0, o.find('=')) == name) replaced = true;
    if (!replaced) envs.push_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  return envs;
}

// argv and envp arrays for posix_spawn, pointing into owned strings.
struct SpawnArgs {
  SpawnArgs(const std::vector<std::string>& argv, const std::vector<std::string>& env) : envs(merged_env(env)) {
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
  }
  std::vector<std::string> envs;
  std::vector<char*> cargv, cenv;
};

}  // namespace

int loopback_socket(int type, int& port) {
  int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      (type == SOCK_STREAM && ::listen(s, 16) != 0))
    throw std::runtime_error(std::string("loopback socket: ") + std::strerror(errno));
  socklen_t len = sizeof sa;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return s;
}

HttpServer::HttpServer(std::string body, bool silent) : body_(std::move(body)), silent_(silent) {
  fd_ = loopback_socket(SOCK_STREAM, port_);
  thread_ = std::thread([this] { serve(); });
}

HttpServer::~HttpServer() {
  stop_ = true;
  thread_.join();
  for (int c : held_) ::close(c);
  ::close(fd_);
}

std::string HttpServer::heads() {
  std::lock_guard lock(m_);
  return heads_;
}

void HttpServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    ++hits_;
    if (silent_) {
      held_.push_back(c);
      continue;
    }
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 2000) <= 0) break;
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    {
      std::lock_guard lock(m_);
      heads_ += req.substr(0, req.find("\r\n\r\n")) + "\n--\n";
    }
    std::string resp =
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) + "\r\nConnection: close\r\n\r\n" + body_;
    ssize_t w = ::write(c, resp.data(), resp.size());
    (void)w;
    ::close(c);
  }
}

namespace {

// What spawn() started in the running test case. A test that fails
// before it waits for its background pi-jail would otherwise leave it
// (and the jail under it) running after the suite, for as long as the
// jailed command lasts.
std::vector<pid_t>& spawned() {
  static std::vector<pid_t> pids;
  return pids;
}

// Kills and reaps what the test case started and left running. Only a
// child not yet reaped is killed: its pid cannot have been reused.
struct SpawnReaper : doctest::IReporter {
  explicit SpawnReaper(const doctest::ContextOptions&) {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    for (pid_t pid : spawned()) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) continue;
      if (info.si_pid == 0) ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    spawned().clear();
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("spawn-reaper", 1, SpawnReaper);

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  SpawnArgs args(argv, env);
  auto& cargv = args.cargv;
  auto& cenv = args.cenv;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + std::strerror(rc));
  spawned().push_back(pid);
  return pid;
}

int wait_status(pid_t pid) {
  int status;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int wait_status_guarded(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(25000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char process_state(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 0;
}

bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 400; ++i) {
    if (cond()) return true;
    ::usleep(25000);
  }
  return false;
}

Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  return run(argv, env, std::chrono::seconds(60));
}

Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::chrono::seconds guard) {
  SpawnArgs args(argv, env);
  auto& cargv = args.cargv;
  auto& cenv = args.cenv;

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  pid_t pid;
  int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + std::strerror(rc));

  Outcome o;
  // A guard against a hung jail, not a timing assertion.
  auto deadline = std::chrono::steady_clock::now() + guard;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      o.err += "\n[harness: killed after " + std::to_string(guard.count()) + " s]";
      break;
    }
    if (::poll(fds, 2, 1000) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? o.out : o.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status;
  ::waitpid(pid, &status, 0);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

std::vector<std::string> Tmux::tmux(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/tmux", "-L", socket_, "-f", "/dev/null"});
  return args;
}

Tmux::Tmux(const std::string& command, int width, int height) : socket_("pj-" + unique_token()) {
  auto o =
      run(tmux({"new-session", "-d", "-s", "t", "-x", std::to_string(width), "-y", std::to_string(height), command}),
          // SHELL: without it tmux runs commands with the account's login
          // shell, which for nobody is nologin.
          {"TMUX=", "TERM=xterm-256color", "SHELL=/bin/sh"});
  if (o.status != 0) throw std::runtime_error("tmux new-session failed: " + o.err);
}

Tmux::~Tmux() { run(tmux({"kill-server"})); }

void Tmux::send(const std::vector<std::string>& keys) {
  std::vector<std::string> args{"send-keys", "-t", "t"};
  args.insert(args.end(), keys.begin(), keys.end());
  run(tmux(args));
}

void Tmux::type(const std::string& line) {
  run(tmux({"send-keys", "-t", "t", "-l", line}));
  run(tmux({"send-keys", "-t", "t", "Enter"}));
}

std::string Tmux::screen() { return run(tmux({"capture-pane", "-t", "t", "-p", "-S", "-200"})).out; }

bool Tmux::wait_for(const std::string& text) {
  for (int i = 0; i < 400; ++i) {
    if (screen().find(text) != std::string::npos) return true;
    ::usleep(25000);
  }
  return false;
}

void Tmux::copy_output_to(const std::string& path) {
  auto o = run(tmux({"pipe-pane", "-o", "-t", "t", "cat >> '" + path + "'"}));
  if (o.status != 0) throw std::runtime_error("tmux pipe-pane failed: " + o.err);
}

void Tmux::resize(int width, int height) {
  run(tmux({"resize-window", "-t", "t", "-x", std::to_string(width), "-y", std::to_string(height)}));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  if (!out) throw std::runtime_error("write " + path);
}

std::string unique_token() {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(rng() % 1000000000000ULL);
}

std::vector<pid_t> host_processes_with(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::string cmd = read_file(std::string("/proc/") + e->d_name + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.starts_with(needle)) out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return out;
}

Sandbox::Sandbox() {
  char tmpl[] = "/tmp/pj-test.XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
  base = tmpl;
  ::chmod(base.c_str(), 0755);
  ws = base + "/ws";
  home = base + "/home";
  outside = base + "/outside";
  for (const auto& d : {ws, home, home + "/.ssh", home + "/.aws", outside}) std::filesystem::create_directories(d);
  write_file(home + "/.ssh/id_ed25519", "CANARY-SSH-KEY\n");
  write_file(home + "/.aws/credentials", "CANARY-AWS\n");
  write_file(outside + "/secret", "CANARY-OUTSIDE\n");
}

Sandbox::~Sandbox() {
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
}

Outcome Sandbox::jail(const std::vector<std::string>& args, const std::vector<std::string>& extra,
                      const std::string& cwd, const std::vector<std::string>& env) const {
  std::vector<std::string> argv{"/usr/bin/env", "-C", cwd.empty() ? ws : cwd, pi_jail(),  "-q",
                                "-w",           ws,   "--allow-read",         probe_dir()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> vars{"HOME=" + home};
  vars.insert(vars.end(), env.begin(), env.end());
  return run(argv, vars);
}

Outcome Sandbox::probe(const std::vector<std::string>& args, const std::vector<std::string>& extra) const {
  std::vector<std::string> full{test::probe()};
  full.insert(full.end(), args.begin(), args.end());
  return jail(full, extra);
}

std::string pi_session_dir(const std::string& dir) {
  std::string name = dir.substr(1);
  std::replace(name.begin(), name.end(), '/', '-');
  return "--" + name + "--";
}

}  // namespace pj::test
