// Thread scheduling. The CPU priority of work no running decode waits for: a request not yet
// admitted (its body parsed, validated, rendered and tokenized), a
// constrained request's token masks and the SSD writers. Lowered by
// `serve --background-nice N`, such work takes the CPU the step thread and
// the threads delivering admitted requests' tokens leave, so that a flood
// of costly requests or masks slows itself, not other tenants' tokens
// (docs/batching.md, "Under a hostile load"). Priority decides only when
// work runs, never what it computes. And how long a thread waited for a
// core, so that the step loop's latency bound measures what its steps cost,
// not how busy the machine was.
// Contract:
//  - set_background_nice(n) is called once, before the threads it concerns
//    start; background_nice() is what it set (0 until then: off);
//  - lower_this_thread(by) adds `by` (background_nice(), read by whoever
//    starts the thread) to the calling thread's nice value (Linux keeps one
//    per thread), at most 19; by <= 0 does nothing. Without privilege it
//    cannot be raised again, so it is for threads that do only such work.
//    Returns false when the OS refused (then the thread keeps its priority);
//  - this_thread_nice() is the calling thread's nice value;
//  - this_thread_waited_ms() is the time the calling thread has spent
//    runnable but waiting for a core since it started (Linux's schedstat),
//    or -1 where the kernel does not say.
#pragma once

namespace sb {

void set_background_nice(int n);
int background_nice();
bool lower_this_thread(int by);
int this_thread_nice();
double this_thread_waited_ms();

}  // namespace sb
