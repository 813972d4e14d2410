// The seccomp tables, as the jail loads them (built into pi-jail at build
// time, see filter_gen.cc), evaluated against fake system calls: every
// row of the table. The built-in programs are checked byte for byte
// against libseccomp's output, so the table stays the one source.
#include <doctest/doctest.h>
#include <linux/audit.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bpf_eval.h"
#include "linuxjail/syscall_filter.h"

using namespace pj::linuxjail;
using pj::test::bpf_run;

namespace {

constexpr std::uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
std::uint32_t errno_of(int e) { return SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(e); }

int nr(std::string_view name) {
  int n = seccomp_syscall_resolve_name(std::string(name).c_str());
  REQUIRE_MESSAGE(n >= 0, "no such syscall on x86_64: " << name);
  return n;
}

seccomp_data call(std::string_view name, std::initializer_list<std::uint64_t> args = {}) {
  seccomp_data d{};
  d.arch = AUDIT_ARCH_X86_64;
  d.nr = nr(name);
  int i = 0;
  for (auto a : args) d.args[i++] = a;
  return d;
}

seccomp_data with_arg(seccomp_data d, unsigned arg, std::uint64_t v) {
  d.args[arg] = v;
  return d;
}

const BpfProgram& command_filter(const SeccompOptions& opts = {}) {
  static std::map<std::pair<int, int>, BpfProgram> cache;
  auto key = std::make_pair(static_cast<int>(opts.debugging), static_cast<int>(opts.nested_userns));
  if (!cache.count(key)) {
    auto prog = command_filter_program(opts);
    REQUIRE_MESSAGE(prog.ok(), prog.error().message());
    cache[key] = *prog;
  }
  return cache[key];
}

}  // namespace

TEST_CASE("every row of the command table is enforced by the compiled filter") {
  const auto& prog = command_filter();
  int rows = 0;
  for (const auto& row : command_table()) {
    if (row.gate != Gate::none) continue;
    CAPTURE(row.syscall);
    CAPTURE(row.reason);
    const std::uint32_t want = errno_of(row.err);
    seccomp_data d = call(row.syscall);
    const ArgTest& t = row.when;
    switch (t.kind) {
      case ArgTest::Kind::always: CHECK(bpf_run(prog, d) == want); break;
      case ArgTest::Kind::bits_set:
        // The flag alone, and mixed with harmless ones.
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value | CLONE_FILES | CLONE_FS | SIGCHLD)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, CLONE_FILES | SIGCHLD)) == kAllow);
        break;
      case ArgTest::Kind::low32_equals:
        // With high bits set the kernel still sees the same command
        // (CVE-2019-10063): the filter must not be fooled.
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value | 0xdead000000000000ULL)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value | 0x100000000ULL)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, TCGETS)) == kAllow);
        break;
      case ArgTest::Kind::not_one_of:
        for (std::uint64_t v = 0; v < 64; ++v) {
          CAPTURE(v);
          bool allowed = std::find(t.values.begin(), t.values.end(), v) != t.values.end();
          CHECK(bpf_run(prog, with_arg(d, t.arg, v)) == (allowed ? kAllow : want));
        }
        CHECK(bpf_run(prog, with_arg(d, t.arg, 0xffffffffULL)) == want);
        CHECK(bpf_run(prog, with_arg(d, t.arg, 0x100000001ULL)) == want);  // high bits: refused, not trusted
        break;
      case ArgTest::Kind::bits_outside:
        for (unsigned bit = 0; bit < 32; ++bit) {
          CAPTURE(bit);
          std::uint64_t b = 1ULL << bit;
          CHECK(bpf_run(prog, with_arg(d, t.arg, b)) == ((t.value & b) ? kAllow : want));
        }
        CHECK(bpf_run(prog, with_arg(d, t.arg, 0)) == kAllow);
        CHECK(bpf_run(prog, with_arg(d, t.arg, t.value)) == kAllow);
        break;
    }
    ++rows;
  }
  CHECK(rows > 60);
}

TEST_CASE("ordinary calls are allowed") {
  const auto& prog = command_filter();
  for (const char* name : {"read", "write", "openat", "execve", "mmap", "futex", "wait4", "kill", "getpid"}) {
    CAPTURE(name);
    CHECK(bpf_run(prog, call(name)) == kAllow);
  }
  CHECK(bpf_run(prog, call("clone", {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD})) == kAllow);
  CHECK(bpf_run(prog, call("socket", {AF_INET6, SOCK_STREAM})) == kAllow);
  CHECK(bpf_run(prog, call("socket", {AF_UNIX, SOCK_STREAM})) == kAllow);
  CHECK(bpf_run(prog, call("socket", {AF_VSOCK, SOCK_STREAM})) == errno_of(EAFNOSUPPORT));
  CHECK(bpf_run(prog, call("socket", {AF_PACKET, SOCK_RAW})) == errno_of(EAFNOSUPPORT));
  CHECK(bpf_run(prog, call("seccomp", {SECCOMP_SET_MODE_FILTER, 0})) == kAllow);
  CHECK(bpf_run(prog, call("seccomp", {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER})) == errno_of(EPERM));
}

TEST_CASE("non-native system call ABIs are killed") {
  const auto& prog = command_filter();
  seccomp_data i386 = call("read");
  i386.arch = AUDIT_ARCH_I386;
  i386.nr = 21;  // mount on i386
  CHECK(bpf_run(prog, i386) == kKill);
  seccomp_data x32 = call("mount");
  x32.nr |= 0x40000000;  // __X32_SYSCALL_BIT
  CHECK(bpf_run(prog, x32) == kKill);
  seccomp_data x32_read = call("read");
  x32_read.nr |= 0x40000000;
  CHECK(bpf_run(prog, x32_read) == kKill);
}

