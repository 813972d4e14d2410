#include "filterlink/channel.h"

#include <fmt/format.h>

#include "util/fd_passing.h"

namespace pj::filterlink {

util::Status send_record(int sock, const Record& rec, int flags) {
  int rc = util::send_fds(sock, rec.bytes.data(), rec.bytes.size(), rec.fds.data(), rec.fds.size(), flags);
  if (rc < 0) return util::Error::from_errno("send to the network filter's control socket", -rc);
  return {};
}

namespace {

template <typename M>
util::Status send_any(int sock, const M& m, int flags) {
  auto rec = encode(m);
  if (!rec) return rec.take_error();
  return send_record(sock, *rec, flags);
}

}  // namespace

util::Status send_message(int sock, const FromSupervisor& m, int flags) { return send_any(sock, m, flags); }
util::Status send_message(int sock, const FromFilter& m, int flags) { return send_any(sock, m, flags); }

util::Result<std::optional<Received>> receive_record(int sock, int flags) {
  Received out;
  // One byte more than a record may hold: a longer message shows as
  // kMaxRecord + 1 bytes (the rest is dropped by the kernel, MSG_TRUNC).
  out.bytes.resize(kMaxRecord + 1);
  int fds[util::kMaxPassedFds];
  size_t count = 0;
  ssize_t n = util::receive_fds(sock, out.bytes.data(), out.bytes.size(), fds, &count, flags);
  if (n < 0) return util::Error::from_errno("receive from the network filter's control socket", static_cast<int>(-n));
  for (size_t i = 0; i < count; ++i) out.fds.emplace_back(fds[i]);
  if (n == 0 && count == 0) return std::optional<Received>();
  if (static_cast<size_t>(n) > kMaxRecord)
    return util::Error::invalid(fmt::format("a control message of more than {} bytes", kMaxRecord));
  out.bytes.resize(static_cast<size_t>(n));
  return std::optional<Received>(std::move(out));
}

}  // namespace pj::filterlink
