// tune_memory(): malloc settings for a process that moves large short-lived
// buffers (why, with the measurements: docs/bank.md, "Lookup, restore,
// continue", the memory paragraph):
//  - transparent huge pages for the heap: the program re-executes itself once
//    with glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES, unless that tunable
//    is already named (=0 opts out) or the re-execution fails (then it goes
//    on with 4 KiB pages);
//  - freed memory stays in the heap (no trimming below 1 GiB, chunks up to
//    32 MiB from the heap rather than fresh mappings) and every thread
//    allocates from one arena (unless GLIBC_TUNABLES sets arena_max).
// Call it first thing in main(), before any thread starts.
#pragma once

namespace sb {

void tune_memory(char** argv);

}  // namespace sb
