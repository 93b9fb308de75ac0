#include "common/thread_priority.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace sb {
namespace {

std::atomic<int> g_background_nice{0};

}  // namespace

void set_background_nice(int n) { g_background_nice.store(std::clamp(n, 0, 19)); }

int background_nice() { return g_background_nice.load(); }

// PRIO_PROCESS with a thread id reads and sets that thread's nice value alone.
int this_thread_nice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

bool lower_this_thread(int by) {
  if (by <= 0) return true;
  return setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), std::min(19, this_thread_nice() + by)) == 0;
}

std::thread background_thread(const char* name, std::function<void()> body) {
  return std::thread([name, by = background_nice(), body = std::move(body)] {
    pthread_setname_np(pthread_self(), name);
    lower_this_thread(by);
    body();
  });
}

double this_thread_waited_ms() {
  // Opened once per thread: a step reads it twice.
  thread_local const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  // "on-cpu-ns wait-ns slices"
  char* end = nullptr;
  std::strtoull(buf, &end, 10);
  const unsigned long long wait_ns = std::strtoull(end, &end, 10);
  return static_cast<double>(wait_ns) / 1e6;
}

}  // namespace sb
