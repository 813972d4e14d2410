// The JSON document model: strict parsing, Node-identical output, and
// hostile input that must fail cleanly.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "util/json_value.h"

using namespace pj::util;
namespace json = pj::util::json;

namespace {

struct RoundTrip {
  const char* input;
  const char* node;  // JSON.stringify(JSON.parse(input), null, 2), from Node 20
};

// The expected column is what Node 20 printed for each input (see the
// report of the commit that added this table).
const RoundTrip kRoundTrips[] = {
    {"{}", "{}"},
    {"[]", "[]"},
    {R"({"a":[],"b":{}})", "{\n  \"a\": [],\n  \"b\": {}\n}"},
    {"null", "null"},
    {"true", "true"},
    {"false", "false"},
    {R"("x")", R"("x")"},
    {"0", "0"},
    {"1712345678901", "1712345678901"},
    {"-12.5", "-12.5"},
    {R"({"name":"Zoë","emoji":"\ud83d\ude00","raw":"😀"})",
     "{\n  \"name\": \"Zoë\",\n  \"emoji\": \"😀\",\n  \"raw\": \"😀\"\n}"},
    {R"({"esc":"\"\\\/\b\f\n\r\t","ctl":"\u0001\u001f\u007f","ls":"\u2028\u2029"})",
     "{\n  \"esc\": \"\\\"\\\\/\\b\\f\\n\\r\\t\",\n  \"ctl\": \"\\u0001\\u001f\x7f\",\n"
     "  \"ls\": \"\xe2\x80\xa8\xe2\x80\xa9\"\n}"},
    {R"({"upper":"\u00E9\u00c9"})", "{\n  \"upper\": \"éÉ\"\n}"},
    // Array-index keys first, ascending; then the rest in document order.
    {R"({"b":1,"a":2,"10":3,"2":4,"01":5,"-1":6,"4294967294":7,"4294967295":8})",
     "{\n  \"2\": 4,\n  \"10\": 3,\n  \"4294967294\": 7,\n  \"b\": 1,\n  \"a\": 2,\n  \"01\": 5,\n"
     "  \"-1\": 6,\n  \"4294967295\": 8\n}"},
    {R"([1,[2,[3,{"x":[{}]}]],"s"])",
     "[\n  1,\n  [\n    2,\n    [\n      3,\n      {\n        \"x\": [\n          {}\n        ]\n      }\n"
     "    ]\n  ],\n  \"s\"\n]"},
    {R"({"anthropic":{"type":"oauth","refresh":"r","access":"a","expires":1712345678901},"openai":{"type":"api_key","key":"sk-1"}})",
     "{\n  \"anthropic\": {\n    \"type\": \"oauth\",\n    \"refresh\": \"r\",\n    \"access\": \"a\",\n"
     "    \"expires\": 1712345678901\n  },\n  \"openai\": {\n    \"type\": \"api_key\",\n    \"key\": \"sk-1\"\n  "
     "}\n}"},
    {" \t\r\n{ \"a\" : [ 1 , 2 ] } \n", "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
    {R"({"":""})", "{\n  \"\": \"\"\n}"},
    {R"({"nul":"\u0000"})", "{\n  \"nul\": \"\\u0000\"\n}"},
};

}  // namespace

TEST_CASE("stringify writes what Node's JSON.stringify(v, null, 2) writes") {
  for (const auto& t : kRoundTrips) {
    CAPTURE(t.input);
    auto v = json::parse(t.input);
    REQUIRE_MESSAGE(v.ok(), (v.ok() ? "" : v.error().message()));
    CHECK(json::stringify(*v) == t.node);
    // And Node's output reads back as the same value.
    auto again = json::parse(json::stringify(*v));
    REQUIRE(again);
    CHECK(*again == *v);
  }
}

TEST_CASE("numbers keep the text they were written with, and compare by value") {
  for (const char* text : {"-0", "1e3", "12.5E-3", "1.0", "100000000000000000000000"}) {
    auto v = json::parse(text);
    REQUIRE(v);
    CHECK(json::stringify(*v) == text);
  }
  auto num = [](const char* t) { return *json::parse(t); };
  CHECK(num("1") == num("1.0"));
  CHECK(num("1") == num("10e-1"));
  CHECK(num("100") == num("1e2"));
  CHECK(num("0") == num("-0.000"));
  CHECK_FALSE(num("1") == num("-1"));
  CHECK_FALSE(num("1") == num("1.0000000000000000000001"));
  CHECK(num("1e2").as_number()->is_integer());
  CHECK(num("1.0").as_number()->is_integer());
  CHECK_FALSE(num("1.5").as_number()->is_integer());
  CHECK_FALSE(num("15e-1").as_number()->is_integer());
  CHECK(num("1712345678901").as_number()->is_finite_double());
  CHECK(num("1.7e307").as_number()->is_finite_double());
  CHECK_FALSE(num("1e400").as_number()->is_finite_double());
  CHECK_FALSE(num("1e99999999999999999999999").as_number()->is_finite_double());
  CHECK(num("1e-99999999999999999999999").as_number()->is_finite_double());
  CHECK(json::Number::from_int(-42).text() == "-42");
  CHECK_FALSE(json::Number::from_text("01").ok());
  CHECK_FALSE(json::Number::from_text("1.").ok());
  CHECK_FALSE(json::Number::from_text("").ok());
}

