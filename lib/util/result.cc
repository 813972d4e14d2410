#include "result.h"

#include <cstring>

#include <fmt/format.h>

namespace pj::util {

std::string errno_name(int err) {
  if (const char* name = strerrorname_np(err)) return name;
  return fmt::format("errno {}", err);
}

std::string Error::message() const {
  if (err_ == 0) return what_;
  return fmt::format("{}: {} ({})", what_, std::strerror(err_), errno_name(err_));
}

}  // namespace pj::util
