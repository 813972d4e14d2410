// A #! line of a program the jail could have written (its interpreter
// becomes a read grant).
#include "fuzz.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [interp, arg] = pj::runtime::parse_shebang(pj::fuzz::bytes(data, size));
  if (interp.find_first_of(" \t\r\n") != std::string::npos) pj::fuzz::broken("an interpreter with a blank");
  if (arg.find_first_of(" \t\r\n") != std::string::npos) pj::fuzz::broken("an argument with a blank");
  return 0;
}
