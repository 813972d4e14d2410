#include "credentials/websocket.h"

#include <fmt/format.h>

namespace pj::credentials::ws {

using util::Error;

namespace {

constexpr std::uint8_t kContinuation = 0, kText = 1, kBinary = 2, kClose = 8, kPing = 9, kPong = 10;

bool is_control(std::uint8_t opcode) { return (opcode & 8) != 0; }

std::uint64_t big_endian(std::string_view bytes) {
  std::uint64_t v = 0;
  for (unsigned char c : bytes) v = v << 8 | c;
  return v;
}

}  // namespace

std::string frame(std::uint8_t opcode, std::string_view payload) {
  std::string out(1, static_cast<char>(0x80 | opcode));
  const std::uint64_t n = payload.size();
  if (n < 126) {
    out += static_cast<char>(n);
  } else if (n <= 0xffff) {
    out += static_cast<char>(126);
    for (int shift : {8, 0}) out += static_cast<char>((n >> shift) & 0xff);
  } else {
    out += static_cast<char>(127);
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  }
  out.append(payload);
  return out;
}

ServerFrames::ServerFrames(const std::vector<Binding>& bindings,
                           const std::vector<std::pair<std::string, std::string>>& renderings)
    : masker_(bindings, renderings) {}

util::Result<std::string> ServerFrames::feed(std::string_view in) {
  buf_.append(in);
  std::string out;
  while (true) {
    auto step = next_frame(out);
    if (!step) return step.take_error();
    if (*step == Step::need_more) break;
  }
  buf_.erase(0, at_);
  at_ = 0;
  return out;
}

// Parse one frame at at_ (section 5.2): FIN, three reserved bits, the
// opcode; the mask bit and a 7-bit length, extended to 16 or 64 bits by
// 126 and 127.
util::Result<ServerFrames::Step> ServerFrames::next_frame(std::string& out) {
  std::string_view b = std::string_view(buf_).substr(at_);
  if (b.size() < 2) return Step::need_more;
  const auto b0 = static_cast<std::uint8_t>(b[0]), b1 = static_cast<std::uint8_t>(b[1]);
  const bool fin = (b0 & 0x80) != 0;
  const std::uint8_t opcode = b0 & 0x0f;
  if (b0 & 0x70) return Error::invalid("a WebSocket frame with a reserved bit set (no extension was negotiated)");
  if (b1 & 0x80) return Error::invalid("a masked WebSocket frame from the server");
  std::uint64_t length = b1 & 0x7f;
  size_t head = 2;
  if (length >= 126) {
    head = length == 126 ? 4 : 10;
    if (b.size() < head) return Step::need_more;
    length = big_endian(b.substr(2, head - 2));
  }
  if (is_control(opcode) ? opcode != kClose && opcode != kPing && opcode != kPong
                         : opcode != kContinuation && opcode != kText && opcode != kBinary)
    return Error::invalid(fmt::format("a WebSocket frame with the unknown opcode {}", opcode));
  if (is_control(opcode) && (!fin || length > 125))
    return Error::invalid("a WebSocket control frame that is fragmented or over 125 bytes");
  if (length > kMaxMessage || message_.size() + length > kMaxMessage)
    return Error::invalid(fmt::format("a WebSocket message over {} MiB", kMaxMessage >> 20));
  if (b.size() - head < length) return Step::need_more;
  at_ += head + static_cast<size_t>(length);
  if (auto st = take(opcode, fin, b.substr(head, static_cast<size_t>(length)), out); !st) return st.take_error();
  return Step::frame;
}

util::Status ServerFrames::take(std::uint8_t opcode, bool fin, std::string_view payload, std::string& out) {
  if (is_control(opcode)) {
    // Between the frames of a message, too (section 5.4): masked alone.
    std::string masked = masker_.mask(payload);
    if (masked.size() > 125) return Error::invalid("a WebSocket control frame over 125 bytes once masked");
    out += frame(opcode, masked);
    return {};
  }
  if (opcode == kContinuation && message_opcode_ < 0)
    return Error::invalid("a WebSocket continuation frame outside a message");
  if (opcode != kContinuation && message_opcode_ >= 0)
    return Error::invalid("a new WebSocket message before the last one ended");
  if (opcode != kContinuation) message_opcode_ = opcode;
  message_.append(payload);
  if (!fin) return {};
  // The whole message at once: a value split across frames is masked too.
  out += frame(static_cast<std::uint8_t>(message_opcode_), masker_.mask(message_));
  message_.clear();
  message_opcode_ = -1;
  return {};
}

}  // namespace pj::credentials::ws
