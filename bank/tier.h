// Tier: one storage level of the bank (RAM, SSD, later a shared remote store).
// The Bank composes tiers behind this one interface and never knows which
// kind it talks to.
//
// Contract, for every implementation:
//  1. get() returns only objects whose bytes were verified in this tier
//     (checksum on every read for tiers that serialise; RAM objects are
//     immutable). A failed check is a miss: the object is quarantined and
//     counted, and get() returns kCorruption.
//  2. put() of a name that is present is a no-op; an object is visible to
//     contains()/get() only after it is complete (and durable, for SSD).
//  3. All methods are thread-safe.
//  4. quarantine() takes an object out for good: a copy that failed a check
//     is never served again, and the next request computes it cold and
//     publishes it afresh (docs/bank.md, "Self-healing").
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "bank/object.h"
#include "common/status.h"

namespace sb {

// Which kind of store a tier is: its identity in every statistic (a restore
// served by it, /metrics, /v1/bank). A new kind of tier is one more
// enumerator here and its name in tier_kind_name(); counters keyed by tier
// (RestoreMode, EngineStats) pick it up without other edits.
enum class TierKind : uint8_t { kRam = 0, kSsd = 1, kRemote = 2 };
inline constexpr size_t kTierKinds = 3;
// "ram", "ssd", "remote": the names users see (JSON, metrics labels).
const char* tier_kind_name(TierKind kind);

// How long a tier keeps an object, in the bank's own terms: the caller
// (the engine) decides which class a snapshot gets from why it took it; the
// bank never knows about chats or prompts. Ordered: a higher class is kept
// longer, and an object put again keeps the highest class it was given. The
// value is stored on disk as the header's retention byte (docs/bank-format.md)
// and never renumbered.
//  - kBlock: a block; kept as long as its chain (bank/ram_tier.h).
//  - kThinFirst: a snapshot worth having only where a chain ends; inside a
//    chain (a block continues past it) it is the first thing to go.
//  - kKeep: thinned inside a chain like kThinFirst, but where tiers compare
//    equals (SSD at equal access) kept longer than kThinFirst.
//  - kAnchor: a snapshot many requests restore from; never thinned from the
//    middle of a chain, evicted only with (or after) its block.
// The RAM tier's exact eviction order, which uses the class together with
// the chain structure, is written in bank/ram_tier.h; the SSD tier's in
// bank/ssd_index.h.
enum class Retention : uint8_t {
  kBlock = 0,
  kThinFirst = 1,
  kKeep = 2,
  kAnchor = 3,
};
// "block", "thin-first", "keep", "anchor" (`statebank bank ls`).
const char* retention_name(Retention retention);

// One request of a batch read (Tier::get_many).
struct TierRead {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  ObjectRef object;  // set when status is OK
  Status status;
};

struct TierStats {
  uint64_t bytes = 0;
  uint64_t budget_bytes = 0;
  uint64_t blocks = 0;
  uint64_t snapshots = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t check_failures = 0;  // failed this tier's own checks (SSD: checksums, sizes)
  uint64_t quarantined = 0;     // objects taken out by quarantine() or by a failed own check
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  // What only this kind of tier has (SSD: its directory and mode; its write
  // queue and quarantine counts), shown as they are under the tier's name.
  std::map<std::string, std::string> facts;
  std::map<std::string, uint64_t> counts;
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual TierKind kind() const = 0;
  const char* name() const { return tier_kind_name(kind()); }
  virtual bool contains(ObjectKind kind, const Key& key) const = 0;
  virtual Status get(ObjectKind kind, const Key& key, ObjectRef* out) = 0;
  virtual Status put(const ObjectRef& object, Retention retention) = 0;
  // Removes an object because a copy of it failed a check (this tier's own
  // or one made above it: the Bank's token and parent comparison, compose,
  // Model::verify_state, the audit). Afterwards contains() is false and
  // get() misses, until a later put() stores a fresh copy. A tier that keeps
  // files moves the object aside for inspection (SSD: quarantine/); others
  // simply drop it. Returns true and counts it in TierStats::quarantined
  // when the object was here; false when it was not (already removed by a
  // concurrent caller, evicted, never stored), so a failure is counted once.
  // Idempotent; `why` goes to the tier's log.
  virtual bool quarantine(ObjectKind kind, const Key& key, const std::string& why) = 0;
  // Reads several objects; each request gets the status get() would give it.
  // Tiers where a read waits on a device override it to read concurrently.
  virtual void get_many(std::span<TierRead> reads) {
    for (auto& r : reads) r.status = get(r.kind, r.key, &r.object);
  }
  virtual TierStats stats() const = 0;
};

}  // namespace sb
