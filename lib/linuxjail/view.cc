#include "linuxjail/view.h"

namespace pj::linuxjail::view {

namespace {

constexpr Entry kSystemRoots[] = {
    {"/usr", "system programs and libraries"},
    {"/bin", "system programs (often a symlink to usr/bin)"},
    {"/sbin", "system programs (often a symlink to usr/sbin)"},
    {"/lib", "system libraries (often a symlink to usr/lib)"},
    {"/lib32", "32-bit libraries"},
    {"/lib64", "the dynamic loader on x86_64"},
    {"/libx32", "x32 libraries"},
};

constexpr Entry kEtc[] = {
    {"/etc/passwd", "user names for id, ls, git"},
    {"/etc/group", "group names"},
    {"/etc/nsswitch.conf", "name service configuration"},
    {"/etc/hosts", "static host names"},
    {"/etc/host.conf", "resolver configuration"},
    {"/etc/resolv.conf", "resolver configuration (no DNS is reachable inside)"},
    {"/etc/gai.conf", "address selection"},
    {"/etc/ld.so.cache", "dynamic loader cache"},
    {"/etc/ld.so.conf", "dynamic loader configuration"},
    {"/etc/ld.so.conf.d", "dynamic loader configuration"},
    {"/etc/ssl", "TLS certificates and OpenSSL configuration"},
    {"/etc/ca-certificates", "TLS certificate configuration"},
    {"/etc/ca-certificates.conf", "TLS certificate configuration"},
    {"/etc/pki", "TLS certificates (Fedora layout)"},
    {"/etc/crypto-policies", "crypto policy (Fedora layout)"},
    {"/etc/localtime", "time zone"},
    {"/etc/timezone", "time zone name"},
    {"/etc/alternatives", "Debian program alternatives (/usr/bin links point here)"},
    {"/etc/os-release", "distribution identity"},
    {"/etc/lsb-release", "distribution identity"},
    {"/etc/debian_version", "distribution identity"},
    {"/etc/protocols", "protocol names"},
    {"/etc/services", "service names"},
    {"/etc/mime.types", "file types"},
    {"/etc/magic", "file types"},
    {"/etc/inputrc", "readline"},
    {"/etc/bash.bashrc", "system shell start-up (read-only)"},
    {"/etc/profile", "system shell start-up (read-only)"},
    {"/etc/profile.d", "system shell start-up (read-only)"},
    {"/etc/environment", "system environment defaults"},
    {"/etc/locale.alias", "locale names"},
    {"/etc/locale.conf", "locale"},
    {"/etc/default/locale", "locale"},
    {"/etc/gitconfig", "system git configuration"},
    {"/etc/terminfo", "terminal descriptions"},
    {"/etc/vim", "editor defaults"},
    {"/etc/nanorc", "editor defaults"},
};

constexpr Entry kSecretMasks[] = {
    {"/etc/ssl/private", "TLS private keys are for root only"},
};

constexpr TmpfsEntry kScratch[] = {
    {"/tmp", "size=50%,mode=1777", "private temporary files"},
    {"/var/tmp", "size=50%,mode=1777", "private temporary files"},
    {"/run", "size=16m,mode=0755", "private runtime directory, empty"},
    {"/dev", "size=64k,mode=0755", "minimal device directory (sealed read-only)"},
    {"/dev/shm", "size=50%,mode=1777", "private shared memory"},
};

constexpr Entry kDevices[] = {
    {"/dev/null", "device"}, {"/dev/zero", "device"},    {"/dev/full", "device"},
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

constexpr std::string_view kEnvPass[] = {
    "PATH", "TERM", "COLORTERM", "TERM_PROGRAM", "LANG", "LANGUAGE", "TZ",
    "USER", "LOGNAME", "SHELL", "EDITOR", "VISUAL", "PAGER", "NO_COLOR",
    "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES", "CI",
};

constexpr std::string_view kEnvPassPrefixes[] = {"LC_"};

}  // namespace

std::span<const Entry> system_roots() { return kSystemRoots; }
std::span<const Entry> etc_entries() { return kEtc; }
std::span<const Entry> secret_masks() { return kSecretMasks; }
std::span<const TmpfsEntry> scratch() { return kScratch; }
std::span<const Entry> devices() { return kDevices; }
std::span<const LinkEntry> dev_links() { return kDevLinks; }
std::span<const Entry> proc_read_only() { return kProcReadOnly; }
std::span<const std::string_view> env_pass() { return kEnvPass; }
std::span<const std::string_view> env_pass_prefixes() { return kEnvPassPrefixes; }

}  // namespace pj::linuxjail::view
