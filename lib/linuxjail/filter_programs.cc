// The jail's programs from the binary (filter_programs.h): a copy, no
// libseccomp. The unit tests check them byte for byte against the
// compiler's output for every variant.
#include "linuxjail/filter_programs.h"

namespace pj::linuxjail {

util::Result<BpfProgram> command_filter_program(const SeccompOptions& opts) {
  const auto program = built_in::command_programs[filter_variant(opts)];
  return BpfProgram(program.begin(), program.end());
}

util::Result<BpfProgram> init_filter_program() {
  return BpfProgram(built_in::init_program.begin(), built_in::init_program.end());
}

FilterSource filter_source() { return FilterSource::built_in; }

}  // namespace pj::linuxjail
