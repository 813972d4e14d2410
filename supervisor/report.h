// `--report FILE`: a JSON account of one run (schema in
// man/pi-jail-report.schema.json, described in pi-jail(1)).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "git/audit.h"
#include "policy/policy.h"
#include "run.h"
#include "util/json.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::supervisor {

// The report file, opened before anything runs (a path that cannot be
// written stops the run with 125) and filled in when the run ends.
class Report {
public:
  static util::Result<Report> open(const std::string& path);

  // Everything the report says; fields the run did not reach stay empty.
  struct Content {
    std::vector<std::string> command;
    std::string workspace;
    // The #! interpreter pi-jail resolved, and the directory put first on
    // PATH inside for it (both "" when none).
    std::string interpreter, path_first;
    std::chrono::system_clock::time_point started, ended;
    std::string backend;  // "linux" or "macos-seatbelt"
    // The backend writes the jail's "layers" and "policy" objects (with
    // what the run's outcome adds to them); unset when planning failed
    // (both are then null).
    std::function<void(util::JsonWriter&, const RunOutcome&)> write_jail;
    std::string network_filter;  // where the filter listens, as the backend set it up
    std::vector<policy::Refusal> refused;
    netproxy::DecisionTable decisions;
    RunOutcome outcome;
    // What the jail left in the workspace's repository for the host's
    // git to run (the backend audits it after the run).
    git::audit::Audit repository_audit;
    // What the run's own copy of a private directory (Pi's agent dir) gave
    // back to the host: "applied: ...", "refused: ...", "kept: ..."
    // (pi/private_dirs.h), names escaped, never a value.
    std::vector<std::string> write_back;
    // --allow-ssh: what pi-jail's SSH agent proxy refused, one line a reason.
    std::vector<std::string> ssh_agent_refusals;
    // The run's credential bindings (credentials/run_credentials.h): the "bindings"
    // array of the report's "credentials" object; unset: none.
    std::function<void(util::JsonWriter&)> write_credentials;
  };

  util::Status write(const Content& c);

private:
  Report(std::string path, util::UniqueFd fd, dev_t dev, ino_t ino)
      : path_(std::move(path)), fd_(std::move(fd)), dev_(dev), ino_(ino) {}
  std::string path_;
  util::UniqueFd fd_;
  dev_t dev_;
  ino_t ino_;
};

// The "environment" key of a backend's "policy": the variables' names
// only (values may be secrets the policy passes).
void write_environment(util::JsonWriter& j, const std::vector<std::string>& env);

// The report's JSON text (pure; unit-tested).
std::string render_report(const Report::Content& c);

}  // namespace pj::supervisor
