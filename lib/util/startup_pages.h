// The resident set of a long-running process after its start (Linux).
#pragma once

namespace pj::util {

// Once a process has started what it runs for (the supervisor its jail,
// the network filter its loop), most of the code that prepared it is not
// run again: the read-only, never-written segments of its mapped files
// (pi-jail's and libc's) leave the resident set (MADV_DONTNEED: they come
// back from the page cache if touched), so that what the run adds starts
// from a smaller set. Writable segments, RELRO included (its pages hold
// relocations), and objects with text relocations are left alone. A
// debugger's breakpoint in those pages is lost with them. The heap's
// free pages go back too (malloc_trim). Only madvise(2) and brk(2):
// callable under the filter's seccomp allowlist.
void drop_startup_pages();

// From here on, the process's code is mapped into its resident set a page
// at a time, as it runs. Around a page of code that faults, the kernel
// maps every page of the file it has cached within 64 KiB (fault-around,
// bounded by the mapping): code spread over a large binary, as OpenSSL's
// TLS is over pi-jail's, then costs about 64 KiB a page run. Every other
// page of the read-only segments is marked MADV_RANDOM (which only stops
// read-ahead of pages not cached), so that no two neighbouring pages
// share one mapping; the segments leave the resident set first, as in
// drop_startup_pages(). The cost: a kernel mapping record per page, a few
// madvise(2) calls per page pair, a page fault per page of code run, and
// some CPU time in code that runs hot (the README has the figures). A
// split that fails (the kernel's limit of mappings) is undone:
// map_code_whole(). Only madvise(2): callable under the filter's seccomp
// allowlist.
void map_code_by_page();

// The read-only segments as whole mappings again (MADV_NORMAL over each
// merges its pages); their pages stay resident.
void map_code_whole();

}  // namespace pj::util
