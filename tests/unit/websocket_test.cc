// The server's WebSocket frames on an intercepted connection
// (credentials/websocket.h): parsed and masked, whatever the split.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "credentials/websocket.h"

using pj::credentials::Binding;
namespace ws = pj::credentials::ws;

namespace {

const std::string kPh = "sk-ant-oat01-PLACEHOLDERxxxxxxxxxxxxxxxxxxxxxxxx";
const std::string kReal = "sk-ant-oat01-REALVALUE-0123456789abcdefghijklmn";

std::vector<Binding> bindings() { return {{"KEY", kPh, kReal, {{"chatgpt.com", 443}}}}; }

// A frame as a server writes it: FIN bit, opcode, `payload`, and
// optionally a raw second byte's mask bit or reserved bits.
std::string raw(bool fin, std::uint8_t opcode, const std::string& payload, std::uint8_t extra_b0 = 0) {
  std::string f = ws::frame(opcode, payload);
  f[0] = static_cast<char>((fin ? 0x80 : 0) | extra_b0 | opcode);
  return f;
}

// Feed `stream` cut at `cuts` (ascending offsets); all output joined.
std::string feed_split(const std::string& stream, const std::vector<size_t>& cuts, bool& ok) {
  ws::ServerFrames frames(bindings(), {});
  std::string out;
  size_t from = 0;
  ok = true;
  for (size_t to : cuts) {
    auto r = frames.feed(std::string_view(stream).substr(from, to - from));
    if (!r) return ok = false, out;
    out += *r;
    from = to;
  }
  auto r = frames.feed(std::string_view(stream).substr(from));
  if (!r) return ok = false, out;
  return out + *r;
}

}  // namespace

TEST_CASE("websocket: a real value split across frames and reads is masked in the message the jail gets") {
  const std::string text = "{\"echo\":\"" + kReal + "\"}";
  const size_t half = 9 + kReal.size() / 2;
  // The message in two frames split inside the value, a ping between them.
  const std::string stream = raw(false, 1, text.substr(0, half)) + raw(true, 9, "ping " + kReal.substr(13, 20)) +
                             raw(true, 0, text.substr(half)) + raw(true, 2, std::string(70000, 'b') + kReal);
  for (size_t step : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1000}, stream.size()}) {
    std::vector<size_t> cuts;
    for (size_t at = step; at < stream.size(); at += step) cuts.push_back(at);
    CAPTURE(step);
    bool ok = false;
    std::string out = feed_split(stream, cuts, ok);
    REQUIRE(ok);
    CHECK(out.find(kReal.substr(13, 16)) == std::string::npos);
    CHECK(out.find(kReal.substr(13, 20)) == std::string::npos);  // a control frame's 16+ run too
    // The ping first (it ended first), then the text message whole, then
    // the 64-bit-length binary message.
    const std::string text_out = ws::frame(1, "{\"echo\":\"" + kPh + "\"}");
    const size_t t = out.find(text_out);
    CHECK(static_cast<unsigned char>(out[0]) == 0x89);
    REQUIRE(t != std::string::npos);
    CHECK(out.substr(t + text_out.size()) == ws::frame(2, std::string(70000, 'b') + kPh));
  }
}

TEST_CASE("websocket: lengths are encoded in 7, 16 and 64 bits as RFC 6455 says") {
  CHECK(ws::frame(1, std::string(125, 'a')).size() == 2 + 125);
  CHECK(ws::frame(1, std::string(126, 'a')).size() == 4 + 126);
  CHECK(ws::frame(1, std::string(126, 'a')).substr(1, 3) == std::string("\x7e\x00\x7e", 3));
  CHECK(ws::frame(2, std::string(65536, 'a')).substr(1, 9) == std::string("\x7f\0\0\0\0\0\x01\0\0", 9));
}

TEST_CASE("websocket: a frame the filter cannot check closes the connection") {
  auto refused = [](const std::string& stream) {
    ws::ServerFrames frames(bindings(), {});
    auto r = frames.feed(stream);
    return r ? std::string() : r.error().message();
  };
  // Reserved bits (a compression extension would set RSV1).
  CHECK(refused(raw(true, 1, "x", 0x40)).find("reserved bit") != std::string::npos);
  // A masked server frame.
  std::string masked = raw(true, 1, "abcd");
  masked[1] = static_cast<char>(masked[1] | 0x80);
  CHECK(refused(masked + std::string(4, '\0')).find("masked") != std::string::npos);
  // Unknown opcodes, fragmented or long control frames.
  CHECK(refused(raw(true, 3, "x")).find("unknown opcode") != std::string::npos);
  CHECK(refused(raw(true, 11, "x")).find("unknown opcode") != std::string::npos);
  CHECK(refused(raw(false, 9, "x")).find("control frame") != std::string::npos);
  CHECK(refused(raw(true, 9, std::string(126, 'x'))).find("control frame") != std::string::npos);
  // A continuation with no message, a new message inside one.
  CHECK(refused(raw(true, 0, "x")).find("continuation") != std::string::npos);
  CHECK(refused(raw(false, 1, "x") + raw(true, 1, "y")).find("new WebSocket message") != std::string::npos);
  // Oversize, judged from the header alone (nothing is buffered first),
  // and a 64-bit length with the top bit set.
  std::string big = "\x82\x7f" + std::string("\x00\x00\x00\x00\x01\x00\x00\x01", 8);
  CHECK(refused(big).find("over 16 MiB") != std::string::npos);
  std::string top = "\x82\x7f" + std::string("\x80\x00\x00\x00\x00\x00\x00\x01", 8);
  CHECK(refused(top).find("over 16 MiB") != std::string::npos);
  // Fragments adding up past the limit.
  ws::ServerFrames frames(bindings(), {});
  const std::string piece(8u << 20, 'p');
  CHECK(frames.feed(raw(false, 2, piece)));
  CHECK(frames.feed(raw(false, 0, piece)));
  CHECK_FALSE(frames.feed(raw(true, 0, "x")));
}
