// The tables compiled to classic BPF with libseccomp. pi-jail runs this
// at build time (filter_gen.cc), so that the binary embeds the programs;
// at run time only where the build could not run the generator (a cross
// build; meson says which) and in the unit tests, which compare the two.
#include "linuxjail/syscall_filter.h"

#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include <fmt/format.h>

#include "util/unique_fd.h"

namespace pj::linuxjail {

namespace {

using util::Error;
using Kind = ArgTest::Kind;

bool lifted(Gate gate, const SeccompOptions& o) {
  switch (gate) {
    case Gate::none: return false;
    case Gate::debugging: return o.debugging == Debugging::allowed;
    case Gate::nested_userns: return o.nested_userns == NestedUserns::unsafe_allowed;
  }
  return false;
}

using Ctx = std::unique_ptr<void, decltype(&seccomp_release)>;

Error seccomp_error(std::string what, int rc) { return Error::from_errno(std::move(what), -rc); }

util::Status add_row(scmp_filter_ctx ctx, const SyscallRow& row) {
  int nr = seccomp_syscall_resolve_name(std::string(row.syscall).c_str());
  if (nr == __NR_SCMP_ERROR) return Error::invalid(fmt::format("seccomp table: unknown system call '{}'", row.syscall));
  const uint32_t action = SCMP_ACT_ERRNO(static_cast<uint16_t>(row.err));
  auto add = [&](std::initializer_list<scmp_arg_cmp> cmps) -> util::Status {
    int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(cmps.size()), cmps.begin());
    if (rc < 0) return seccomp_error(fmt::format("seccomp rule for {}", row.syscall), rc);
    return {};
  };
  // An argument test, built without libseccomp's SCMP_CMP macro (a C
  // compound literal, which clang refuses in C++).
  auto cmp = [](unsigned arg, scmp_compare op, std::uint64_t a, std::uint64_t b = 0) {
    return scmp_arg_cmp{arg, op, a, b};
  };
  const ArgTest& t = row.when;
  switch (t.kind) {
    case Kind::always: return add({});
    case Kind::bits_set: return add({cmp(t.arg, SCMP_CMP_MASKED_EQ, t.value, t.value)});
    case Kind::low32_equals: return add({cmp(t.arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, t.value)});
    case Kind::not_one_of: {
      // libseccomp cannot AND two tests of one argument: deny everything
      // above the largest allowed value, then each gap below it.
      std::uint64_t top = 0;
      for (auto v : t.values) top = std::max(top, v);
      if (auto st = add({cmp(t.arg, SCMP_CMP_GT, top)}); !st) return st;
      for (std::uint64_t v = 0; v < top; ++v) {
        if (std::find(t.values.begin(), t.values.end(), v) != t.values.end()) continue;
        if (auto st = add({cmp(t.arg, SCMP_CMP_EQ, v)}); !st) return st;
      }
      return {};
    }
    case Kind::bits_outside:
      // One test per forbidden bit of the low 32 bits (the kernel reads an
      // unsigned int).
      for (unsigned bit = 0; bit < 32; ++bit) {
        const std::uint64_t b = 1ULL << bit;
        if (t.value & b) continue;
        if (auto st = add({cmp(t.arg, SCMP_CMP_MASKED_EQ, b, b)}); !st) return st;
      }
      return {};
  }
  return {};
}

util::Result<Ctx> build(uint32_t default_action) {
  Ctx ctx(seccomp_init(default_action), seccomp_release);
  if (!ctx) return Error::invalid("seccomp_init failed");
  // Non-native ABIs (i386 via int 0x80, x32) are not in the filter's arch
  // list and kill the process.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc == 0) rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);  // pi-jail sets it itself
  // Both filters as a binary tree over syscall numbers (libseccomp 2.5):
  // a few comparisons find a syscall's rules, where a list took dozens,
  // for every call the kernel's per-syscall cache cannot answer and for
  // every number when the cache is built at attach time (it still can:
  // the tree compares with JGE/JGT only).
  if (rc == 0) rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc < 0) return seccomp_error("seccomp attributes", rc);
  return ctx;
}

util::Result<BpfProgram> export_bpf(scmp_filter_ctx ctx) {
  util::UniqueFd mem(::memfd_create("pi-jail-seccomp", MFD_CLOEXEC));
  if (!mem.valid()) return Error::from_errno("memfd_create for the seccomp filter", errno);
  if (int rc = seccomp_export_bpf(ctx, mem.get()); rc < 0) return seccomp_error("export the seccomp filter", rc);
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return Error::invalid("the exported seccomp filter has an odd size");
  BpfProgram prog(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size)
    return Error::from_errno("read the exported seccomp filter", errno);
  return prog;
}

util::Result<Ctx> command_ctx(const SeccompOptions& opts) {
  auto ctx = build(SCMP_ACT_ALLOW);
  if (!ctx) return ctx.take_error();
  for (const auto& row : command_table()) {
    if (lifted(row.gate, opts)) continue;
    if (auto st = add_row(ctx->get(), row); !st) return st.take_error();
  }
  return ctx;
}

}  // namespace

util::Result<BpfProgram> compile_command_filter(const SeccompOptions& opts) {
  auto ctx = command_ctx(opts);
  if (!ctx) return ctx.take_error();
  return export_bpf(ctx->get());
}

util::Result<BpfProgram> compile_init_filter() {
  auto ctx = build(SCMP_ACT_KILL_PROCESS);
  if (!ctx) return ctx.take_error();
  for (auto name : init_allowlist()) {
    int nr = seccomp_syscall_resolve_name(std::string(name).c_str());
    if (nr == __NR_SCMP_ERROR) return Error::invalid(fmt::format("init allowlist: unknown system call '{}'", name));
    if (int rc = seccomp_rule_add(ctx->get(), SCMP_ACT_ALLOW, nr, 0); rc < 0)
      return seccomp_error(fmt::format("init allowlist rule for {}", name), rc);
  }
  return export_bpf(ctx->get());
}

util::Result<std::string> command_filter_pfc(const SeccompOptions& opts) {
  auto ctx = command_ctx(opts);
  if (!ctx) return ctx.take_error();
  util::UniqueFd mem(::memfd_create("pi-jail-seccomp-pfc", MFD_CLOEXEC));
  if (!mem.valid()) return Error::from_errno("memfd_create", errno);
  if (int rc = seccomp_export_pfc(ctx->get(), mem.get()); rc < 0) return seccomp_error("export pfc", rc);
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  std::string text(static_cast<size_t>(size), '\0');
  if (::pread(mem.get(), text.data(), text.size(), 0) != size) return Error::from_errno("read pfc", errno);
  return text;
}

}  // namespace pj::linuxjail
