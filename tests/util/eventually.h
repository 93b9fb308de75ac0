// eventually(): waits for a condition that another thread or process makes
// true (a background writer finished, a breaker closed), polling every 10 ms
// for at most 20 seconds. A wait, not a timed assertion: it only bounds how
// long a broken build hangs before the test fails.
#pragma once

#include <chrono>
#include <thread>

namespace sb::testing {

template <typename Condition>
bool eventually(Condition done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace sb::testing
