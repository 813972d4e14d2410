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

}  // namespace pj::util
