// Tier: one storage level of the bank (RAM, SSD, a shared remote store),
// composed by the Bank behind this one interface. Contract, for every
// implementation (the reasons: docs/bank.md, "Tiers" and "Pins"):
//  - get() returns only objects verified in this tier; a failed check is a
//    miss (kCorruption), the object quarantined and counted;
//  - put() of a present name is a no-op; an object is visible to contains()
//    and get() only once complete (and durable, for SSD);
//  - quarantine() takes an object out for good: the next request computes it
//    cold and publishes it afresh;
//  - eviction skips what the eviction guard protects (bank/pins.h) in tiers
//    that honour it (RAM, SSD); protected objects count in the budget, so a
//    put() that would hold the tier above it is not stored;
//  - the operator's methods (entries, describe, children, peek_tokens,
//    discard) never count as a use. Every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

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

// One question of a batch presence probe (Tier::contains_many).
struct TierProbe {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  bool present = false;  // the answer
};

// One request of a batch read (Tier::get_many).
struct TierRead {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  ObjectRef object;  // set when status is OK
  Status status;
};

// What one kind of tier contributed to a restore (RestorePlan::tier_uses).
struct TierUse {
  TierKind tier = TierKind::kRam;
  int64_t objects = 0;  // objects served from it
  uint64_t bytes = 0;   // their payload bytes
};

struct TierStats {
  uint64_t bytes = 0;
  uint64_t budget_bytes = 0;
  uint64_t blocks = 0;
  uint64_t snapshots = 0;
  uint64_t block_bytes = 0;     // bytes by object kind: block_bytes + snapshot_bytes == bytes
  uint64_t snapshot_bytes = 0;
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

// One stored object as the operator sees it (Tier::entries).
struct TierEntry {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  Key parent;               // blocks: K(k); snapshots: zero
  int64_t position = 0;     // blocks: first token kB; snapshots: kB
  uint32_t tokens = 0;      // blocks: B; snapshots: 0
  uint64_t bytes = 0;       // what it costs this tier
  Retention retention = Retention::kBlock;
  uint64_t hits = 0;        // successful reads in this process
  int64_t last_use_ms = 0;  // Unix ms of the last write or successful read (0: unknown)
};

// Decides what eviction must skip. The Bank hands one to every tier
// (Tier::set_eviction_guard); protects() is thread-safe, cheap, and never
// calls into a tier, so a tier may ask it under its own lock.
class EvictionGuard {
 public:
  virtual ~EvictionGuard() = default;
  virtual bool protects(ObjectKind kind, const Key& key) const = 0;
};

// Told what a tier stores and removes, as it happens (the bank's events,
// bank/events/kv_events.h). Called under the tier's own lock: an observer
// must be cheap, must not block, and must never call into a tier.
class TierObserver {
 public:
  virtual ~TierObserver() = default;
  // A new object is in the tier (visible to contains()); `entry` as
  // entries() lists it, `tokens` a block's token ids where the tier has them
  // at hand (empty otherwise).
  virtual void stored(TierKind tier, const TierEntry& entry, std::span<const int32_t> tokens) = 0;
  // An object left the tier (evicted, discarded, quarantined, found gone).
  virtual void removed(TierKind tier, ObjectKind kind, const Key& key) = 0;
};

class Tier {
 public:
  virtual ~Tier() = default;
  virtual TierKind kind() const = 0;
  const char* name() const { return tier_kind_name(kind()); }
  virtual bool contains(ObjectKind kind, const Key& key) const = 0;
  // Answers several contains() at once. Tiers where a question costs a round
  // trip override it to ask them all in one.
  virtual void contains_many(std::span<TierProbe> probes) const {
    for (auto& p : probes) p.present = contains(p.kind, p.key);
  }
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

  // --- The operator's view (docs/bank.md, "The operator's view"). The
  // defaults are those of a tier that cannot enumerate or remove what it
  // holds; RAM and SSD override them all.

  // Installs the guard eviction consults from now on (nullptr: none). The
  // guard must outlive its installation.
  virtual void set_eviction_guard(const EvictionGuard* guard) { (void)guard; }
  // The guard protects less than before (a pin expired or was removed):
  // evict to the budget now.
  virtual void guard_changed() {}
  // Installs the observer told of every store and removal from now on
  // (nullptr: none); it is first told of everything the tier holds. It must
  // outlive its installation. Tiers that cannot enumerate what they hold (a
  // shared remote store) tell nothing.
  virtual void set_observer(TierObserver* observer) { (void)observer; }
  // Whether put() can store anything (false: a read-only SSD tier).
  virtual bool writable() const { return true; }
  // Waits until every put() made before the call is visible or has failed,
  // at most until `deadline`.
  virtual Status flush(std::chrono::steady_clock::time_point deadline) {
    (void)deadline;
    return Status::ok();
  }
  // Everything published here, in no particular order.
  virtual std::vector<TierEntry> entries() const { return {}; }
  // One object's entry; false when absent.
  virtual bool describe(ObjectKind kind, const Key& key, TierEntry* out) const {
    (void)kind, (void)key, (void)out;
    return false;
  }
  // Keys of the blocks here whose parent is `parent`, at most `max`.
  virtual std::vector<Key> children(const Key& parent, size_t max) const {
    (void)parent, (void)max;
    return {};
  }
  // A block's token ids, read without its rows where the tier can. The
  // caller verifies them against the key (chain_key(parent, tokens)).
  virtual Status peek_tokens(const Key& block, Key* parent, std::vector<int32_t>* tokens) const {
    (void)block, (void)parent, (void)tokens;
    return Status::unsupported(std::string(name()) + " tier cannot peek at blocks");
  }
  // Removes an object now (the operator's flush); not an eviction.
  // kNotFound when absent.
  virtual Status discard(ObjectKind kind, const Key& key) {
    (void)kind, (void)key;
    return Status::unsupported(std::string(name()) + " tier cannot discard objects");
  }
};

}  // namespace sb
