// The command line: argv -> Invocation (plain data).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "util/log.h"
#include "util/result.h"

namespace pj::cli {

enum class Mode { run, explain, doctor, shell_init, help, version };

// Running with no isolation is a named, explicit choice.
enum class Isolation { jail, unsandboxed };

struct Invocation {
  Mode mode = Mode::run;
  std::optional<std::string> workspace;
  std::vector<std::string> allow_read;
  std::vector<std::string> allow_write;
  std::vector<std::string> deny;
  std::vector<std::string> test_landlock_read_only;  // test aid; only narrows
  Isolation isolation = Isolation::jail;
  util::Verbosity verbosity = util::Verbosity::normal;
  bool json = false;
  std::string shell;                 // shell-init
  std::vector<std::string> command;  // run: COMMAND [ARG...]
};

util::Result<Invocation> parse(int argc, char** argv);

extern const char* const kUsage;

}  // namespace pj::cli
