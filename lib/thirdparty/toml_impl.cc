// toml++'s compiled part, built into pi-jail instead of linking
// libtomlplusplus.so (one less shared library to load at every start):
// its documented single-TU mode, with TOML_HEADER_ONLY=0 set for every
// includer (meson.build).
//
// toml++ 3.3 asserts, rather than reports, on some malformed keys
// (parser.inl parse_key: a project's jail.toml can reach it). Without
// NDEBUG (the sanitizer build) that assertion aborts the run; with NDEBUG
// and clang it becomes __builtin_assume, undefined behaviour on hostile
// input. Debian's libtomlplusplus.so (GCC, NDEBUG) skipped it, and the
// parser then reports the error: the same here, in every build.
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#define TOML_IMPLEMENTATION 1
#include "toml.h"
