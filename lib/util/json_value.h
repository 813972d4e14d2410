// A strict RFC 8259 JSON document model, for reading JSON that the jail
// could have written (DESIGN property 6) and writing it back the way Pi does.
//
// parse() accepts exactly RFC 8259 and fails cleanly, naming line:column,
// on anything else: invalid UTF-8, a lone surrogate in a \u escape, a raw
// control character in a string, a trailing comma, a comment, NaN or
// Infinity, a byte order mark, a duplicate key, nesting deeper than
// kMaxDepth. It never recurses deeper than kMaxDepth and allocates at most
// a small multiple of the input, so the caller bounds the work by capping
// the input size.
//
// stringify() writes what Node's JSON.stringify(value, null, 2) writes for
// the same data, byte for byte, with one deliberate difference: a number is
// written as it was read ("1.0" stays "1.0", where Node writes "1"), so a
// value we pass through is never altered. Every number JSON.stringify
// writes is already in that form, so a file Pi wrote comes back unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "result.h"

namespace pj::util::json {

// Deeper than this many nested arrays/objects is an error. Pi's files
// nest four levels at most.
inline constexpr size_t kMaxDepth = 64;

class Value;
struct Member;
using Array = std::vector<Value>;
// Members in document order (JSON.stringify's order is derived from it,
// see stringify). Keys are unique: parse() refuses duplicates.
using Object = std::vector<Member>;

// A number as its JSON text ("-12.5e3"), always valid RFC 8259 grammar.
class Number {
public:
  // Fails unless `text` is exactly one RFC 8259 number.
  static Result<Number> from_text(std::string_view text);
  static Number from_int(std::int64_t n);

  const std::string& text() const { return text_; }
  // Whether the value is an integer (1, 1.0, 1e3, -0), as Number.isInteger.
  bool is_integer() const;
  // Whether a JavaScript number holding it is finite and below 1e308 in
  // magnitude: "1e400" parses to Infinity in JavaScript.
  bool is_finite_double() const;
  // Exact decimal equality: 1 == 1.0 == 10e-1, 0 == -0.
  friend bool operator==(const Number& a, const Number& b);

private:
  explicit Number(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

enum class Type { null, boolean, number, string, array, object };

class Value {
public:
  Value() = default;  // null
  static Value boolean(bool b);
  static Value number(Number n);
  static Value string(std::string s);
  static Value array(Array a);
  static Value object(Object o);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_null() const { return type() == Type::null; }

  // The payload, or nullptr when the value is of another type.
  const bool* as_bool() const { return std::get_if<bool>(&v_); }
  const Number* as_number() const { return std::get_if<Number>(&v_); }
  const std::string* as_string() const { return std::get_if<std::string>(&v_); }
  const Array* as_array() const { return std::get_if<Array>(&v_); }
  const Object* as_object() const { return std::get_if<Object>(&v_); }
  Object* as_object() { return std::get_if<Object>(&v_); }

  // The member `key` of an object; nullptr when absent or not an object.
  // Linear: for repeated lookups in large objects use KeyIndex.
  const Value* find(std::string_view key) const;

  // Deep equality: same type; numbers by exact decimal value; strings by
  // bytes; arrays element by element; objects by the same keys with equal
  // values, in any order (JavaScript objects compare by content).
  friend bool operator==(const Value& a, const Value& b);

private:
  using Payload = std::variant<std::monostate, bool, Number, std::string, Array, Object>;
  explicit Value(Payload p);
  Payload v_;
};

struct Member {
  std::string key;
  Value value;
};

// Defined here, where Member is complete: building the variant needs it.
inline Value::Value(Payload p) : v_(std::move(p)) {}
inline Value Value::boolean(bool b) { return Value(Payload(b)); }
inline Value Value::number(Number n) { return Value(Payload(std::move(n))); }
inline Value Value::string(std::string s) { return Value(Payload(std::move(s))); }
inline Value Value::array(Array a) { return Value(Payload(std::move(a))); }
inline Value Value::object(Object o) { return Value(Payload(std::move(o))); }

// The members of an object sorted by key, for O(log n) lookups in objects
// that hostile input can make large. Views into `object`, which must
// outlive the index and not change.
class KeyIndex {
public:
  explicit KeyIndex(const Object& object);
  const Value* find(std::string_view key) const;
  // The member itself (its position is `member - object.data()`).
  const Member* find_member(std::string_view key) const;

private:
  std::vector<const Member*> sorted_;
};

// Parse one JSON document. The error reads "line L, column C: reason";
// columns count characters from 1.
Result<Value> parse(std::string_view text);

// JSON.stringify(value, null, 2): two-space indent, "key": value, empty
// containers as [] and {}, no trailing newline; strings escape only '"',
// '\\' and control characters (\b \f \n \r \t, others as \u00xx), the rest
// (U+2028, non-ASCII) as UTF-8. Keys that are array indices ("0".."4294967294")
// come first in ascending order, then the rest in document order, as in a
// JavaScript object.
std::string stringify(const Value& value);

}  // namespace pj::util::json
