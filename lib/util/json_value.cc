#include "json_value.h"

#include "json.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

namespace pj::util::json {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the RFC 8259 number at the start of `s`, or 0 when there is none:
//   number = [ "-" ] ( "0" / [1-9] *DIGIT ) [ "." 1*DIGIT ] [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ]
size_t number_length(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || !is_digit(s[i])) return 0;
  if (s[i] == '0') {
    ++i;
  } else {
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !is_digit(s[i])) return 0;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= s.size() || !is_digit(s[i])) return 0;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i;
}

// A number as sign * digits * 10^exp10 with no leading or trailing zero in
// `digits` (empty for zero, whose sign is dropped: -0 == 0).
struct Decimal {
  bool negative = false;
  std::string_view digits;  // a view into the number's text when it has no '.'
  std::string owned;        // otherwise the digits joined here
  std::int64_t exp10 = 0;

  std::string_view all() const { return owned.empty() ? digits : std::string_view(owned); }
};

// Exponents saturate here: both sides are Infinity or 0 in JavaScript long
// before, and the sum with a fraction's length (under 2^31) cannot overflow.
constexpr std::int64_t kExpLimit = std::int64_t{1} << 50;

Decimal decompose(std::string_view t) {
  Decimal d;
  size_t i = 0;
  if (t[i] == '-') {
    d.negative = true;
    ++i;
  }
  size_t int_begin = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  std::string_view int_part = t.substr(int_begin, i - int_begin);
  std::string_view frac_part;
  if (i < t.size() && t[i] == '.') {
    size_t b = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    frac_part = t.substr(b, i - b);
  }
  std::int64_t exp = 0;
  if (i < t.size()) {  // 'e' or 'E'
    ++i;
    bool neg = false;
    if (t[i] == '+' || t[i] == '-') neg = t[i++] == '-';
    for (; i < t.size(); ++i) exp = std::min(exp * 10 + (t[i] - '0'), kExpLimit);
    if (neg) exp = -exp;
  }
  d.exp10 = exp - static_cast<std::int64_t>(frac_part.size());
  if (frac_part.empty()) {
    d.digits = int_part;
  } else {
    d.owned.reserve(int_part.size() + frac_part.size());
    d.owned.append(int_part).append(frac_part);
  }
  std::string_view all = d.all();
  size_t lead = all.find_first_not_of('0');
  if (lead == std::string_view::npos) {
    d.negative = false;
    d.digits = {};
    d.owned.clear();
    d.exp10 = 0;
    return d;
  }
  size_t last = all.find_last_not_of('0');
  d.exp10 += static_cast<std::int64_t>(all.size() - 1 - last);
  std::string_view trimmed = all.substr(lead, last - lead + 1);
  if (d.owned.empty()) {
    d.digits = trimmed;
  } else {
    d.owned = std::string(trimmed);
  }
  return d;
}

}  // namespace

// ---- Number ----

Result<Number> Number::from_text(std::string_view text) {
  if (text.empty() || number_length(text) != text.size())
    return Error::invalid(fmt::format("\"{}\" is not a JSON number", text.substr(0, 40)));
  return Number(std::string(text));
}

Number Number::from_int(std::int64_t n) { return Number(fmt::format("{}", n)); }

bool Number::is_integer() const { return decompose(text_).exp10 >= 0; }

bool Number::is_finite_double() const {
  Decimal d = decompose(text_);
  if (d.all().empty()) return true;
  // The value is below 10^(exp10 + number of digits).
  return d.exp10 + static_cast<std::int64_t>(d.all().size()) <= 308;
}

bool operator==(const Number& a, const Number& b) {
  if (a.text_ == b.text_) return true;
  Decimal x = decompose(a.text_);
  Decimal y = decompose(b.text_);
  return x.negative == y.negative && x.exp10 == y.exp10 && x.all() == y.all();
}

// ---- Value ----

const Value* Value::find(std::string_view key) const {
  const Object* o = as_object();
  if (!o) return nullptr;
  for (const Member& m : *o)
    if (m.key == key) return &m.value;
  return nullptr;
}

KeyIndex::KeyIndex(const Object& object) {
  sorted_.reserve(object.size());
  for (const Member& m : object) sorted_.push_back(&m);
  std::sort(sorted_.begin(), sorted_.end(), [](const Member* a, const Member* b) { return a->key < b->key; });
}

