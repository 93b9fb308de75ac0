// PinSet: prefixes an operator keeps warm for a while (POST /v1/bank/pins;
// docs/bank.md, "Pins"). A pin names the chain keys K(1)..K(k) of one
// prefix; every block and snapshot stored under them, now or later, is
// protected from eviction in every tier that honours the eviction guard until
// the pin expires (read from a WallClock at every question; purge_expired()
// then forgets it and Bank::sweep_pins evicts down to the budgets).
// Pins live in memory: a restart forgets them. Adding or removing one costs
// O(k log n) for its k names, so a burst of pins holds the lock eviction asks
// under for a bounded time.
// Thread safety: every method locks one mutex; protects() never calls out,
// so tiers may ask it under their own locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bank/key.h"
#include "bank/tier.h"
#include "bank/wall_clock.h"

namespace sb {

struct Pin {
  std::string id;         // the tail key in hex: one pin per prefix
  Key tail;               // K(k), the prefix's last block
  Key root;               // K0 when the walk from the tail reached it, else zero
  bool has_root = false;
  int64_t tokens = 0;     // kB
  std::vector<Key> keys;  // K(1)..K(k), the names it protects
  int64_t expires_ms = 0;
};

class PinSet : public EvictionGuard {
 public:
  explicit PinSet(const WallClock& clock) : clock_(clock) {}

  bool protects(ObjectKind kind, const Key& key) const override;

  // Adds a pin, replacing one with the same id (a new TTL).
  void add(Pin pin);
  bool remove(const std::string& id);
  // Removes the pins under a root (a flushed namespace), or all of them.
  size_t remove_root(const Key& root);
  size_t clear();
  // Unexpired pins, soonest expiry first.
  std::vector<Pin> list() const;
  // The unexpired pin `id` into *out; false when there is none.
  bool find(const std::string& id, Pin* out) const;
  // Forgets expired pins; returns how many.
  size_t purge_expired();
  // Whether some pin has expired and not been purged (no lock: cheap enough
  // for every publish).
  bool any_expired() const { return earliest_expiry_.load(std::memory_order_relaxed) <= clock_.now_ms(); }
  int64_t now_ms() const { return clock_.now_ms(); }

 private:
  // A pin's names and expiry into, or out of, the indexes below.
  void index_locked(const Pin& pin);
  void unindex_locked(const Pin& pin);
  void erase_locked(std::map<std::string, Pin>::iterator it);

  const WallClock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, Pin> pins_;
  // name -> the expiries of the pins holding it (the latest one protects)
  std::unordered_map<Key, std::multiset<int64_t>, KeyHash> until_;
  std::multiset<int64_t> expiries_;                  // of pins_
  std::atomic<int64_t> earliest_expiry_{INT64_MAX};  // of pins_; INT64_MAX when none
};

}  // namespace sb
