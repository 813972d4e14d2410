// The server's half of a WebSocket (RFC 6455) on an intercepted
// connection, after its 101: frames parsed, each message's payload masked
// for the bound real values before the jail gets it. The filter strips
// Sec-WebSocket-Extensions from the upgrade request, so no extension
// (compression) may be in use: a frame with a reserved bit set, a masked
// frame (servers never mask, section 5.1), an unknown opcode, a control
// frame that is fragmented or over 125 bytes, a continuation without a
// message, or a message over kMaxMessage cannot be checked, and ends the
// connection. Frames from the jail pass unchanged (they hold placeholders
// only). Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "credentials/bindings.h"
#include "credentials/substitution.h"
#include "util/result.h"

namespace pj::credentials::ws {

class ServerFrames {
public:
  // A message is masked as a whole, so it is held until its last frame;
  // this bounds what one connection holds.
  static constexpr std::uint64_t kMaxMessage = std::uint64_t{16} << 20;

  ServerFrames(const std::vector<Binding>& bindings,
               const std::vector<std::pair<std::string, std::string>>& renderings);

  // The frames for the jail that `in` (any split of the server's stream)
  // completes: each control frame masked on its own, each data message
  // masked as a whole and sent as one frame (an intermediary may
  // re-fragment, section 5.4). An error: the stream cannot be checked.
  [[nodiscard]] util::Result<std::string> feed(std::string_view in);

private:
  enum class Step { frame, need_more };
  [[nodiscard]] util::Result<Step> next_frame(std::string& out);
  [[nodiscard]] util::Status take(std::uint8_t opcode, bool fin, std::string_view payload, std::string& out);

  Masker masker_;
  std::string buf_;          // bytes not yet a whole frame
  size_t at_ = 0;            // the first unparsed byte of buf_
  std::string message_;      // the data message being assembled
  int message_opcode_ = -1;  // its opcode (1 text, 2 binary), -1: none open
};

// One unfragmented, unmasked frame (RFC 6455 section 5.2).
std::string frame(std::uint8_t opcode, std::string_view payload);

}  // namespace pj::credentials::ws
