// A stand-in for /usr/bin/sandbox-exec, for the Seatbelt backend's wiring
// tests on Linux. It ENFORCES NOTHING. It takes sandbox-exec's command
// line (-p PROFILE, -D NAME=VALUE..., then the command), refuses a
// profile that is not balanced S-expressions with only known operations,
// or that names a parameter it was not given (as sandbox-exec would refuse
// it, exit 65), records everything it was given, then execs the command.
//
//   pj-fake-sandbox-exec RECORD -p PROFILE [-D NAME=VALUE]... [--] COMMAND [ARG]...
//   STAND-IN -p PROFILE ...   (STAND-IN a symlink to it: RECORD is STAND-IN.record)
//
// RECORD gets each argument after it, NUL-terminated, and RECORD.env the
// environment it was given, each entry NUL-terminated. When the command
// is pi-jail's network filter (its last argument --network-filter), they
// are RECORD.filter and RECORD.filter.env instead. Tests reach it through
// a two-line wrapper script that supplies RECORD (which adds the shell's
// PWD to the environment), or through a symlink (which adds nothing).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "seatbelt/sbpl.h"

namespace {

bool write_all(const std::string& path, char* const* items, int count) {
  std::ofstream rec(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; count < 0 ? items[i] != nullptr : i < count; ++i) rec << items[i] << '\0';
  return static_cast<bool>(rec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pj-fake-sandbox-exec RECORD -p PROFILE [-D NAME=VALUE]... -- COMMAND...\n");
    return 64;
  }
  const bool named = argv[1][0] != '-';
  std::string record = named ? argv[1] : std::string(argv[0]) + ".record";
  const int first = named ? 2 : 1;
  if (std::strcmp(argv[argc - 1], "--network-filter") == 0) record += ".filter";
  if (!write_all(record, argv + first, argc - first) || !write_all(record + ".env", environ, -1)) {
    std::fprintf(stderr, "pj-fake-sandbox-exec: cannot write %s\n", record.c_str());
    return 71;
  }
  std::string profile;
  std::vector<std::string> params;
  int i = first;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-p" && i + 1 < argc)
      profile = argv[++i];
    else if (a == "-D" && i + 1 < argc) {
      std::string d = argv[++i];
      params.push_back(d.substr(0, d.find('=')));
    } else if (a == "--") {
      ++i;
      break;
    } else {
      break;
    }
  }
  if (profile.empty() || i >= argc) {
    std::fprintf(stderr, "sandbox-exec (stand-in): no profile or no command\n");
    return 64;
  }
  if (auto st = pj::seatbelt::check_profile(profile, params); !st) {
    std::fprintf(stderr, "sandbox-exec (stand-in): %s\n", st.error().message().c_str());
    return 65;
  }
  ::execv(argv[i], argv + i);
  std::fprintf(stderr, "sandbox-exec (stand-in): execv() of '%s' failed: %s\n", argv[i], std::strerror(errno));
  return 71;
}