TEST_CASE("objects keep their key order and compare regardless of it") {
  auto a = json::parse(R"({"z":1,"a":{"y":[1,2],"x":null}})");
  auto b = json::parse(R"({"a":{"x":null,"y":[1,2]},"z":1.0})");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
  CHECK(a->as_object()->front().key == "z");
  CHECK(a->find("a")->find("y")->as_array()->size() == 2);
  CHECK(a->find("nope") == nullptr);
  auto c = json::parse(R"({"z":1,"a":{"y":[2,1],"x":null}})");
  CHECK_FALSE(*a == *c);
  auto d = json::parse(R"({"z":1,"a":{"y":[1,2],"x":null},"extra":0})");
  CHECK_FALSE(*a == *d);
  CHECK_FALSE(json::Value() == json::Value::boolean(false));
  json::KeyIndex index(*a->as_object());
  CHECK(index.find("z") != nullptr);
  CHECK(index.find("y") == nullptr);
}

namespace {

struct Bad {
  std::string input;
  const char* error;  // what the message must contain
};

std::vector<Bad> bad_inputs() {
  return {
      {"", "line 1, column 1: unexpected end of input"},
      {"   ", "line 1, column 4"},
      {"[1,]", "line 1, column 4: trailing comma in an array"},
      {R"({"a":1,})", "line 1, column 8: trailing comma in an object"},
      {"{\"a\":1,\n \"a\":2}", "line 2, column 2: duplicate key"},
      {"// c\n{}", "comments are not JSON"},
      {"{} /* c */", "unexpected content after the JSON value"},
      {"NaN", "expected a value"},
      {"-Infinity", "invalid number"},
      {"[01]", "expected ',' or ']'"},
      {"1.", "invalid number"},
      {".5", "expected a value"},
      {"+1", "expected a value"},
      {"tru", "invalid literal"},
      {"{'a':1}", "expected a string key"},
      {"{\"a\" 1}", "expected ':'"},
      {"\"abc", "unterminated string"},
      {"\"a\tb\"", "control character in a string"},
      {"\"a\nb\"", "control character in a string"},
      {R"("\x")", "invalid escape"},
      {R"("\u12")", "truncated \\u escape"},
      {R"("\u12g4")", "invalid hex digit"},
      {R"("\ud800")", "lone high surrogate"},
      {R"("\ud800\u0041")", "lone high surrogate"},
      {R"("\udc00")", "lone low surrogate"},
      {"\"\xff\"", "invalid UTF-8"},
      {"\"\xc0\xaf\"", "invalid UTF-8"},                          // overlong '/'
      {"\"\xe0\x80\xaf\"", "invalid UTF-8"},                      // overlong, 3 bytes
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},                      // an encoded surrogate
      {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},                  // above U+10FFFF
      {"\"\xe2\x82\"", "invalid UTF-8"},                          // truncated
      {"\"Zo\xc3\xab\xff\"", "line 1, column 5: invalid UTF-8"},  // columns count characters
      {"\xef\xbb\xbf{}", "byte order mark"},
      {std::string("{\"a\":1}\0", 8), "unexpected content"},
      {"[1 2]", "expected ',' or ']'"},
      {"\x0c[]", "expected a value"},  // form feed is not JSON whitespace
  };
}

}  // namespace

TEST_CASE("parse refuses what RFC 8259 does not allow, naming line and column") {
  for (const auto& b : bad_inputs()) {
    CAPTURE(b.input);
    auto r = json::parse(b.input);
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.error().message().find(b.error) != std::string::npos, r.error().message());
  }
}

TEST_CASE("hostile input fails cleanly: deep nesting, huge strings, many keys") {
  SUBCASE("100000 '[' fail at the depth limit, without recursing further") {
    auto r = json::parse(std::string(100000, '['));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("nested deeper than 64") != std::string::npos);
    auto objs = std::string();
    for (int i = 0; i < 100000; ++i) objs += "{\"a\":";
    CHECK_FALSE(json::parse(objs).ok());
  }
  SUBCASE("64 levels parse; 65 do not") {
    CHECK(json::parse(std::string(64, '[') + std::string(64, ']')).ok());
    CHECK_FALSE(json::parse(std::string(65, '[') + std::string(65, ']')).ok());
  }
  SUBCASE("a 1 MiB string parses; with one bad byte at the end it fails") {
    std::string big = "\"" + std::string(1 << 20, 'x') + "\"";
    auto ok = json::parse(big);
    REQUIRE(ok);
    CHECK(ok->as_string()->size() == (1u << 20));
    big[big.size() - 2] = '\x80';
    CHECK_FALSE(json::parse(big).ok());
    CHECK_FALSE(json::parse(std::string(1 << 20, '"')).ok());
  }
  SUBCASE("100000 keys: found duplicates and compared without quadratic work") {
    std::string s = "{";
    for (int i = 0; i < 100000; ++i) s += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    std::string dup = s + "\"k5\":0}";
    s += "\"end\":0}";
    auto v = json::parse(s);
    REQUIRE(v);
    CHECK(*v == *v);
    auto d = json::parse(dup);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().message().find("duplicate key") != std::string::npos);
  }
}
