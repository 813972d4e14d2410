// A stand-in for /usr/bin/sandbox-exec, for the Seatbelt backend's wiring
// tests on Linux. It ENFORCES NOTHING. It takes sandbox-exec's command
// line (-p PROFILE, -D NAME=VALUE..., then the command), refuses a
// profile that is not balanced S-expressions with only known operations,
// or that names a parameter it was not given (as sandbox-exec would refuse
// it, exit 65), records everything it was given, then execs the command.
//
//   pj-fake-sandbox-exec RECORD -p PROFILE [-D NAME=VALUE]... [--] COMMAND [ARG]...
//
// RECORD gets each argument after it, NUL-terminated. Tests reach it
// through a two-line wrapper script that supplies RECORD.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "seatbelt/sbpl.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pj-fake-sandbox-exec RECORD -p PROFILE [-D NAME=VALUE]... -- COMMAND...\n");
    return 64;
  }
  {
    std::ofstream rec(argv[1], std::ios::binary | std::ios::trunc);
    for (int i = 2; i < argc; ++i) rec << argv[i] << '\0';
    if (!rec) {
      std::fprintf(stderr, "pj-fake-sandbox-exec: cannot write %s\n", argv[1]);
      return 71;
    }
  }
  std::string profile;
  std::vector<std::string> params;
  int i = 2;
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
