// Thread scheduling. Work no running decode waits for (a request before its
// admission, constrained masks, the SSD writers) runs below the step thread
// and the token delivery by `serve --background-nice N` (docs/batching.md,
// "Under a hostile load"); priority decides when work runs, never what.
// Contract:
//  - set_background_nice(n) before the threads it concerns start (0: off;
//    clamped to 0-19); background_nice() returns it;
//  - lower_this_thread(by) adds `by` (background_nice(), read by whoever
//    starts the thread) to the calling thread's nice value, at most 19;
//    by <= 0: nothing. It cannot be raised again without privilege, so only
//    for threads that do such work alone. False when the OS refused;
//  - this_thread_nice(): the calling thread's nice value;
//  - this_thread_waited_ms(): how long the calling thread has been runnable
//    but waiting for a core (Linux schedstat), -1 where the kernel does not
//    say; the step loop's latency bound leaves it out of a step's cost.
#pragma once

#include <functional>
#include <thread>

namespace sb {

void set_background_nice(int n);
int background_nice();
bool lower_this_thread(int by);
// A thread named `name` (what `top -H` shows) that lowers itself by
// background_nice() as it is now, then runs `body`.
std::thread background_thread(const char* name, std::function<void()> body);
int this_thread_nice();
double this_thread_waited_ms();

}  // namespace sb
