// Result<T>: a value or an Error carrying errno and a chain of context.
//
// Fallible functions return [[nodiscard]] Result<T>. An Error names what
// failed ("bind /home/u/.gitconfig -> /home/u/.gitconfig") and why (errno
// and/or a reason); callers add context on the way up with .context().
// It also says how pi-jail ends when it ends the run (Exit). No
// exceptions cross module boundaries.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace pj::util {

// How an error that ends the run ends pi-jail: the status it exits with,
// the shells' convention for a command that did not run.
enum class Exit {
  setup_failed,    // 125: pi-jail could not set the run up (every error unless said otherwise)
  not_executable,  // 126: the command was found but cannot be executed
  not_found,       // 127: the command was not found
  signaled,        // 128+N: pi-jail was stopped by signal N before the command ran
};

// The exits an error can be given after it is made (Error::with_exit()):
// the command to run could not be. Exit::signaled is not among them: its
// status needs the signal, which only Error::stopped_by_signal() takes.
enum class CommandExit {
  not_executable,  // Exit::not_executable
  not_found,       // Exit::not_found
};

class Error {
public:
  // An error from a failed system call: `what` names the operation and
  // its object, `err` is the errno it returned.
  static Error from_errno(std::string what, int err) { return Error(std::move(what), err); }
  // An error with no errno: `what` says what is wrong.
  static Error invalid(std::string what) { return Error(std::move(what), 0); }
  // pi-jail was stopped by signal `sig` (SIGINT, SIGTERM) while `what`
  // ran: it ends with 128+sig, as the shells report a killed command.
  static Error stopped_by_signal(std::string what, int sig) {
    Error e(std::move(what), 0);
    e.exit_ = Exit::signaled;
    e.signal_ = sig;
    return e;
  }
  // The same error, ending the run as `kind` says.
  Error with_exit(CommandExit kind) && {
    exit_ = kind == CommandExit::not_found ? Exit::not_found : Exit::not_executable;
    return std::move(*this);
  }

  int err() const { return err_; }
  const std::string& what() const { return what_; }
  Exit exit_kind() const { return exit_; }
  // What pi-jail exits with when this error ends the run: 125, 126, 127
  // or 128+N.
  int exit_status() const;
  // The full message: "outer: inner: Reason (ENAME)".
  std::string message() const;
  // Prefix more context ("set up mounts") to the message; the exit kind
  // stays.
  Error context(std::string outer) && {
    what_ = std::move(outer) + ": " + what_;
    return std::move(*this);
  }

private:
  Error(std::string what, int err) : what_(std::move(what)), err_(err) {}
  std::string what_;
  int err_;
  Exit exit_ = Exit::setup_failed;
  int signal_ = 0;  // Exit::signaled: the signal
};

template <typename T>
class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Error&& take_error() { return std::get<1>(std::move(v_)); }

private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), failed_(true) {}
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }
  Error&& take_error() { return std::move(err_); }

private:
  Error err_ = Error::invalid("");
  bool failed_ = false;
};

using Status = Result<void>;

// errno's symbolic name ("ENOENT"), or "errno N" for unknown values.
std::string errno_name(int err);

}  // namespace pj::util
