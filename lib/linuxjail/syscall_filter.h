// The syscall filters: one table of denied calls, each row with its
// reason, compiled with libseccomp to classic BPF in the supervisor
// (before clone: compiling allocates) and loaded by the jail with a
// single seccomp(2) call.
#pragma once

#include <linux/filter.h>

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

util::Result<BpfProgram> compile_command_filter(const SeccompOptions& opts);
util::Result<BpfProgram> compile_init_filter();
// libseccomp's pseudo-code for the command filter (golden tests, explain).
util::Result<std::string> command_filter_pfc(const SeccompOptions& opts);

}  // namespace pj::linuxjail
