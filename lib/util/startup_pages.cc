// The start-up pages' release (startup_pages.h).
#include "startup_pages.h"

#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

namespace pj::util {

void drop_startup_pages() {
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        if (std::string_view(info->dlpi_name).find("vdso") != std::string_view::npos) return 0;
        // An object with text relocations had its read-only pages written
        // by ld.so: left alone (pi-jail itself is linked with -z text).
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
          const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
          for (; dyn->d_tag != DT_NULL; ++dyn)
            if (dyn->d_tag == DT_TEXTREL || (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL))) return 0;
        }
        const long page = ::sysconf(_SC_PAGESIZE);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W)) continue;
          uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
          start = (start + static_cast<uintptr_t>(page) - 1) & ~static_cast<uintptr_t>(page - 1);
          end &= ~static_cast<uintptr_t>(page - 1);
          if (end > start) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
        }
        return 0;
      },
      nullptr);
  ::malloc_trim(0);  // and the heap's pages that start-up freed (madvise, brk)
}

}  // namespace pj::util
