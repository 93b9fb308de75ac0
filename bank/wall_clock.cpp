#include "bank/wall_clock.h"

#include <chrono>

namespace sb {
namespace {

class SystemWallClock : public WallClock {
 public:
  int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const WallClock& system_wall_clock() {
  static const SystemWallClock clock;
  return clock;
}

int64_t wall_now_ms() { return system_wall_clock().now_ms(); }

}  // namespace sb
