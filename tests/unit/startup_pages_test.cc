// util::map_code_by_page: no two neighbouring pages of read-only code or
// data share one mapping, so the kernel maps no page around one that runs;
// util::map_code_whole undoes it.
#include <doctest/doctest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "util/startup_pages.h"

namespace {

using Range = std::pair<std::uintptr_t, std::uintptr_t>;

// The unit-test program's own read-only segments, whole pages.
std::vector<Range> own_read_only_segments() {
  std::vector<Range> out;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name[0] != '\0') return 0;  // the program itself only
        const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W)) continue;
          std::uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
          start = (start + page - 1) & ~(page - 1);
          end &= ~(page - 1);
          if (end > start) static_cast<std::vector<Range>*>(data)->emplace_back(start, end);
        }
        return 1;
      },
      &out);
  return out;
}

// The mappings of /proc/self/maps that overlap `r`, cut to it (a segment's
// first and last page may share a mapping with what lies beyond it).
std::vector<Range> mappings_within(const Range& r) {
  std::vector<Range> out;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    in >> std::hex >> start >> dash >> end;
    if (start < r.second && end > r.first) out.emplace_back(std::max(start, r.first), std::min(end, r.second));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "map_code_by_page leaves each page of read-only code and data a mapping of its own, map_code_whole "
    "joins them again") {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto segments = own_read_only_segments();
  REQUIRE(!segments.empty());  // the code (with -z separate-code the read-only data too)
  // Before: the kernel keeps each segment in one mapping, or a few.
  size_t before = 0;
  for (const auto& s : segments) before += mappings_within(s).size();
  pj::util::map_code_by_page();
  size_t pages = 0, after = 0;
  for (const auto& s : segments) {
    CAPTURE(s.first);
    const auto maps = mappings_within(s);
    CHECK(maps.size() == (s.second - s.first) / page);
    for (const auto& m : maps) CHECK(m.second - m.first == page);
    pages += (s.second - s.first) / page;
    after += maps.size();
  }
  CAPTURE(before);
  CHECK(before < pages / 4);
  CHECK(after == pages);
  // Whole again, as before (the rest of this process's tests run with it).
  pj::util::map_code_whole();
  size_t whole = 0;
  for (const auto& s : segments) whole += mappings_within(s).size();
  CHECK(whole == before);
}
