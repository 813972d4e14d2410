#!/usr/bin/env python3
"""Validate a JSON document against the subset of JSON Schema (draft-07)
that pi-jail's schemas use: type (incl. lists), enum, required,
properties, additionalProperties: false, items, oneOf. Exit 0 when valid; print
every problem otherwise. Unknown schema keywords are an error, so the
schema cannot silently ask for more than this checks."""
import json
import sys

KNOWN = {"$schema", "title", "description", "type", "enum", "required", "properties",
         "additionalProperties", "items", "oneOf"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def type_ok(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def check(value, schema, where, problems):
    unknown = set(schema) - KNOWN
    if unknown:
        problems.append(f"{where}: schema uses unsupported keywords {sorted(unknown)}")
    if "oneOf" in schema:
        results = []
        for alt in schema["oneOf"]:
            alt_problems = []
            check(value, alt, where, alt_problems)
            results.append(alt_problems)
        matching = sum(1 for r in results if not r)
        if matching != 1:
            problems.append(f"{where}: matches {matching} of the oneOf alternatives (exactly one must match)")
            if matching == 0:
                for i, r in enumerate(results):
                    problems.extend(f"  alternative {i}: {p}" for p in r)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(type_ok(value, n) for n in names):
            problems.append(f"{where}: expected {names}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{where}: missing required {key!r}")
        props = schema.get("properties", {})
        for key, sub in value.items():
            if key in props:
                check(sub, props[key], f"{where}.{key}", problems)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: unexpected property {key!r}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(item, schema["items"], f"{where}[{i}]", problems)


def main():
    schema = json.load(open(sys.argv[1]))
    doc = json.load(open(sys.argv[2]))
    problems = []
    check(doc, schema, "$", problems)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
