// WallClock: milliseconds since the Unix epoch, for what the bank dates:
// a pin's expiry (bank/pins.h). Tests pass a ManualClock so that a TTL
// expires when the test says, never by sleeping.
//
// Thread safety: now_ms() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace sb {

class WallClock {
 public:
  virtual ~WallClock() = default;
  virtual int64_t now_ms() const = 0;
};

// The system's real-time clock.
const WallClock& system_wall_clock();
int64_t wall_now_ms();  // system_wall_clock().now_ms()

// A clock that moves only when told to.
class ManualClock : public WallClock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : ms_(start_ms) {}
  int64_t now_ms() const override { return ms_.load(); }
  void advance_ms(int64_t ms) { ms_.fetch_add(ms); }

 private:
  std::atomic<int64_t> ms_;
};

}  // namespace sb
