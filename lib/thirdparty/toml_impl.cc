// toml++'s compiled part, built into pi-jail instead of linking
// libtomlplusplus.so (issue 18): its documented single-TU mode, with
// TOML_HEADER_ONLY=0 set for every includer (meson.build).
#define TOML_IMPLEMENTATION 1
#include <toml++/toml.h>
