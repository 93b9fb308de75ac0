// PinBudget: what one tenant's cache_control pins may hold (issue 47,
// finding 6): at most `max_pins` unexpired pins, and at most `max_bytes` of
// state stored under them (in the tier where they hold most). A request
// beyond either is served as usual, unpinned: pins only keep a prefix warm,
// and a refusal would make a client's request depend on other requests'
// pins (docs/interface.md, "Pins from cache_control").
//
// Cost: one check reads the tenant's own pins only (at most max_pins).
// Thread safety: every method locks one mutex; try_pin() calls `pin` and
// `bytes_of` under it, so two requests of one tenant cannot both take its
// last place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace sb {

class PinBudget {
 public:
  PinBudget(size_t max_pins, uint64_t max_bytes) : max_pins_(max_pins), max_bytes_(max_bytes) {}

  // Sets a pin: the id and expiry (ms) of the pin made, or false when none was.
  using Pin = std::function<bool(std::string* id, int64_t* expires_ms)>;
  // The bytes a pin of this tenant holds now (0 once it has expired).
  using BytesOf = std::function<uint64_t(const std::string& id)>;

  // Calls `pin` when `tenant` is within its budget at `now_ms`; whether it
  // was (a pin the tenant holds already, pinned again, counts once).
  bool try_pin(const std::string& tenant, int64_t now_ms, const Pin& pin, const BytesOf& bytes_of);

  // Pins the tenant holds now (tests, metrics).
  size_t pins_of(const std::string& tenant, int64_t now_ms);

  // Pins refused since the start (the request ran unpinned), by which
  // budget was full: the tenant's count of pins, or its pinned bytes.
  struct Refused {
    uint64_t pins = 0, bytes = 0;
  };
  Refused refused();

 private:
  void forget_expired_locked(std::map<std::string, int64_t>& pins, int64_t now_ms);

  const size_t max_pins_;
  const uint64_t max_bytes_;
  std::mutex mu_;
  Refused refused_;
  std::unordered_map<std::string, std::map<std::string, int64_t>> tenants_;  // tenant -> pin id -> expiry
};

}  // namespace sb