const Value* KeyIndex::find(std::string_view key) const {
  const Member* m = find_member(key);
  return m ? &m->value : nullptr;
}

const Member* KeyIndex::find_member(std::string_view key) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), key,
                             [](const Member* m, std::string_view k) { return m->key < k; });
  if (it == sorted_.end() || (*it)->key != key) return nullptr;
  return *it;
}

bool operator==(const Value& a, const Value& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::null: return true;
    case Type::boolean: return *a.as_bool() == *b.as_bool();
    case Type::number: return *a.as_number() == *b.as_number();
    case Type::string: return *a.as_string() == *b.as_string();
    case Type::array: return *a.as_array() == *b.as_array();
    case Type::object: {
      const Object& x = *a.as_object();
      const Object& y = *b.as_object();
      if (x.size() != y.size()) return false;
      // Keys are unique (parse refuses duplicates), so equal sizes and every
      // member of x found equal in y means the same set.
      KeyIndex yi(y);
      for (const Member& m : x) {
        const Value* other = yi.find(m.key);
        if (!other || !(m.value == *other)) return false;
      }
      return true;
    }
  }
  return false;
}

// ---- parse ----

namespace {

class Parser {
public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<Value> document() {
    skip_ws();
    auto v = value(0);
    if (!v) return v;
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected content after the JSON value");
    return v;
  }

private:
  Error fail(std::string_view reason) const {
    // Columns count characters: every byte that does not continue a UTF-8 sequence.
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i)
      if (s_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    size_t column = 1;
    for (size_t i = line_start; i < pos_ && i < s_.size(); ++i)
      if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) ++column;
    return Error::invalid(fmt::format("line {}, column {}: {}", line, column, reason));
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  Result<Value> value(size_t depth) {
    if (at_end()) return fail("unexpected end of input, expected a value");
    char c = peek();
    switch (c) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': {
        auto s = string();
        if (!s) return s.take_error();
        return Value::string(std::move(*s));
      }
      case 't': return literal("true", Value::boolean(true));
      case 'f': return literal("false", Value::boolean(false));
      case 'n': return literal("null", Value());
      default: break;
    }
    if (c == '-' || is_digit(c)) {
      size_t n = number_length(s_.substr(pos_));
      if (n == 0) return fail("invalid number");
      auto num = Number::from_text(s_.substr(pos_, n));
      pos_ += n;
      return Value::number(std::move(*num));
    }
    if (c == '/') return fail("comments are not JSON");
    if (static_cast<unsigned char>(c) == 0xEF && s_.substr(pos_, 3) == "\xEF\xBB\xBF")
      return fail("a byte order mark is not JSON");
    return fail("unexpected character, expected a value");
  }

  Result<Value> literal(std::string_view word, Value v) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return v;
  }

  Result<Value> array(size_t depth) {
    if (depth > kMaxDepth) return fail(fmt::format("nested deeper than {} levels", kMaxDepth));
    ++pos_;  // '['
    Array items;
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Value::array(std::move(items));
    }
    for (;;) {
      skip_ws();
      if (!at_end() && peek() == ']') return fail("trailing comma in an array");
      auto v = value(depth);
      if (!v) return v;
      items.push_back(std::move(*v));
      skip_ws();
      if (at_end()) return fail("unexpected end of input in an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value::array(std::move(items));
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  Result<Value> object(size_t depth) {
    if (depth > kMaxDepth) return fail(fmt::format("nested deeper than {} levels", kMaxDepth));
    ++pos_;  // '{'
    Object members;
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Value::object(std::move(members));
    }
    std::vector<size_t> key_positions;  // where each member's key starts, for the duplicate's error
    for (;;) {
      skip_ws();
      if (at_end()) return fail("unexpected end of input in an object");
      if (peek() == '}') return fail("trailing comma in an object");
      if (peek() != '"') return fail("expected a string key in an object");
      key_positions.push_back(pos_);
      auto key = string();
      if (!key) return key.take_error();
      skip_ws();
      if (at_end() || peek() != ':') return fail("expected ':' after an object key");
      ++pos_;
      skip_ws();
      auto v = value(depth);
      if (!v) return v;
      members.push_back(Member{std::move(*key), std::move(*v)});
      skip_ws();
      if (at_end()) return fail("unexpected end of input in an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        if (auto dup = duplicate(members)) {
          pos_ = key_positions[*dup];
          return fail("duplicate key in an object");
        }
        return Value::object(std::move(members));
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  // Duplicate keys are refused. RFC 8259 leaves their meaning open and
  // JSON.parse keeps the last one: a reader that kept another would check
  // one value while Pi uses a different one. Refusing leaves a file only one
  // reading. Returns the index of the later of two equal keys, in O(n log n).
  static std::optional<size_t> duplicate(const Object& members) {
    std::vector<size_t> order(members.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return members[a].key < members[b].key; });
    for (size_t i = 1; i < order.size(); ++i)
      if (members[order[i]].key == members[order[i - 1]].key) return order[i];
    return std::nullopt;
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Four hex digits after "\u" at pos_; advances past them.
  Result<std::uint32_t> hex4() {
    if (s_.size() - pos_ < 4) return fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_];
      std::uint32_t d;
      if (is_digit(c))
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail("invalid hex digit in a \\u escape");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // The length of the well-formed UTF-8 sequence at pos_ (Unicode 15, table
  // 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), or 0.
  size_t utf8_length() const {
    auto b = [&](size_t i) { return static_cast<unsigned char>(s_[pos_ + i]); };
    size_t left = s_.size() - pos_;
    unsigned char c = b(0);
    auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
      return i < left && b(i) >= lo && b(i) <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  Result<std::string> string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) return fail("control character in a string (it must be escaped)");
      if (c == '\\') {
        ++pos_;
        if (at_end()) return fail("unterminated escape");
        char e = peek();
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            size_t esc = pos_ - 2;
            auto hi = hex4();
            if (!hi) return hi.take_error();
            std::uint32_t cp = *hi;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
              pos_ = esc;
              return fail("lone low surrogate in a \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(pos_, 2) != "\\u") {
                pos_ = esc;
                return fail("lone high surrogate in a \\u escape");
              }
              pos_ += 2;
              auto lo = hex4();
              if (!lo) return lo.take_error();
              if (*lo < 0xDC00 || *lo > 0xDFFF) {
                pos_ = esc;
                return fail("lone high surrogate in a \\u escape");
              }
              cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
            }
            put_utf8(out, cp);
            break;
          }
          default: --pos_; return fail("invalid escape in a string");
        }
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      size_t n = utf8_length();
      if (n == 0) return fail("invalid UTF-8 in a string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<Value> parse(std::string_view text) { return Parser(text).document(); }

// ---- stringify ----

namespace {

void put_string(std::string& out, std::string_view s) { out += json_escape(s, JsonEscaping::as_node); }

// An array index as ECMAScript orders object keys: the canonical decimal
// form of an integer below 2^32 - 1.
bool array_index(std::string_view k, std::uint64_t& out) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  std::uint64_t v = 0;
  for (char c : k) {
    if (!is_digit(c)) return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v >= 4294967295u) return false;
  out = v;
  return true;
}

// Members in the order a JavaScript object enumerates them.
std::vector<const Member*> js_order(const Object& o) {
  std::vector<std::pair<std::uint64_t, const Member*>> indices;
  std::vector<const Member*> rest;
  for (const Member& m : o) {
    std::uint64_t i;
    if (array_index(m.key, i))
      indices.emplace_back(i, &m);
    else
      rest.push_back(&m);
  }
  std::sort(indices.begin(), indices.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Member*> out;
  out.reserve(o.size());
  for (const auto& [i, m] : indices) out.push_back(m);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

void put_value(std::string& out, const Value& v, size_t indent) {
  auto newline = [&](size_t level) {
    out += '\n';
    out.append(level * 2, ' ');
  };
  switch (v.type()) {
    case Type::null: out += "null"; return;
    case Type::boolean: out += *v.as_bool() ? "true" : "false"; return;
    case Type::number: out += v.as_number()->text(); return;
    case Type::string: put_string(out, *v.as_string()); return;
    case Type::array: {
      const Array& a = *v.as_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        newline(indent + 1);
        put_value(out, a[i], indent + 1);
      }
      newline(indent);
      out += ']';
      return;
    }
    case Type::object: {
      const Object& o = *v.as_object();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const Member* m : js_order(o)) {
        if (!first) out += ',';
        first = false;
        newline(indent + 1);
        put_string(out, m->key);
        out += ": ";
        put_value(out, m->value, indent + 1);
      }
      newline(indent);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string stringify(const Value& value) {
  std::string out;
  put_value(out, value, 0);
  return out;
}

}  // namespace pj::util::json
