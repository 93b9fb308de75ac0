// RamTier: the bank's first tier, a map from (kind, key) to a shared
// immutable object under a byte budget.
//  - an object costs Object::payload_bytes(); one larger than the whole budget
//    fails with kResourceExhausted and changes nothing;
//  - after each put(), while over budget, it evicts middle snapshots first,
//    then chains from their least recently used tails, never a middle block
//    while its tail is here, never what the eviction guard protects (in
//    full: docs/bank.md, "RamTier's eviction order"); an object that does
//    not fit beside the protected ones is not stored (kResourceExhausted).
// Thread safety: every method locks one mutex; objects are handed out as
// shared references (no copy) and are never written after put().
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bank/tier.h"

namespace sb {

class RamTier : public Tier {
 public:
  explicit RamTier(uint64_t budget_bytes);

  TierKind kind() const override { return TierKind::kRam; }
  bool contains(ObjectKind kind, const Key& key) const override;
  Status get(ObjectKind kind, const Key& key, ObjectRef* out) override;
  Status put(const ObjectRef& object, Retention retention) override;
  // Drops the object (RAM keeps nothing aside); counted in quarantined.
  bool quarantine(ObjectKind kind, const Key& key, const std::string& why) override;
  TierStats stats() const override;

  void set_eviction_guard(const EvictionGuard* guard) override;
  void set_observer(TierObserver* observer) override;
  void guard_changed() override;
  std::vector<TierEntry> entries() const override;
  bool describe(ObjectKind kind, const Key& key, TierEntry* out) const override;
  std::vector<Key> children(const Key& parent, size_t max) const override;
  Status peek_tokens(const Key& block, Key* parent, std::vector<int32_t>* tokens) const override;
  Status discard(ObjectKind kind, const Key& key) override;

  // Changes the budget and evicts (in the order above) until it holds.
  void set_budget(uint64_t budget_bytes);
  // Removes one object now (quarantine, or a test making a hole). Returns
  // whether it was present. Not counted as an eviction.
  bool erase(ObjectKind kind, const Key& key);
  // Objects evicted since the last call, in eviction order (the last 64k at
  // most; for tests and inspection).
  std::vector<std::pair<ObjectKind, Key>> take_evicted();

 private:
  using Name = std::pair<ObjectKind, Key>;
  struct NameHash {
    size_t operator()(const Name& n) const { return KeyHash()(n.second) ^ static_cast<size_t>(n.first); }
  };
  struct Entry {
    ObjectRef object;
    Retention retention = Retention::kBlock;
    uint64_t tick = 0;
    uint64_t hits = 0;
    int64_t last_use_ms = 0;
  };
  // (class, tick, kind, key): the candidate's place in the eviction order.
  using OrderKey = std::tuple<int, uint64_t, ObjectKind, Key>;

  // All REQUIRE mu_ held.
  Entry* find(ObjectKind kind, const Key& key);
  const Entry* find(ObjectKind kind, const Key& key) const;
  TierEntry entry_of(const Entry& e) const;
  uint32_t child_count(const Key& key) const;
  bool guarded(ObjectKind kind, const Key& key) const;
  // Bytes of the objects the guard protects now (a scan: asked only when a
  // pinned object does not fit at once).
  uint64_t guarded_bytes() const;
  // Class and tick of an object as a candidate, or class 0 = not a candidate
  // (an attached snapshot rides with its block).
  std::pair<int, uint64_t> place(ObjectKind kind, const Key& key);
  void reorder(ObjectKind kind, const Key& key);
  void reorder_around(const Object& object);
  // After a change of recency only: the object and its unit partner.
  void reorder_touched(const Object& object);
  void remove(ObjectKind kind, const Key& key, bool evicted);
  void evict_to_budget();

  mutable std::mutex mu_;
  uint64_t budget_ = 0;
  uint64_t bytes_ = 0;
  uint64_t tick_ = 0;
  std::unordered_map<Name, Entry, NameHash> objects_;
  std::unordered_map<Key, std::vector<Key>, KeyHash> children_;  // blocks here naming the key as parent
  std::unordered_map<Name, OrderKey, NameHash> placed_;  // candidate -> its order key
  std::set<OrderKey> order_;
  std::vector<Name> evicted_;
  TierStats stats_;
  const EvictionGuard* guard_ = nullptr;
  TierObserver* observer_ = nullptr;
};

}  // namespace sb
