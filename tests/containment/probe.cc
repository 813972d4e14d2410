// pj-probe: runs inside a jail and reports what the kernel allowed.
// Each subcommand prints "ok" or the errno name of the refusal (and exits
// 0 or 1), or prints the facts it was asked for.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

// `ok` must be computed in an earlier statement than `errno` is read:
// argument evaluation order is unspecified.
int result(bool ok, int err) {
  if (ok) {
    std::puts("ok");
    return 0;
  }
  std::puts(strerrorname_np(err) ? strerrorname_np(err) : "EUNKNOWN");
  return 1;
}

int do_write(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return result(false, errno);
  bool ok = ::write(fd, "probe\n", 6) == 6;
  int err = errno;
  ::close(fd);
  return result(ok, err);
}

int do_read(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return result(false, errno);
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  int err = errno;
  ::close(fd);
  if (n < 0) return result(false, err);
  std::printf("ok %zd\n", n);
  return 0;
}

// fill PATH BYTES [PATH BYTES ...]: create each file in turn and write
// BYTES zero bytes to it (files are kept, so each later write counts the
// earlier ones); one line per file: "ok" or the errno name of the first
// failed open/write/fsync.
int do_fill(int argc, char** argv) {
  int failures = 0;
  static char block[1 << 16];
  for (int i = 2; i + 1 < argc; i += 2) {
    long long want = std::atoll(argv[i + 1]);
    int fd = ::open(argv[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : 0;
    for (long long done = 0; err == 0 && done < want;) {
      size_t chunk = static_cast<size_t>(std::min<long long>(sizeof block, want - done));
      ssize_t n = ::write(fd, block, chunk);
      if (n <= 0)
        err = n < 0 ? errno : EIO;
      else
        done += n;
    }
    if (fd >= 0) ::close(fd);
    failures += result(err == 0, err);
  }
  return failures ? 1 : 0;
}

// statfs PATH...: one line per path: "PATH fsid=H:L blocks=N bsize=N
// mode=OOOO" (mode of the path itself), or "PATH ERRNAME".
int do_statfs(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    struct statfs fs;
    struct stat st;
    if (::statfs(argv[i], &fs) != 0 || ::stat(argv[i], &st) != 0) {
      std::printf("%s %s\n", argv[i], strerrorname_np(errno));
      continue;
    }
    std::printf("%s fsid=%x:%x blocks=%llu bsize=%ld mode=%04o\n", argv[i], fs.f_fsid.__val[0], fs.f_fsid.__val[1],
                static_cast<unsigned long long>(fs.f_blocks), static_cast<long>(fs.f_bsize),
                static_cast<unsigned>(st.st_mode & 07777));
  }
  return 0;
}

std::vector<std::string> list_dir(const char* path, bool numeric_only) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(path)) {
    int own = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (numeric_only && name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (numeric_only && std::atoi(name.c_str()) == own && std::string(path) == "/proc/self/fd") continue;
      out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

int do_status() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("Cap") || line.starts_with("NoNewPrivs") || line.starts_with("Seccomp:"))
      std::cout << line << "\n";
  std::cout << "uid " << ::getuid() << " euid " << ::geteuid() << "\n";
  return 0;
}

int do_connect(const char* host, const char* port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return result(false, errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  if (::inet_pton(AF_INET, host, &sa.sin_addr) != 1) return result(false, EINVAL);
  int r = ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int err = errno;
  return result(r == 0, err);
}

// "1b0d0a" -> "\x1b\r\n".
std::string from_hex(const char* hex) {
  std::string out;
  for (size_t i = 0; hex[i] && hex[i + 1]; i += 2)
    out += static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16));
  return out;
}

