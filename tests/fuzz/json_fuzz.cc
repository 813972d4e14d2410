// The strict JSON parser (files the jail wrote): what it accepts,
// stringify() writes back so that it parses to the same value.
#include "fuzz.h"
#include "util/json_value.h"

using namespace pj::util;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto v = json::parse(pj::fuzz::bytes(data, size));
  if (!v) return 0;
  const std::string text = json::stringify(*v);
  auto again = json::parse(text);
  if (!again) pj::fuzz::broken("stringify() wrote what parse() refuses");
  if (!(*again == *v)) pj::fuzz::broken("stringify() and parse() do not round-trip");
  if (json::stringify(*again) != text) pj::fuzz::broken("stringify() is not stable");
  return 0;
}
