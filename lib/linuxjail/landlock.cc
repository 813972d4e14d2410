#include "linuxjail/landlock.h"

#include <algorithm>

namespace pj::linuxjail {

std::uint64_t landlock_handled_fs(int abi) {
  if (abi < 1) return 0;
  std::uint64_t h = (ll::kMakeSym << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) h |= ll::kRefer;
  if (abi >= 3) h |= ll::kTruncate;
  if (abi >= 5) h |= ll::kIoctlDev;
  return h;
}

std::uint64_t landlock_scopes(int abi) { return abi >= 6 ? (ll::kScopeAbstractUnix | ll::kScopeSignal) : 0; }

std::vector<LandlockRule> landlock_rules(const std::vector<MountOp>& mounts,
                                         const std::vector<std::string>& read_only_overrides) {
  constexpr std::uint64_t kAll = ~0ULL;  // narrowed to what the kernel handles when applied
  std::vector<LandlockRule> rules;
  // Directory listing across the tmpfs root and its skeleton (/etc, /var,
  // $HOME's parents); reading file contents still needs a rule below.
  rules.push_back({"/", ll::kReadDir, Node::directory});
  for (const auto& op : mounts) {
    std::uint64_t access = 0;
    switch (op.kind) {
      case MountKind::bind:
        access = op.access == Access::read_write ? kAll : ll::kRead;
        if (op.devices == Devices::allowed) access = ll::kReadFile | ll::kWriteFile | ll::kIoctlDev;
        break;
      case MountKind::tmpfs:
      case MountKind::scratch: access = op.access == Access::read_write ? kAll : ll::kRead; break;
      case MountKind::devpts: access = ll::kReadFile | ll::kWriteFile | ll::kReadDir | ll::kIoctlDev; break;
      case MountKind::proc: access = ll::kReadFile | ll::kReadDir | ll::kWriteFile; break;
      case MountKind::mask:
      case MountKind::symlink:
      case MountKind::seal: continue;  // masks are empty; seals narrow a mount already listed
    }
    if (std::find(read_only_overrides.begin(), read_only_overrides.end(), op.dest) != read_only_overrides.end())
      access &= ll::kRead;
    if (op.node == Node::file) access &= ll::kFileRights;
    rules.push_back({op.dest, access, op.node});
  }
  return rules;
}

}  // namespace pj::linuxjail
