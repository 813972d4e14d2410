// The first line of a Pi session file (the jail writes them): its header
// names the directory the session belongs to.
#include "fuzz.h"
#include "pi/sessions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pj::pi::header_cwd(pj::fuzz::bytes(data, size));
  (void)pj::pi::session_dir_name(pj::fuzz::bytes(data, size));
  return 0;
}
