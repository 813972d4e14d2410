// Bytes the jail controls, on their way to a terminal (util::printable)
// and into JSON (util::json_escape): control characters become visible
// escapes, invalid UTF-8 never passes through, valid UTF-8 stays as is.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "util/escape.h"
#include "util/json.h"

using namespace pj::util;
using namespace std::string_literals;

namespace {

struct Case {
  std::string what;
  std::string in;
  std::string out;
};

}  // namespace

TEST_CASE("printable: control bytes and invalid UTF-8 become visible escapes") {
  const Case cases[] = {
      {"plain ASCII", "api.example.com", "api.example.com"},
      {"empty", "", ""},
      {"ESC (a terminal control sequence)", "\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07"},
      {"CR and LF (a forged line)", "a\r\nb", "a\\r\\nb"},
      {"TAB", "a\tb", "a\\tb"},
      {"NUL", "a\0b"s, "a\\x00b"},
      {"DEL",
       "a\x7f"
       "b",
       "a\\x7fb"},
      {"backslash kept (the result is its own image)", "a\\x1b\\", "a\\x1b\\"},
      {"C1 CSI as UTF-8 (U+009B)",
       "a\xc2\x9b"
       "31m",
       "a\\u009b31m"},
      {"C1 NEL as UTF-8 (U+0085)", "\xc2\x85", "\\u0085"},
      {"a raw C1 byte (invalid UTF-8)",
       "a\x9b"
       "31m",
       "a\\x9b31m"},
      {"valid two-byte UTF-8", "caf\xc3\xa9", "caf\xc3\xa9"},
      {"valid three-byte UTF-8", "\xe2\x82\xac", "\xe2\x82\xac"},
      {"valid four-byte UTF-8", "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      {"overlong slash", "\xc0\xaf", "\\xc0\\xaf"},
      {"overlong three-byte", "\xe0\x80\xaf", "\\xe0\\x80\\xaf"},
      {"UTF-16 surrogate in UTF-8", "\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"beyond U+10FFFF", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"byte above 0xF4", "\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80"},
      {"0xFF", "\xff", "\\xff"},
      {"truncated sequence at the end", "ab\xe2\x82", "ab\\xe2\\x82"},
      {"truncated sequence before ASCII", "\xe2\x82z", "\\xe2\\x82z"},
      {"lone continuation byte", "\x80", "\\x80"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    CHECK(printable(c.in) == c.out);
    CHECK(printable(c.out) == c.out);  // escaping twice changes nothing
  }
}

TEST_CASE("json_escape: valid JSON for any bytes; invalid UTF-8 becomes U+FFFD") {
  const Case cases[] = {
      {"plain", "abc", "\"abc\""},
      {"quote and backslash", "a\"b\\c", "\"a\\\"b\\\\c\""},
      {"newline, CR, TAB", "\n\r\t", "\"\\n\\r\\t\""},
      {"ESC and NUL", "\x1b\0"s, "\"\\u001b\\u0000\""},
      {"DEL", "\x7f", "\"\\u007f\""},
      {"C1 as UTF-8 (U+009B)", "\xc2\x9b", "\"\\u009b\""},
      {"valid two-byte UTF-8", "caf\xc3\xa9", "\"caf\xc3\xa9\""},
      {"valid three-byte UTF-8", "\xe2\x82\xac", "\"\xe2\x82\xac\""},
      {"valid four-byte UTF-8", "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},
      {"highest code point U+10FFFF", "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\""},
      {"a raw C1 byte", "\x9b", "\"\\ufffd\""},
      {"lone continuation byte", "a\x80z", "\"a\\ufffdz\""},
      {"overlong NUL", "\xc0\x80", "\"\\ufffd\\ufffd\""},
      {"overlong slash (three bytes)", "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""},
      {"overlong (four bytes)", "\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
      {"high surrogate in UTF-8", "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},
      {"low surrogate in UTF-8", "\xed\xbf\xbf", "\"\\ufffd\\ufffd\\ufffd\""},
      {"beyond U+10FFFF", "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
      {"byte 0xF5", "\xf5", "\"\\ufffd\""},
      {"byte 0xFF", "\xff", "\"\\ufffd\""},
      {"truncated at the end", "\xe2\x82", "\"\\ufffd\\ufffd\""},
      {"truncated before ASCII", "\xf0\x9f\x98z", "\"\\ufffd\\ufffd\\ufffdz\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    CHECK(json_escape(c.in) == c.out);
  }
}

TEST_CASE("json_escape as Node: only quote, backslash and C0 are escaped, as JSON.stringify does") {
  const Case cases[] = {
      {"quote and backslash", "a\"b\\c", "\"a\\\"b\\\\c\""},
      {"BS, FF, NL, CR, TAB", "\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\""},
      {"ESC and NUL", "\x1b\0"s, "\"\\u001b\\u0000\""},
      {"DEL is kept", "\x7f", "\"\x7f\""},
      {"C1 as UTF-8 is kept", "\xc2\x9b", "\"\xc2\x9b\""},
      {"U+2028 is kept", "\xe2\x80\xa8", "\"\xe2\x80\xa8\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    CHECK(json_escape(c.in, JsonEscaping::as_node) == c.out);
  }
}
