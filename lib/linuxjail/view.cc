#include "linuxjail/view.h"

namespace pj::linuxjail::view {

namespace {

constexpr ScratchPlace kScratchPlaces[] = {
    {"/tmp", "tmp", "private temporary files (the shared scratch budget)"},
    {"/var/tmp", "var-tmp", "private temporary files (the shared scratch budget)"},
    {"/dev/shm", "shm", "private shared memory (the shared scratch budget)"},
};

constexpr TmpfsEntry kPrivateTmpfs[] = {
    {"/run", "size=16m,mode=0755", "private runtime directory, empty"},
    {"/dev", "size=64k,mode=0755", "minimal device directory (sealed read-only)"},
};

constexpr Entry kDevices[] = {
    {"/dev/null", "device"},   {"/dev/zero", "device"},    {"/dev/full", "device"},
    {"/dev/random", "device"}, {"/dev/urandom", "device"}, {"/dev/tty", "device"},
};

constexpr LinkEntry kDevLinks[] = {
    {"/dev/ptmx", "pts/ptmx", "the jail's own devpts multiplexer"},
    {"/dev/fd", "/proc/self/fd", "standard link"},
    {"/dev/stdin", "/proc/self/fd/0", "standard link"},
    {"/dev/stdout", "/proc/self/fd/1", "standard link"},
    {"/dev/stderr", "/proc/self/fd/2", "standard link"},
};

constexpr Entry kProcReadOnly[] = {
    {"/proc/sys", "kernel tunables are read-only"},
    {"/proc/sysrq-trigger", "no magic SysRq"},
    {"/proc/irq", "no IRQ affinity changes"},
    {"/proc/bus", "no bus device access"},
};

}  // namespace

std::span<const ScratchPlace> scratch_places() { return kScratchPlaces; }
std::span<const TmpfsEntry> private_tmpfs() { return kPrivateTmpfs; }
std::span<const Entry> devices() { return kDevices; }
std::span<const LinkEntry> dev_links() { return kDevLinks; }
std::span<const Entry> proc_read_only() { return kProcReadOnly; }

}  // namespace pj::linuxjail::view
