// The response masker, fed a server's bytes at arbitrary chunk
// boundaries, checked against a reference: whatever the pieces, no
// spelling of a real value that the masker promises to find (either case,
// %XX, \u00XX and "\/" escapes, the whole value in base64 and base64url
// at each alignment, any run of kMinRun bytes of its secret part) is in
// what it releases.
#include <cctype>
#include <string>

#include "fuzz.h"
#include "credentials/substitution.h"
#include "netproxy/http1.h"

using namespace pj::netproxy;
using namespace pj::netproxy::http1;
using namespace pj::credentials;

namespace {

const std::string kPrefix = "sk-ant-api03-";
const std::string kReal = kPrefix + "ReAlVaLuE-0123456789_xyzQ";
const std::string kPlaceholder = kPrefix + "PLACEHOLDERplaceholder_0000";

std::vector<Binding> bindings() { return {{"KEY", kPlaceholder, kReal, {{"api.anthropic.com", 443}}}}; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// One pass of the escapes the masker reads: %XX, \u00XX, "\/".
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 3;
    } else if (s.substr(i, 4) == "\\u00" && i + 5 < s.size() && hex(s[i + 4]) >= 0 && hex(s[i + 5]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 4]) * 16 + hex(s[i + 5])));
      i += 6;
    } else if (s.substr(i, 2) == "\\/") {
      out.push_back('/');
      i += 2;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// The characters of `value`'s base64 at byte alignment `align` that
// depend on the value alone: what the masker promises to find.
std::string base64_of_value(std::string_view value, size_t align, bool url) {
  std::string bytes(align, '\0');
  bytes.append(value);
  while (bytes.size() % 3) bytes.push_back('\0');
  std::string all = base64_encode(bytes);
  const size_t first = (8 * align + 5) / 6, last = 8 * (align + value.size()) / 6;
  std::string out = all.substr(first, last - first);
  if (url)
    for (auto& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

void check(const std::string& out) {
  const std::string plain = lower(unescape(out));
  const std::string secret = lower(kReal.substr(kPrefix.size()));
  for (size_t at = 0; at + Masker::kMinRun <= secret.size(); ++at)
    if (plain.find(secret.substr(at, Masker::kMinRun)) != std::string::npos)
      pj::fuzz::broken("a run of the real value's secret part was released");
  // Base64 of the whole value only: the masker does not promise to find
  // base64 of a part of it (a truncated echo, encoded).
  for (size_t align = 0; align < 3; ++align)
    for (bool url : {false, true})
      if (out.find(base64_of_value(kReal, align, url)) != std::string::npos)
        pj::fuzz::broken("the real value was released in base64");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = pj::fuzz::bytes(data, size);
  // The first bytes are the sizes of the pieces, used in turn.
  std::string steps;
  for (size_t n = pj::fuzz::take_byte(in) % 8 + 1; n > 0 && !in.empty(); --n)
    steps.push_back(static_cast<char>(pj::fuzz::take_byte(in)));
  Masker m(bindings());
  std::string streamed;
  for (size_t i = 0; !in.empty(); ++i) {
    size_t step = static_cast<uint8_t>(steps[i % steps.size()]) + 1;
    streamed += m.feed(in.substr(0, step));
    in.remove_prefix(std::min(step, in.size()));
  }
  streamed += m.finish();
  check(streamed);
  Masker whole(bindings());
  check(whole.mask(pj::fuzz::bytes(data, size)));
  return 0;
}
