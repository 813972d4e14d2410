// Random numbers from the kernel, for names others must not guess
// (staging directories, temporary files).
#pragma once

#include <cstdint>

namespace pj::util {

// 64 bits from getentropy(3) (Linux: one getrandom(2) call). Unlike
// std::random_device, which probes the CPU (cpuid, costly under a
// hypervisor) on every construction. Aborts if the kernel's source is
// gone: there is nothing safe to return.
std::uint64_t random_u64();

}  // namespace pj::util
