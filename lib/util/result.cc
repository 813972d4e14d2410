#include "result.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace pj::util {

std::string errno_name(int err) {
#ifdef __GLIBC__
  if (const char* name = strerrorname_np(err)) return name;
#else
  // No strerrorname_np outside glibc (macOS): the errors pi-jail reports.
  switch (err) {
#define PJ_ERRNO(e) \
  case e:           \
    return #e
    PJ_ERRNO(EPERM);
    PJ_ERRNO(ENOENT);
    PJ_ERRNO(ESRCH);
    PJ_ERRNO(EINTR);
    PJ_ERRNO(EIO);
    PJ_ERRNO(ENXIO);
    PJ_ERRNO(E2BIG);
    PJ_ERRNO(ENOEXEC);
    PJ_ERRNO(EBADF);
    PJ_ERRNO(ECHILD);
    PJ_ERRNO(EAGAIN);
    PJ_ERRNO(ENOMEM);
    PJ_ERRNO(EACCES);
    PJ_ERRNO(EFAULT);
    PJ_ERRNO(EBUSY);
    PJ_ERRNO(EEXIST);
    PJ_ERRNO(EXDEV);
    PJ_ERRNO(ENODEV);
    PJ_ERRNO(ENOTDIR);
    PJ_ERRNO(EISDIR);
    PJ_ERRNO(EINVAL);
    PJ_ERRNO(ENFILE);
    PJ_ERRNO(EMFILE);
    PJ_ERRNO(ENOTTY);
    PJ_ERRNO(ETXTBSY);
    PJ_ERRNO(EFBIG);
    PJ_ERRNO(ENOSPC);
    PJ_ERRNO(ESPIPE);
    PJ_ERRNO(EROFS);
    PJ_ERRNO(EMLINK);
    PJ_ERRNO(EPIPE);
    PJ_ERRNO(ELOOP);
    PJ_ERRNO(ENAMETOOLONG);
    PJ_ERRNO(ENOSYS);
    PJ_ERRNO(ENOTEMPTY);
    PJ_ERRNO(EADDRINUSE);
    PJ_ERRNO(EADDRNOTAVAIL);
    PJ_ERRNO(ECONNREFUSED);
    PJ_ERRNO(ECONNRESET);
    PJ_ERRNO(ETIMEDOUT);
    PJ_ERRNO(EHOSTUNREACH);
    PJ_ERRNO(ENETUNREACH);
    PJ_ERRNO(EOPNOTSUPP);
#undef PJ_ERRNO
    default: break;
  }
#endif
  return fmt::format("errno {}", err);
}

std::string Error::message() const {
  if (err_ == 0) return what_;
  return fmt::format("{}: {} ({})", what_, std::strerror(err_), errno_name(err_));
}

int Error::exit_status() const {
  switch (exit_) {
    case Exit::setup_failed: return 125;
    case Exit::not_executable: return 126;
    case Exit::not_found: return 127;
    case Exit::signaled: return 128 + signal_;
  }
  return 125;  // not reached: every kind is above
}

}  // namespace pj::util
