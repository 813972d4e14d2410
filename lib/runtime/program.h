// Finding the program to run and what running it needs: the file on the
// caller's PATH, symlinks followed, its #! interpreter (#!/usr/bin/env
// node included), the interpreter's installation and the script's package
// tree, so that these can be shown read-only inside the jail.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace pj::runtime {

struct Need {
  std::string path;  // resolved, absolute
  std::string why;   // "interpreter of pi (#!/usr/bin/env node)"
};

struct Program {
  std::string exec_path;    // the resolved file that will be executed
  std::string interpreter;  // resolved #! interpreter, or empty
  // For `#!/usr/bin/env NAME`: the directory of the NAME found, resolved
  // (its installation is among `needs`). It comes first on PATH inside, so
  // the script's own `env NAME` and its children's find the same program
  // even when the caller reached it through a symlink the jail cannot see
  // (a bin/node link to a Node other than /usr/bin/node).
  std::string path_first;
  std::vector<Need> needs;  // read-only paths running it needs
};

struct Lookup {
  std::string path_env;  // the caller's PATH
  std::string cwd;
  std::string home;  // never granted as a whole
};

// `name` as typed. An error says which exit status applies, as the
// shells have it: Exit::not_found (127) or Exit::not_executable (126).
util::Result<Program> discover(const std::string& name, const Lookup& lookup);

// Parse a #! line: the interpreter and its first argument ("" if none).
// For "/usr/bin/env [-S] prog", returns ("/usr/bin/env", "prog").
std::pair<std::string, std::string> parse_shebang(std::string_view first_line);

}  // namespace pj::runtime
