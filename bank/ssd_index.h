// SsdIndex: the SSD tier's in-memory index of published objects and its
// eviction order; no I/O and no payloads, so it is tested on its own.
// Eviction order (the victim is the first entry; docs/bank-format.md,
// "Eviction order"): least recently accessed first (a publish or a read in
// this process; at opening, the file's modification time, which reads
// refresh, so the order survives a restart), then the lower retention class,
// then blocks before snapshots, then the smaller key.
// An entry may be *doomed*: chosen as a victim but still published until the
// object that needs its room is written. Doomed entries stay findable;
// doom_next() passes over them and over what the eviction guard protects.
// Not thread-safe: the tier guards it with its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bank/object.h"
#include "bank/tier.h"

namespace sb {

struct SsdEntry {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  uint64_t bytes = 0;  // file size
  Retention retention = Retention::kBlock;
  int64_t position = 0;
  uint64_t last_access = 0;  // the index's logical clock
  bool doomed = false;
  Key parent;                // blocks: K(k), from the header
  uint32_t tokens = 0;       // blocks: B, from the header
  uint64_t hits = 0;         // successful reads in this process
  int64_t last_use_ms = 0;   // Unix ms of the publish or last read (file mtime after a restart)
};

class SsdIndex {
 public:
  // Adds an entry as the most recently accessed. False when present.
  bool insert(SsdEntry entry);
  // Adds entries found on disk, oldest first by `age` (e.g. mtime), before
  // anything inserted later. REQUIRES: called on an empty index.
  void load(std::vector<std::pair<int64_t, SsdEntry>> entries_with_age);
  const SsdEntry* find(ObjectKind kind, const Key& key) const;
  bool erase(ObjectKind kind, const Key& key);
  // Marks an entry as just accessed; false when absent. With now_ms > 0 it
  // is also counted as a read (hits, last_use_ms).
  bool touch(ObjectKind kind, const Key& key, int64_t now_ms = 0);
  // The next victim, or nullptr when empty.
  const SsdEntry* oldest() const;
  // Marks the first entry of the eviction order that is not doomed yet and
  // that `evictable` accepts as doomed and returns a copy; false when there
  // is none.
  template <typename Pred>
  bool doom_next(const Pred& evictable, SsdEntry* out) {
    for (const auto& [o, id] : order_) {
      SsdEntry& e = entries_.at(id);
      if (e.doomed || !evictable(e)) continue;
      e.doomed = true;
      doomed_bytes_ += e.bytes;
      *out = e;
      return true;
    }
    return false;
  }
  // Takes the mark off again (its replacement failed); false when absent.
  bool undoom(ObjectKind kind, const Key& key);
  // Keys of the blocks whose parent is `parent`, at most `max`.
  std::vector<Key> children(const Key& parent, size_t max) const;
  std::vector<SsdEntry> in_eviction_order() const;

  uint64_t bytes() const { return bytes_; }
  uint64_t doomed_bytes() const { return doomed_bytes_; }
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t blocks() const { return blocks_; }
  uint64_t snapshots() const { return snapshots_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Id {
    ObjectKind kind;
    Key key;
    bool operator==(const Id&) const = default;
    auto operator<=>(const Id&) const = default;
  };
  struct IdHash {
    size_t operator()(const Id& id) const { return KeyHash()(id.key) ^ static_cast<size_t>(id.kind); }
  };
  using Order = std::tuple<uint64_t, uint8_t, Id>;  // access, retention, (kind, key)
  static Order order_of(const SsdEntry& e) { return {e.last_access, static_cast<uint8_t>(e.retention), Id{e.kind, e.key}}; }
  void account(const SsdEntry& e, int sign);

  uint64_t clock_ = 0;
  uint64_t bytes_ = 0, block_bytes_ = 0, blocks_ = 0, snapshots_ = 0, doomed_bytes_ = 0;
  std::unordered_map<Id, SsdEntry, IdHash> entries_;
  std::unordered_multimap<Key, Key, KeyHash> children_;  // parent -> block
  std::map<Order, Id> order_;
};

}  // namespace sb
