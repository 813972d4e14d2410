// The control socket between the supervisor and the network filter
// process: one record (messages.h) per message, its descriptors beside it
// (SCM_RIGHTS, util/fd_passing.h); the bytes are decoded by messages.h,
// not here.
//
// Two framings, told apart by the socket's type: on a SOCK_SEQPACKET
// socket (Linux) a record is one message; on a SOCK_STREAM socket (macOS,
// whose AF_UNIX sockets have no SOCK_SEQPACKET) records follow one
// another, each read by the length its header says, its descriptors with
// its first bytes. A record begun on a stream is finished within
// kRestGuard, so a peer that sends half of one and stops is an error,
// never a hang; a stream's sender keeps records whole (a failure part way,
// ETIMEDOUT when the peer stopped reading, leaves the stream unusable:
// the caller ends the peer).
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "util/result.h"
#include "util/secret.h"
#include "util/unique_fd.h"

namespace pj::filterlink {

inline constexpr std::chrono::milliseconds kRestGuard{2000};

// Sends `rec` as one record; never raises SIGPIPE (a gone peer is EPIPE).
// `flags` as sendmsg(2)'s (MSG_DONTWAIT: a full socket is EAGAIN, and
// then nothing of the record was sent).
util::Status send_record(int sock, const Record& rec, int flags = 0);

// Encodes and sends `m`.
util::Status send_message(int sock, const FromSupervisor& m, int flags = 0);
util::Status send_message(int sock, const FromFilter& m, int flags = 0);

struct Received {
  util::SecretString bytes;         // what a message carried is wiped with it
  std::vector<util::UniqueFd> fds;  // close-on-exec
};

// Receives one record; nullopt at the end of the stream (the peer is
// gone). A message longer than kMaxRecord is refused (its descriptors
// closed); `flags` as recvmsg(2)'s (MSG_DONTWAIT: EAGAIN, an error, when
// no record has begun).
util::Result<std::optional<Received>> receive_record(int sock, int flags = 0);

// A connected SOCK_STREAM pair for a control socket where AF_UNIX has no
// SOCK_SEQPACKET (macOS): both ends close-on-exec, their buffers room for
// a few whole records.
util::Result<std::array<util::UniqueFd, 2>> stream_pair();

}  // namespace pj::filterlink
