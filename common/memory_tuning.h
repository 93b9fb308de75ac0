// malloc settings for a process that moves large short-lived buffers.
//
// Why: the runtime and the bank move tens of MB through freshly allocated
// buffers on every request (a restored State, objects read from SSD,
// activations). On the virtual machines we run on, faulting in a fresh
// 4 KiB page costs about 13 us, so a first-touch copy runs at 0.3 GB/s,
// slower than the disk; with 2 MiB pages the same copy runs at 2.6-4.4 GB/s,
// and memory kept in the heap after free() is not faulted in again
// (docs/bank.md, "Memory"; measured with bench/ssd_read_bench).
//
// tune_memory():
//  1. Transparent huge pages for the heap: glibc (>= 2.35) backs malloc with
//     them when GLIBC_TUNABLES holds glibc.malloc.hugetlb=1, and reads
//     tunables only at process start, so the program re-executes itself once
//     with the tunable added. Skipped when GLIBC_TUNABLES already names
//     glibc.malloc.hugetlb (any value: glibc.malloc.hugetlb=0 opts out), or
//     when the re-execution fails (the program goes on with 4 KiB pages).
//  2. Freed memory stays in the heap (mallopt: no trimming below 1 GiB,
//     chunks up to 32 MiB from the heap rather than from fresh mappings), and
//     every thread allocates from that one heap (one arena, unless
//     GLIBC_TUNABLES sets glibc.malloc.arena_max).
// Call it first thing in main(), before any thread starts.
#pragma once

namespace sb {

void tune_memory(char** argv);

}  // namespace sb
