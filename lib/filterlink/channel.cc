#include "filterlink/channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "util/bounded_io.h"
#include "util/fd_passing.h"

namespace pj::filterlink {

namespace {

using Clock = std::chrono::steady_clock;

bool is_stream(int sock) {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

util::Error send_failed(int err) { return util::Error::from_errno("send to the network filter's control socket", err); }

util::Error receive_failed(int err) {
  return util::Error::from_errno("receive from the network filter's control socket", err);
}

// What is left until `deadline`, rounded up: a wait for it ends at the
// deadline, never a fraction of a millisecond before.
std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
}

// The rest of a record on a stream, after its first bytes went: whole
// within kRestGuard.
util::Status send_rest(int sock, std::string_view rest) {
  const auto deadline = Clock::now() + kRestGuard;
  while (!rest.empty()) {
    ssize_t n = util::send_fds_some(sock, rest.data(), rest.size(), nullptr, 0, MSG_DONTWAIT);
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && n != -EAGAIN) return send_failed(static_cast<int>(-n));
    if (util::wait_ready(sock, POLLOUT, -1, left(deadline)) != util::WaitEnd::ready)
      return util::Error::from_errno(
          fmt::format("the network filter's control socket took part of a record and no more for {} ms",
                      kRestGuard.count()),
          ETIMEDOUT);
  }
  return {};
}

util::Status send_on_stream(int sock, const Record& rec, int flags) {
  ssize_t n = util::send_fds_some(sock, rec.bytes.data(), rec.bytes.size(), rec.fds.data(), rec.fds.size(), flags);
  if (n < 0) return send_failed(static_cast<int>(-n));
  return send_rest(sock, std::string_view(rec.bytes).substr(static_cast<size_t>(n)));
}

// Reads into `buf` from `from` until it is full; the descriptors that
// come are added to `out`. `flags` applies to the first read only: once a
// record began, its rest is waited for until `deadline` (set at its first
// byte). 0 bytes at all: the end of the stream.
util::Result<size_t> read_full(int sock, util::SecretString& buf, size_t from, Received& out, int flags,
                               std::optional<Clock::time_point>& deadline) {
  size_t have = from;
  while (have < buf.size()) {
    int fds[util::kMaxPassedFds];
    size_t count = 0;
    ssize_t n = util::receive_fds(sock, buf.data() + have, buf.size() - have, fds, &count, flags);
    for (size_t i = 0; i < count; ++i) out.fds.emplace_back(fds[i]);
    if (n < 0 && !(n == -EAGAIN && have > 0)) return receive_failed(static_cast<int>(-n));
    if (n == 0) {
      if (have == 0) return size_t{0};
      return util::Error::invalid("the network filter's control socket ended within a record");
    }
    if (n > 0) have += static_cast<size_t>(n);
    if (!deadline) deadline = Clock::now() + kRestGuard;
    flags = MSG_DONTWAIT;
    if (have < buf.size() && n < 0 && util::wait_ready(sock, POLLIN, -1, left(*deadline)) != util::WaitEnd::ready)
      return util::Error::invalid(fmt::format(
          "the network filter's control socket sent part of a record and no more for {} ms", kRestGuard.count()));
  }
  return have;
}

util::Result<std::optional<Received>> receive_on_stream(int sock, int flags) {
  Received out;
  out.bytes.resize(kHeaderSize);
  std::optional<Clock::time_point> deadline;
  auto got = read_full(sock, out.bytes, 0, out, flags, deadline);
  if (!got) return got.take_error();
  if (*got == 0) return std::optional<Received>();
  auto size = record_size(out.bytes);
  if (!size) return util::Error::invalid(fmt::format("a control message of more than {} bytes", kMaxRecord));
  out.bytes.resize(*size);
  if (auto rest = read_full(sock, out.bytes, kHeaderSize, out, MSG_DONTWAIT, deadline); !rest) return rest.take_error();
  return std::optional<Received>(std::move(out));
}

template <typename M>
util::Status send_any(int sock, const M& m, int flags) {
  auto rec = encode(m);
  if (!rec) return rec.take_error();
  return send_record(sock, *rec, flags);
}

}  // namespace

util::Status send_record(int sock, const Record& rec, int flags) {
  if (is_stream(sock)) return send_on_stream(sock, rec, flags);
  int rc = util::send_fds(sock, rec.bytes.data(), rec.bytes.size(), rec.fds.data(), rec.fds.size(), flags);
  if (rc < 0) return send_failed(-rc);
  return {};
}

util::Status send_message(int sock, const FromSupervisor& m, int flags) { return send_any(sock, m, flags); }
util::Status send_message(int sock, const FromFilter& m, int flags) { return send_any(sock, m, flags); }

util::Result<std::optional<Received>> receive_record(int sock, int flags) {
  if (is_stream(sock)) return receive_on_stream(sock, flags);
  Received out;
  // One byte more than a record may hold: a longer message shows as
  // kMaxRecord + 1 bytes (the rest is dropped by the kernel, MSG_TRUNC).
  out.bytes.resize(kMaxRecord + 1);
  int fds[util::kMaxPassedFds];
  size_t count = 0;
  ssize_t n = util::receive_fds(sock, out.bytes.data(), out.bytes.size(), fds, &count, flags);
  if (n < 0) return receive_failed(static_cast<int>(-n));
  for (size_t i = 0; i < count; ++i) out.fds.emplace_back(fds[i]);
  if (n == 0 && count == 0) return std::optional<Received>();
  if (static_cast<size_t>(n) > kMaxRecord)
    return util::Error::invalid(fmt::format("a control message of more than {} bytes", kMaxRecord));
  out.bytes.resize(static_cast<size_t>(n));
  return std::optional<Received>(std::move(out));
}

util::Result<std::array<util::UniqueFd, 2>> stream_pair() {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
    return util::Error::from_errno("make the filter's control socket", errno);
  std::array<util::UniqueFd, 2> out{util::UniqueFd(sp[0]), util::UniqueFd(sp[1])};
  // macOS's defaults (8 KiB) would split most records; four whole ones fit.
  const int room = static_cast<int>(4 * kMaxRecord);
  for (const auto& fd : out) {
    if (::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0)
      return util::Error::from_errno("make the filter's control socket close-on-exec", errno);
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &room, sizeof room) != 0 ||
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &room, sizeof room) != 0)
      return util::Error::from_errno("size the filter's control socket's buffers", errno);
  }
  return out;
}

}  // namespace pj::filterlink