TEST_CASE("operator switches lift exactly their rows") {
  SeccompOptions debug;
  debug.debugging = Debugging::allowed;
  CHECK(bpf_run(command_filter(), call("ptrace")) == errno_of(EPERM));
  CHECK(bpf_run(command_filter(debug), call("ptrace")) == kAllow);
  CHECK(bpf_run(command_filter(debug), call("process_vm_readv")) == kAllow);
  CHECK(bpf_run(command_filter(debug), call("mount")) == errno_of(EPERM));

  SeccompOptions userns;
  userns.nested_userns = NestedUserns::unsafe_allowed;
  CHECK(bpf_run(command_filter(), call("unshare", {CLONE_NEWUSER})) == errno_of(EPERM));
  CHECK(bpf_run(command_filter(userns), call("unshare", {CLONE_NEWUSER})) == kAllow);
  CHECK(bpf_run(command_filter(userns), call("unshare", {CLONE_NEWUSER | CLONE_NEWNET})) == errno_of(EPERM));
  CHECK(bpf_run(command_filter(userns), call("clone", {CLONE_NEWUSER | SIGCHLD})) == kAllow);
  CHECK(bpf_run(command_filter(userns), call("ptrace")) == errno_of(EPERM));
}

TEST_CASE("the jail's init may only wait, signal and exit") {
  auto prog = init_filter_program();
  REQUIRE(prog.ok());
  for (auto name : init_allowlist()) {
    CAPTURE(name);
    CHECK(bpf_run(*prog, call(name)) == kAllow);
  }
  for (const char* name :
       {"execve", "execveat", "socket", "connect", "ptrace", "mount", "clone", "clone3", "unshare"}) {
    CAPTURE(name);
    CHECK(bpf_run(*prog, call(name)) == kKill);
  }
}

TEST_CASE("every combination of the switches has its own variant") {
  std::set<std::size_t> seen;
  for (auto debugging : {Debugging::denied, Debugging::allowed})
    for (auto userns : {NestedUserns::denied, NestedUserns::unsafe_allowed})
      for (auto use : {FilterUse::enforced, FilterUse::unsafe_test_disabled}) {
        SeccompOptions o;
        o.debugging = debugging;
        o.nested_userns = userns;
        o.use = use;
        const std::size_t v = filter_variant(o);
        REQUIRE(v < kFilterVariants);
        CHECK(variant_options(v).debugging == debugging);
        CHECK(variant_options(v).nested_userns == userns);
        if (use == FilterUse::enforced) seen.insert(v);
      }
  CHECK(seen.size() == kFilterVariants);
}

TEST_CASE("the programs built into pi-jail are libseccomp's output for the table, byte for byte") {
  if (filter_source() == FilterSource::compiled_at_run_time)
    MESSAGE("this build compiles the filters at run time (no built-in programs)");
  auto same = [](const BpfProgram& a, const BpfProgram& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)) == 0;
  };
  for (std::size_t v = 0; v < kFilterVariants; ++v) {
    CAPTURE(v);
    auto loaded = command_filter_program(variant_options(v));
    auto compiled = compile_command_filter(variant_options(v));
    REQUIRE(loaded.ok());
    REQUIRE(compiled.ok());
    CHECK(same(*loaded, *compiled));
  }
  auto loaded = init_filter_program();
  auto compiled = compile_init_filter();
  REQUIRE(loaded.ok());
  REQUIRE(compiled.ok());
  CHECK(same(*loaded, *compiled));
}

// The kernel runs the filter for every system call it cannot answer from
// its per-syscall cache, and emulates it for every syscall number when
// the filter is attached (seccomp_cache_prepare, under the task's signal
// lock). libseccomp's binary tree (SCMP_FLTATR_CTL_OPTIMIZE 2) finds a
// syscall's rules in a few comparisons, where a list compares with the
// table's syscalls one after the other.
TEST_CASE("the command filter finds a system call's verdict in a binary tree, not a list") {
  for (std::size_t v = 0; v < kFilterVariants; ++v) {
    CAPTURE(v);
    const BpfProgram& prog = command_filter(variant_options(v));
    std::vector<size_t> steps;
    for (std::uint32_t n = 0; n < 512; ++n) {
      seccomp_data d{};
      d.arch = AUDIT_ARCH_X86_64;
      d.nr = static_cast<int>(n);
      size_t count = 0;
      bpf_run(prog, d, &count);
      steps.push_back(count);
    }
    std::sort(steps.begin(), steps.end());
    CHECK(prog.size() > 100);    // the table is not empty: the bounds mean something
    CHECK(steps[501] <= 24);     // 98% of the numbers
    CHECK(steps.back() <= 128);  // the rows that look at arguments
  }
}

TEST_CASE("the command filter's pseudo-code matches the golden dump") {
  auto pfc = command_filter_pfc({});
  REQUIRE(pfc.ok());
  std::string path = std::string(PJ_GOLDEN_DIR) + "/command_filter.pfc";
  if (std::getenv("PJ_UPDATE_GOLDEN")) {
    std::ofstream(path) << *pfc;
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << path);
  std::stringstream want;
  want << in.rdbuf();
  CHECK(*pfc == want.str());
}
