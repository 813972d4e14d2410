// One direction of a relayed connection (the network filter loop's Flow).
// relay.cc holds what both builds share; the bytes move through
// relay_splice.cc (Linux: splice(2) through a pipe) or relay_copy.cc (a
// buffer copy: POSIX, what macOS runs), the file meson links with the
// matching poller (lib/netproxy/meson.build).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/unique_fd.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0  // macOS: sockets get SO_NOSIGPIPE instead (set_flags() in proxy.cc)
#endif

namespace pj::netproxy {

inline constexpr size_t kPipeSize = 64 * 1024;
// What a splice relay's pipe grows to once a turn needs a second read (a
// bulk transfer). A pipe's size is a count of buffers, a page each, and a
// splice from a socket fills one buffer per fragment of the packets, often
// less than a page (3.8 KiB on average on loopback from a file server, a
// segment's 1.4 KiB from a NIC): 64 buffers took a 256 KiB slice in two
// reads and two writes, 128 take it in one of each on loopback. Only for a
// bulk flow, and for at most kMaxBulkPipes flows of a process at once: the
// kernel counts the buffers against the user's budget
// (/proc/sys/fs/pipe-user-pages-soft, 16384 pages by default), and past it
// every new pipe of the user's gets 2. A flow reads no more than the slice
// until its pipe is empty, so a pipe holds at most the slice's bytes
// whatever its size. Past the cap a flow keeps kPipeSize; a size the
// kernel refuses (EPERM: past /proc/sys/fs/pipe-max-size, or the user's
// pipe-user-pages-hard) is asked for again at half, down to kPipeSize,
// once per flow.
inline constexpr size_t kBulkPipeSize = 512 * 1024;
inline constexpr int kMaxBulkPipes = 16;  // 2048 pages

// The splice relay's pipe growth (relay_splice.cc): the pipe of `fd`
// grows to the first of want, want / 2, ... above `floor` the kernel
// grants; its size is returned, `floor` when none was.
[[nodiscard]] size_t grow_pipe(int fd, size_t want, size_t floor);

// One direction of a relay: pending bytes first, then splice(2) through a
// pipe (Linux) or a buffer copy (portable). At most `slice` bytes are read
// per pump; the fds stay watched (level-triggered), so the rest follows on
// the next turn of the loop, after the other connections' turns.
struct Flow {
  Flow() = default;
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;
  ~Flow();  // a bulk pipe goes back to the process's count (relay_splice.cc)

  int src = -1, dst = -1;
  std::string pending;
  util::UniqueFd pipe_r, pipe_w;
  size_t pipe_size = kPipeSize;    // grows up to kBulkPipeSize (relay_splice.cc)
  bool pipe_grow_refused = false;  // by the kernel: not asked again
  size_t in_pipe = 0;
  bool src_eof = false;
  bool done = false;
  bool want_in = false, want_out = false;
  std::uint64_t bytes = 0;
  bool error = false;
  bool moved = false;  // bytes moved in the last pump
  // The source hung up and is no longer watched: it is read to its end
  // without the slice (a hung-up socket never says EAGAIN, and holds at
  // most its receive buffer), else the rest would never be read.
  bool src_dead = false;

  // What the relay needs before its first pump: the pipe (splice); false
  // (errno set) when it cannot be made.
  [[nodiscard]] bool prepare();
  void pump(size_t slice);

private:
  enum class Step { more, wait, drained };
  // Past the pending bytes: move what the source has (relay_splice.cc,
  // relay_copy.cc). more: go on; wait: want_in, want_out or error is set;
  // drained: the source ended and everything read went out.
  Step move(size_t slice, size_t& read_now);
};

}  // namespace pj::netproxy
