// The control socket between the supervisor and the network filter
// process: one record (messages.h) per SOCK_SEQPACKET message, its
// descriptors beside it (SCM_RIGHTS, util/fd_passing.h). Linux only, like
// fd_passing; the bytes are decoded by messages.h, not here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "filterlink/messages.h"
#include "util/result.h"
#include "util/secret.h"
#include "util/unique_fd.h"

namespace pj::filterlink {

// Sends `rec` as one message; never raises SIGPIPE (a gone peer is EPIPE).
// `flags` as sendmsg(2)'s (MSG_DONTWAIT: a full socket is EAGAIN).
util::Status send_record(int sock, const Record& rec, int flags = 0);

// Encodes and sends `m`.
util::Status send_message(int sock, const FromSupervisor& m, int flags = 0);
util::Status send_message(int sock, const FromFilter& m, int flags = 0);

struct Received {
  util::SecretString bytes;         // what a message carried is wiped with it
  std::vector<util::UniqueFd> fds;  // close-on-exec
};

// Receives one message; nullopt at the end of the stream (the peer is
// gone). A message longer than kMaxRecord is refused (its descriptors
// closed); `flags` as recvmsg(2)'s (MSG_DONTWAIT: EAGAIN is an error).
util::Result<std::optional<Received>> receive_record(int sock, int flags = 0);

}  // namespace pj::filterlink
