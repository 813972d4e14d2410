// Landlock as a second filesystem layer, derived from the same mount list
// as the view: read-only grants get read and execute rights, writable ones
// every right the kernel handles. If a mount were ever wider than
// intended, Landlock still holds the line (and the reverse).
//
// Landlock rights add up along a path (a rule covers everything beneath
// it, across mounts): below a writable rule (/tmp, the workspace) a
// read-only mount is enforced by the mount layer alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "linuxjail/spec.h"

namespace pj::linuxjail {

// Landlock's access rights (linux/landlock.h), defined here because the
// installed kernel headers predate ABI 3-6.
namespace ll {
inline constexpr std::uint64_t kExecute = 1ULL << 0;
inline constexpr std::uint64_t kWriteFile = 1ULL << 1;
inline constexpr std::uint64_t kReadFile = 1ULL << 2;
inline constexpr std::uint64_t kReadDir = 1ULL << 3;
inline constexpr std::uint64_t kRemoveDir = 1ULL << 4;
inline constexpr std::uint64_t kRemoveFile = 1ULL << 5;
inline constexpr std::uint64_t kMakeChar = 1ULL << 6;
inline constexpr std::uint64_t kMakeDir = 1ULL << 7;
inline constexpr std::uint64_t kMakeReg = 1ULL << 8;
inline constexpr std::uint64_t kMakeSock = 1ULL << 9;
inline constexpr std::uint64_t kMakeFifo = 1ULL << 10;
inline constexpr std::uint64_t kMakeBlock = 1ULL << 11;
inline constexpr std::uint64_t kMakeSym = 1ULL << 12;
inline constexpr std::uint64_t kRefer = 1ULL << 13;             // ABI 2
inline constexpr std::uint64_t kTruncate = 1ULL << 14;          // ABI 3
inline constexpr std::uint64_t kIoctlDev = 1ULL << 15;          // ABI 5
inline constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
inline constexpr std::uint64_t kScopeSignal = 1ULL << 1;        // ABI 6
// Rights that apply to a file (not a directory) rule.
inline constexpr std::uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
inline constexpr std::uint64_t kRead = kExecute | kReadFile | kReadDir;
}  // namespace ll

// The fs rights a kernel of Landlock ABI `abi` handles (0: none).
std::uint64_t landlock_handled_fs(int abi);
// The scopes it handles (abstract unix sockets, signals).
std::uint64_t landlock_scopes(int abi);

// Rules for every path the view exposes, by destination inside the jail.
// `read_only_overrides`: mount destinations whose rule is read-only even
// though the mount is writable (a test aid; it only ever narrows). Rights
// add up along a path, so only a whole mount can be narrowed.
std::vector<LandlockRule> landlock_rules(const std::vector<MountOp>& mounts,
                                         const std::vector<std::string>& read_only_overrides);

}  // namespace pj::linuxjail
