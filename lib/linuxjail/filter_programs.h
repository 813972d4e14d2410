// The programs pj-filter-gen compiled at build time (the generated
// filter_programs_data.cc in the build directory): one command program
// per filter_variant(), and init's. Constant data: nothing runs at start.
#pragma once

#include <linux/filter.h>

#include <span>

#include "linuxjail/syscall_filter.h"

namespace pj::linuxjail::built_in {

extern const std::span<const sock_filter> command_programs[kFilterVariants];
extern const std::span<const sock_filter> init_program;

}  // namespace pj::linuxjail::built_in
