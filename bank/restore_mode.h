// RestoreMode: how one request's prefix state was served: nothing restored
// (cold), every restored object from one kind of tier (that tier's name),
// objects from several tiers (mixed), or the bank not consulted (bypass).
//
// A mode is a small dense index, so counters keyed by mode are plain arrays
// of kCount entries and a new TierKind (bank/tier.h) adds its mode without
// edits in the engine, the server or the metrics. Names are what users see
// in JSON and metric labels: "cold", "ram", "ssd", "remote", "mixed",
// "bypass".
//
// A value type: trivially copyable, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "bank/tier.h"

namespace sb {

class RestoreMode {
 public:
  // Index order: cold, one per TierKind in enum order, mixed, bypass.
  static constexpr size_t kCount = kTierKinds + 3;

  constexpr RestoreMode() = default;  // cold
  static constexpr RestoreMode cold() { return RestoreMode(0); }
  static constexpr RestoreMode from(TierKind tier) { return RestoreMode(1 + static_cast<size_t>(tier)); }
  static constexpr RestoreMode mixed() { return RestoreMode(kTierKinds + 1); }
  static constexpr RestoreMode bypass() { return RestoreMode(kTierKinds + 2); }
  // REQUIRES: index < kCount.
  static constexpr RestoreMode at(size_t index) { return RestoreMode(index); }

  constexpr size_t index() const { return index_; }
  // The tier that served every restored object, when one did.
  std::optional<TierKind> tier() const;
  // True when something was restored (a tier or mixed).
  bool restored() const { return index_ != 0 && index_ <= kTierKinds + 1; }
  const char* name() const;

  constexpr bool operator==(const RestoreMode&) const = default;

 private:
  constexpr explicit RestoreMode(size_t index) : index_(static_cast<uint8_t>(index)) {}
  uint8_t index_ = 0;
};

}  // namespace sb
