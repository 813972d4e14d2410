#include "policy/toml_text.h"

#include <algorithm>
#include <string>

namespace pj::policy {

namespace {

struct Scan {
  std::string_view text;
  size_t at = 0;
  int line = 1;
  size_t line_start = 0;

  void newline_at(size_t i) { ++line, line_start = i + 1; }
  int column(size_t i) const {
    int n = 1;
    for (size_t k = line_start; k < i; ++k)
      if ((static_cast<unsigned char>(text[k]) & 0xC0) != 0x80) ++n;  // not a UTF-8 continuation byte
    return n;
  }

  // Whether the backslash at `at` is followed by a byte past ASCII, then
  // at it: no escape is one, and toml++ reads it as whitespace (also
  // after a line-ending backslash, at the blanks and lines it skips).
  bool after_backslash_is_non_ascii() {
    size_t i = at + 1;
    if (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
        if (text[i] == '\n') newline_at(i);
        ++i;
      }
    if (i >= text.size() || static_cast<unsigned char>(text[i]) < 0x80) return false;
    at = i;
    return true;
  }

  // Past the string that starts at `at` ("...", '...', """...""" or
  // '''...'''). A single-line string ends at its line's end at the
  // latest: toml++ reports it unterminated.
  void skip_string() {
    const char q = text[at];
    const std::string three(3, q);
    const bool multi = text.substr(at, 3) == three;
    at += multi ? 3 : 1;
    while (at < text.size()) {
      const char c = text[at];
      if (c == '\\' && q == '"' && after_backslash_is_non_ascii()) return;
      if (c == '\\' && q == '"') {  // an escape: the next byte is never the end
        if (at + 1 < text.size() && text[at + 1] == '\n') newline_at(at + 1);
        at += 2;
      } else if (c == '\n') {
        if (!multi) return;
        newline_at(at++);
      } else if (c == q && (!multi || text.substr(at, 3) == three)) {
        at += multi ? 3 : 1;
        // """a"""" is the string a" (up to two quotes before the end).
        for (int extra = 0; multi && extra < 2 && at < text.size() && text[at] == q; ++extra) ++at;
        return;
      } else {
        ++at;
      }
    }
  }
};

}  // namespace

std::optional<TextPosition> non_ascii_outside_strings(std::string_view text) {
  Scan s{text};
  // The last byte outside a string and blanks: a quote opens a string
  // only where TOML has a key or a value (after a line start, '=', '[',
  // ',', '{' or a dotted key's '.'); toml++ reads any other quote as part
  // of a value ("-\"x\""), and what follows it as well.
  char last = '\n';
  // Inside a bare value (a number, a boolean, a date, or anything
  // malformed that starts in a value's place): toml++ reads it up to a
  // blank, ',', ']', '}', '#', '=' or a line's end, quotes and brackets
  // included, so no string opens inside it.
  bool bare = false, bare_value = false;  // bare_value: it began where only a value goes, never a key
  std::string nest;                       // the open arrays ('[') and inline tables ('{')
  while (s.at < text.size()) {
    const char c = text[s.at];
    // An '=' ending a value is more of that malformed value to toml++.
    bool swallowed = false;
    if (bare && std::string_view(" \t\r\n,]}#=").find(c) != std::string_view::npos) {
      bare = false;
      swallowed = c == '=' && bare_value;
    }
    if (c == '\n') {
      s.newline_at(s.at++);
      last = c;
    } else if (c == '#') {
      s.at = std::min(text.size(), text.find('\n', s.at));
    } else if (!bare && (c == '"' || c == '\'') && std::string_view("\n=[,{.").find(last) != std::string_view::npos) {
      s.skip_string();
      last = c;
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return TextPosition{s.line, s.column(s.at)};
    } else {
      if (!bare && std::string_view("=[,").find(last) != std::string_view::npos &&
          std::string_view(" \t\r[{").find(c) == std::string_view::npos) {
        bare = true;
        bare_value = last != ',' || (!nest.empty() && nest.back() == '[');
      }
      if (!bare && (c == '[' || c == '{')) nest.push_back(c);
      if ((c == ']' || c == '}') && !nest.empty() && nest.back() == (c == ']' ? '[' : '{')) nest.pop_back();
      if (swallowed)
        last = '0';
      else if (c != ' ' && c != '\t')
        last = c;
      ++s.at;
    }
  }
  return std::nullopt;
}

}  // namespace pj::policy
