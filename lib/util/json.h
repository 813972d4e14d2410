// A small streaming JSON writer (objects, arrays, strings, numbers,
// booleans, null), for reports and `--json` output. Strings are escaped
// per RFC 8259 with json_escape (so any bytes give valid JSON); output is
// indented for people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pj::util {

class JsonWriter {
public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(std::int64_t n);
  JsonWriter& value(int n) { return value(static_cast<std::int64_t>(n)); }
  JsonWriter& value(std::uint64_t n);
  JsonWriter& value(bool b);
  JsonWriter& null();
  // key + value in one call.
  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  const std::string& str() const { return out_; }

private:
  void before_value();
  void newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

// How json_escape writes a string. display_safe: valid UTF-8 for any
// input, and nothing a terminal acts on: control characters (C0, DEL, C1)
// are escaped (\n, \u001b, \u0085...), each byte that does not start a
// valid UTF-8 character becomes \ufffd (see decode_utf8), valid multi-byte
// UTF-8 is kept. as_node: what Node's JSON.stringify writes for a string
// that is already valid UTF-8: only '"', '\\' and C0 are escaped, so a file
// Pi wrote comes back byte for byte.
enum class JsonEscaping { display_safe, as_node };

// `s` as a JSON string literal, quotes included.
std::string json_escape(std::string_view s, JsonEscaping how = JsonEscaping::display_safe);

}  // namespace pj::util
