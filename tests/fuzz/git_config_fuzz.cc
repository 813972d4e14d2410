// Git's config syntax, read from a repository the jail could write.
#include "fuzz.h"
#include "git/config.h"

using namespace pj;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  git::config::Parsed p = git::config::parse(in);
  for (const auto& e : p.entries) {
    if (e.line < 1) pj::fuzz::broken("an entry without a line");
    (void)git::config::command_reason(e);
    (void)git::config::escape(e.key());
    if (e.value) (void)git::config::escape(*e.value);
  }
  const std::string shown = git::config::escape(in);
  for (unsigned char c : shown)
    if (c < 0x20 || c == 0x7f) pj::fuzz::broken("escape() let a control byte through");
  return 0;
}