bool send_all(int s, const std::string& bytes) {
  return ::write(s, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

// A raw SOCKS5 CONNECT to the network filter (127.0.0.1:1080) for the
// domain name NAME_HEX (any bytes, in hex) and PORT; prints "reply N",
// N being the filter's reply code (0: succeeded, 2: not allowed).
int do_socks5(const char* name_hex, const char* port) {
  std::string name = from_hex(name_hex);
  if (name.empty() || name.size() > 255) return result(false, EINVAL);
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(1080);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return result(false, errno);
  unsigned char method[2];
  if (!send_all(s, std::string("\x05\x01\x00", 3)) || ::read(s, method, 2) != 2) return result(false, EPROTO);
  uint16_t p = static_cast<uint16_t>(std::atoi(port));
  std::string req{'\x05', '\x01', '\x00', '\x03', static_cast<char>(name.size())};
  req += name;
  req += static_cast<char>(p >> 8);
  req += static_cast<char>(p & 0xff);
  unsigned char reply[10];
  if (!send_all(s, req) || ::read(s, reply, sizeof reply) < 2) return result(false, EPROTO);
  std::printf("reply %d\n", reply[1]);
  return 0;
}

// forkbomb FLAG DONE: a real fork bomb (every process forks for ever),
// then this process forks until the kernel refuses (EAGAIN), tries to
// raise RLIMIT_NPROC, writes "limit EAGAIN raise ERRNAME" to FLAG and
// waits until DONE exists; its exit ends the jail and the bomb with it.
int do_forkbomb(const char* flag, const char* done) {
  pid_t bomb = ::fork();
  if (bomb == 0) {
    for (;;) {
      if (::fork() < 0) {
        timespec ts{0, 1000000};
        ::nanosleep(&ts, nullptr);
      }
    }
  }
  int err = 0;
  while (err == 0) {
    pid_t p = ::fork();
    if (p == 0) ::_exit(0);
    if (p < 0)
      err = errno;
    else
      ::waitpid(p, nullptr, 0);
  }
  rlimit more{RLIM_INFINITY, RLIM_INFINITY};
  int raise_err = ::setrlimit(RLIMIT_NPROC, &more) == 0 ? 0 : errno;
  {
    std::ofstream out(flag);
    out << "limit " << strerrorname_np(err) << " raise " << (raise_err ? strerrorname_np(raise_err) : "ok") << "\n";
  }
  while (::access(done, F_OK) != 0) {
    timespec ts{0, 20000000};
    ::nanosleep(&ts, nullptr);
  }
  std::puts("ok");
  return 0;
}

// alloc MIB: allocate and touch MIB MiB, 1 MiB at a time; "ok" when all
// of it was touched (a memory limit kills the process before that).
int do_alloc(const char* mib) {
  long long want = std::atoll(mib);
  for (long long i = 0; i < want; ++i) {
    char* p = static_cast<char*>(std::malloc(1 << 20));
    if (!p) return result(false, ENOMEM);
    std::memset(p, 1, 1 << 20);
  }
  return result(true, 0);
}

// The bytes of /proc/PID/WHAT (cmdline, environ), or the errno name of
// the refusal in `err`.
std::string proc_file(const std::string& pid, const char* what, std::string& err) {
  std::string path = "/proc/" + pid + "/" + what, text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = strerrorname_np(errno);
    return text;
  }
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  if (n < 0) err = strerrorname_np(errno);
  ::close(fd);
  return text;
}

// Whether NEEDLE is in any readable mapping of PID, read through
// /proc/PID/mem as a process of the jail would; "" or the errno name.
std::string search_memory(const std::string& pid, const std::string& needle, bool& found) {
  std::string err;
  std::string maps = proc_file(pid, "maps", err);
  if (!err.empty()) return err;
  int fd = ::open(("/proc/" + pid + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strerrorname_np(errno);
  std::istringstream lines(maps);
  std::string line;
  while (!found && std::getline(lines, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
    std::string region(hi - lo, '\0');
    ssize_t n = ::pread(fd, region.data(), region.size(), static_cast<off_t>(lo));
    if (n > 0) found = std::string_view(region.data(), static_cast<size_t>(n)).find(needle) != std::string_view::npos;
  }
  ::close(fd);
  return "";
}

// find-in PID HEX: where a process of the jail finds the bytes HEX spells
// in PID's command line, environment and memory. One line each: "found",
// "absent" or the errno name of the refusal. Hex, because the probe's own
// arguments are in init's memory too (init built them).
int do_find_in(const std::string& pid, const std::string& hex) {
  std::string needle;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) needle += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  for (const char* what : {"cmdline", "environ"}) {
    std::string err, text = proc_file(pid, what, err);
    std::printf("%s %s\n", what,
                !err.empty()                             ? err.c_str()
                : text.find(needle) != std::string::npos ? "found"
                                                         : "absent");
  }
  bool found = false;
  std::string err = search_memory(pid, needle, found);
  std::printf("mem %s\n", !err.empty() ? err.c_str() : found ? "found" : "absent");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: pj-probe "
                 "write|read|fill|statfs|mount-tmpfs|umount|remount-rw|status|fds|pids|kill|connect|socks5|env|cwd|"
                 "find-in ...\n");
    return 2;
  }
  std::string cmd = argv[1];
  const char* a = argc > 2 ? argv[2] : "";
  if (cmd == "write") return do_write(a);
  if (cmd == "read") return do_read(a);
  if (cmd == "fill") return do_fill(argc, argv);
  if (cmd == "forkbomb" && argc > 3) return do_forkbomb(argv[2], argv[3]);
  if (cmd == "alloc") return do_alloc(a);
  if (cmd == "find-in" && argc > 3) return do_find_in(a, argv[3]);
  if (cmd == "statfs") return do_statfs(argc, argv);
  long r = -1;
  if (cmd == "mount-tmpfs") {
    r = ::mount("tmpfs", a, "tmpfs", 0, nullptr);
    return result(r == 0, errno);
  }
  if (cmd == "umount") {
    r = ::umount2(a, MNT_DETACH);
    return result(r == 0, errno);
  }
  if (cmd == "remount-rw") {
    r = ::mount(nullptr, a, nullptr, MS_REMOUNT | MS_BIND, nullptr);
    return result(r == 0, errno);
  }
  if (cmd == "setattr-rw") {
    mount_attr attr{};
    attr.attr_clr = MOUNT_ATTR_RDONLY;
    r = ::syscall(SYS_mount_setattr, AT_FDCWD, a, 0, &attr, sizeof attr);
    return result(r == 0, errno);
  }
  if (cmd == "status") return do_status();
  if (cmd == "fds" || cmd == "pids") {
    for (const auto& n : list_dir(cmd == "fds" ? "/proc/self/fd" : "/proc", true)) std::cout << n << " ";
    std::cout << "\n";
    return 0;
  }
  if (cmd == "ls") {
    for (const auto& n : list_dir(a, false)) std::cout << n << "\n";
    return 0;
  }
  if (cmd == "kill") {
    r = ::kill(std::atoi(a), 0);
    return result(r == 0, errno);
  }
  if (cmd == "connect" && argc > 3) return do_connect(a, argv[3]);
  if (cmd == "socks5" && argc > 3) return do_socks5(a, argv[3]);
  if (cmd == "syscall" && argc > 2) {
    // syscall NR [ARG...]: the raw call, numbers in C notation.
    unsigned long long n[7] = {};
    for (int i = 2; i < argc && i < 9; ++i) n[i - 2] = std::strtoull(argv[i], nullptr, 0);
    r = ::syscall(static_cast<long>(n[0]), n[1], n[2], n[3], n[4], n[5], n[6]);
    return result(r >= 0, errno);
  }
  if (cmd == "int80") {
    // getpid through the i386 entry point, from a 64-bit process.
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    std::printf("ok %ld\n", ret);
    return 0;
  }
  if (cmd == "x32") {
    r = ::syscall(39L | 0x40000000L);  // getpid with the x32 bit
    return result(r >= 0, errno);
  }
  if (cmd == "tiocsti") {
    // Push TEXT into each standard fd's terminal input, as an attacker
    // would to make the user's shell run it after the jail exits.
    for (int fd = 0; fd < 3; ++fd) {
      int first = 0;
      for (const char* c = a; *c; ++c) {
        r = ::ioctl(fd, TIOCSTI, c);
        if (c == a) first = r == 0 ? 0 : errno;
      }
      std::printf("fd%d %s\n", fd, first == 0 ? "ok" : strerrorname_np(first));
    }
    return 0;
  }
  if (cmd == "resolve") {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    int rc = ::getaddrinfo(a, "80", &hints, &ai);
    if (rc != 0) {
      std::printf("failed %s\n", gai_strerror(rc));
      return 1;
    }
    ::freeaddrinfo(ai);
    std::puts("ok");
    return 0;
  }
  if (cmd == "udp" && argc > 3) {
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[3])));
    ::inet_pton(AF_INET, a, &sa.sin_addr);
    r = ::sendto(s, "probe", 5, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    return result(r == 5, errno);
  }
  if (cmd == "env") {
    const char* v = std::getenv(a);
    std::puts(v ? v : "(unset)");
    return 0;
  }
  if (cmd == "cwd") {
    char buf[4096];
    std::puts(::getcwd(buf, sizeof buf) ? buf : "(none)");
    return 0;
  }
  std::fprintf(stderr, "pj-probe: unknown command %s\n", cmd.c_str());
  return 2;
}
