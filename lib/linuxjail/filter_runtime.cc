// The jail's programs compiled at every run, for builds that could not
// run pj-filter-gen (a cross build without an exe wrapper, or
// -Dbuilt_in_filters=disabled).
#include "linuxjail/syscall_filter.h"

namespace pj::linuxjail {

util::Result<BpfProgram> command_filter_program(const SeccompOptions& opts) { return compile_command_filter(opts); }

util::Result<BpfProgram> init_filter_program() { return compile_init_filter(); }

FilterSource filter_source() { return FilterSource::compiled_at_run_time; }

}  // namespace pj::linuxjail
