// The write-back of Pi's auth.json and settings.json: three versions of a
// file (the host's now, the one given to the jail, the jail's), cut at NUL
// bytes (an empty piece: the file does not exist), merged.
#include <string>

#include "fuzz.h"
#include "pi/agent_state.h"
#include "util/json_value.h"

using namespace pj::pi::agent;

namespace {

Content piece(const std::vector<std::string_view>& parts, size_t i) {
  if (i >= parts.size() || parts[i].empty()) return std::nullopt;
  return parts[i];
}

void check(const NewContent& out) {
  if (out && !pj::util::json::parse(*out)) pj::fuzz::broken("a merge wrote a file that is not JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = pj::fuzz::split(pj::fuzz::bytes(data, size), '\0', 4);
  Content host_now = piece(parts, 0), given = piece(parts, 1), jail_left = piece(parts, 2);
  Notes notes;
  check(merge_auth(host_now, given, jail_left, notes));
  check(merge_settings(host_now, given, jail_left, notes));
  if (jail_left) {
    const std::vector<std::string> held{"anthropic", std::string(parts.size() > 3 ? parts[3] : "")};
    (void)hold_entries(*jail_left, given, held);
    (void)auth_entry_is_data(*jail_left, given, held[1]);
  }
  (void)notes.items();
  return 0;
}
