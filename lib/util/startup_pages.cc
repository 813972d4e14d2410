// The start-up pages' release (startup_pages.h).
#include "startup_pages.h"

#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

namespace pj::util {

namespace {

// Calls `f(start, end, page size)` for each read-only segment (its whole
// pages, if any) of each mapped object but the vDSO and objects with text
// relocations (their read-only pages were written by ld.so: pi-jail
// itself is linked with -z text).
template <typename F>
void for_each_read_only_segment(F f) {
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (std::string_view(info->dlpi_name).find("vdso") != std::string_view::npos) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
          const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
          for (; dyn->d_tag != DT_NULL; ++dyn)
            if (dyn->d_tag == DT_TEXTREL || (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL))) return 0;
        }
        const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W)) continue;
          uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
          start = (start + page - 1) & ~(page - 1);
          end &= ~(page - 1);
          if (end > start) (*static_cast<F*>(data))(start, end, page);
        }
        return 0;
      },
      &f);
}

}  // namespace

void drop_startup_pages() {
  for_each_read_only_segment([](uintptr_t start, uintptr_t end, uintptr_t) {
    ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
  });
  ::malloc_trim(0);  // and the heap's pages that start-up freed (madvise, brk)
}

void map_code_by_page() {
  bool failed = false;
  for_each_read_only_segment([&failed](uintptr_t start, uintptr_t end, uintptr_t page) {
    ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
    for (uintptr_t at = start; !failed && at + page <= end; at += 2 * page)
      failed = ::madvise(reinterpret_cast<void*>(at), page, MADV_RANDOM) != 0;
  });
  // At the kernel's limit of mappings (vm.max_map_count), the process
  // would have no room left for those it makes later (a thread's stack,
  // a large allocation): whole again.
  if (failed) map_code_whole();
}

void map_code_whole() {
  for_each_read_only_segment([](uintptr_t start, uintptr_t end, uintptr_t) {
    ::madvise(reinterpret_cast<void*>(start), end - start, MADV_NORMAL);
  });
}

}  // namespace pj::util
