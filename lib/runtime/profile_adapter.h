// What a profile adds to preparing a run, beyond its policy text: the
// directories its variables name (made when the profile needs them),
// what the program needs there, what the request gains, and checks of
// the command before it runs. prepare() asks the adapter that the
// profile chose (pi/profile_adapter.h selects it), never the profile's
// name. Each step's default adds nothing.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/layers.h"
#include "policy/policy.h"
#include "runtime/program.h"
#include "runtime/request.h"
#include "util/result.h"

namespace pj::runtime {

// What is being prepared: explain makes nothing and runs nothing.
enum class Preparing { explain, jailed_run, unsandboxed_run };

// What an adapter is told of the run being prepared.
struct Preparation {
  Preparing preparing = Preparing::explain;
  std::string home_real = {};          // $HOME resolved (guards compare resolved paths)
  std::string path_env = {};           // the caller's $PATH
  std::vector<std::string> argv = {};  // run: the command as given
  // Run: the program found (runtime::discover()); nullptr when it was not.
  const Program* program = nullptr;
};

// Whether a directory the run made in a hidden subdirectory of a private
// directory (Pi's sessions/, host path `parent`) may join the host's: ""
// when it may, else why not. `made` is open at what the jail left there.
using KeepNew = std::function<std::string(const std::string& parent, std::string_view name, int made)>;

// What the adapter tells the run once the request is made.
struct ProfileHints {
  KeepNew keep_new_dirs;  // empty: every new directory there is discarded
  // The program's package commands are refused inside (the pi guard).
  bool guard_package_commands = false;
  // Tools the program downloads when it cannot find them (the exit
  // summary proposes no rule for that download).
  bool downloads_tools = false;
};

class ProfileAdapter {
public:
  virtual ~ProfileAdapter() = default;
  // Before the policy is loaded: the profile's variables, and the
  // directories they name, made and resolved when the profile needs them.
  virtual util::Status place(policy::Places&, const Preparation&) { return {}; }
  // Before the policy is loaded: what the program needs in those places.
  virtual util::Status needs(const policy::Places&, const Preparation&, std::vector<policy::ProgramNeed>&) {
    return {};
  }
  // Once the policy is resolved: what else the program looks for that
  // the view does not show yet (the policy is resolved again with them
  // in a jailed run).
  virtual std::vector<policy::ProgramNeed> more_needs(const policy::Policy&, const Preparation&) { return {}; }
  // What the request gains from the profile (its environment, hidden
  // parts of private directories), and what the run is told.
  virtual void shape(Request&, ProfileHints&) {}
  // Run only, once the program is found: a reason to stop before it
  // runs, given what the program needs (policy::Context::program).
  virtual util::Status check_run(const Preparation&, const std::vector<policy::ProgramNeed>&, ProfileHints&) {
    return {};
  }
};

}  // namespace pj::runtime
