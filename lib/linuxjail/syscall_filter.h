// The syscall filters: one table of denied calls, each row with its
// reason, compiled with libseccomp to classic BPF -- at build time, by
// pj-filter-gen (filter_gen.cc), for every combination of the switches
// below -- and loaded by the jail with a single seccomp(2) call.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace pj::linuxjail {

// Debugging other processes (ptrace and friends).
enum class Debugging { denied, allowed };
// Creating user namespaces inside the jail (browsers' own sandboxes need
// it). Allowing it is a weakening: only an operator's unsafe_* switch.
enum class NestedUserns { denied, unsafe_allowed };

// Whether the command's filter is loaded at all. Only test builds can
// turn it off (--unsafe-test-no-seccomp), to show other layers alone.
enum class FilterUse { enforced, unsafe_test_disabled };

struct SeccompOptions {
  Debugging debugging = Debugging::denied;
  NestedUserns nested_userns = NestedUserns::denied;
  FilterUse use = FilterUse::enforced;
};

// The switches that change the command's program (`use` only decides
// whether it is loaded), numbered: the build embeds one program per
// variant, and variant_options() lists them all. A new switch that
// changes the program must be added to both.
inline constexpr std::size_t kFilterVariants = 4;
constexpr std::size_t filter_variant(const SeccompOptions& o) {
  return (o.debugging == Debugging::allowed ? 1U : 0U) | (o.nested_userns == NestedUserns::unsafe_allowed ? 2U : 0U);
}
constexpr SeccompOptions variant_options(std::size_t variant) {
  SeccompOptions o;
  o.debugging = (variant & 1U) ? Debugging::allowed : Debugging::denied;
  o.nested_userns = (variant & 2U) ? NestedUserns::unsafe_allowed : NestedUserns::denied;
  return o;
}

// When a row applies to a call.
struct ArgTest {
  enum class Kind {
    always,        // every call
    bits_set,      // (arg & value) == value
    low32_equals,  // (arg & 0xffffffff) == value
    not_one_of,    // arg is none of `values` (small non-negative numbers)
    bits_outside,  // a bit of the low 32 outside the mask `value` is set
  };
  Kind kind = Kind::always;
  unsigned arg = 0;
  std::uint64_t value = 0;
  std::span<const std::uint64_t> values{};
};

// Which option lifts a row; `none` rows always apply.
enum class Gate { none, debugging, nested_userns };

struct SyscallRow {
  std::string_view syscall;
  int err;  // the errno the call fails with
  ArgTest when;
  Gate gate;
  std::string_view reason;
};

// The command's filter table: default allow, these rows deny.
std::span<const SyscallRow> command_table();

// PID 1's filter: only these calls; anything else kills init (and with
// it the jail).
std::span<const std::string_view> init_allowlist();

using BpfProgram = std::vector<sock_filter>;

// The programs the jail loads (before clone: this allocates). Where the
// build ran pj-filter-gen (filter_programs.cc) they are copied from the
// binary and libseccomp is not linked; otherwise (filter_runtime.cc) the
// compiler below makes them at every start.
util::Result<BpfProgram> command_filter_program(const SeccompOptions& opts);
util::Result<BpfProgram> init_filter_program();
enum class FilterSource { built_in, compiled_at_run_time };
FilterSource filter_source();

// The compiler (syscall_filter.cc, libseccomp): the generator, the
// unit tests and the run-time fallback use it.
util::Result<BpfProgram> compile_command_filter(const SeccompOptions& opts);
util::Result<BpfProgram> compile_init_filter();
// libseccomp's pseudo-code for the command filter (golden tests).
util::Result<std::string> command_filter_pfc(const SeccompOptions& opts);

}  // namespace pj::linuxjail
