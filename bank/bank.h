// Bank: an ordered list of tiers (RAM first, then SSD, later remote) behind
// one lookup and one publish (docs/bank.md, "Lookup, restore, continue").
//
// Plan, then apply: plan_restore() finds, fetches and checks every object a
// restore needs and returns them in a RestorePlan; nothing live is touched.
// The caller composes the State from the plan (bank/compose.h).
//
// Lookup rules:
//  1. The walk goes over chain keys K(1), K(2), ... and stops at the first
//     block that no tier holds: a hole (an evicted middle block) ends the
//     walk; nothing after it is ever used.
//  2. The restore point is the largest kB such that blocks 1..k were fetched
//     and passed check_block (tokens compared with the prompt) and, when the
//     schema has recurrent components, a snapshot at kB passed
//     check_snapshot.
//  3. A tier's get() failure (kCorruption: checksum) or a failed check is a
//     miss for that copy: it is counted, the copy is quarantined in the tier
//     that served it (Tier::quarantine), the next tier is asked for the same
//     object, and if none has a good copy the walk falls back to the longest
//     prefix that passes. A request after it computes the missing part cold
//     and publishes it again (self-healing).
//  4. An object served from a lower tier is promoted (put) into the first
//     tier.
//  5. Reads: the objects the walk most likely ends with are requested first,
//     one Tier::get_many per tier, so that a tier on a device reads them
//     concurrently; the rules above then apply to those copies unchanged.
// publish() writes an object into every tier; a name already present is a
// no-op there (first wins). quarantine() takes objects out of every tier
// after a check made once the plan was handed out failed (compose,
// Model::verify_state, the audit): which copy was wrong is not known then,
// and a missing object only costs a recomputation.
//
// Thread safety: all methods may be called concurrently; the tiers are
// thread-safe and objects are immutable. The Bank does not own its tiers;
// they must outlive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bank/object.h"
#include "bank/restore_mode.h"
#include "bank/tier.h"
#include "common/status.h"
#include "runtime/state.h"

namespace sb {

struct RestorePlan {
  int64_t restore_point = 0;         // kB: tokens covered by `blocks`
  int64_t matched_tokens = 0;        // leading tokens covered by blocks present in some tier
  int64_t common_prefix_tokens = 0;  // leading prompt tokens equal to the served blocks' tokens
  int64_t snapshot_position = 0;     // position of `snapshot` (0: none)
  std::vector<ObjectRef> blocks;     // blocks 1..k, in order
  std::vector<TierKind> block_tiers; // which tier served each of `blocks`
  ObjectRef snapshot;                // at kB; null without recurrent components or when k == 0
  TierKind snapshot_tier = TierKind::kRam;  // which tier served `snapshot`, when set
  uint64_t bytes_read = 0;           // payload bytes of the served objects
  int64_t checks = 0;                // objects checked (tier checksums and check_block/check_snapshot)
  int64_t check_failures = 0;
  int64_t promoted = 0;              // objects copied into the first tier

  // Derived from the tiers above: cold when nothing is restored, a tier's
  // mode when every object came from that kind of tier, else mixed.
  RestoreMode mode() const;
};

// An object a restore used, by name.
struct ObjectId {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;
  auto operator<=>(const ObjectId&) const = default;
  bool operator==(const ObjectId&) const = default;
};

struct BankStats {
  uint64_t lookups = 0;
  uint64_t restores = 0;         // lookups with restore_point > 0
  uint64_t restored_tokens = 0;
  // Failed checks made by the Bank and its callers (stored tokens, parent,
  // position and shapes; compose and verify_state; the audit), each once. A
  // tier's own checksum failures are counted by that tier.
  uint64_t check_failures = 0;
  uint64_t quarantined = 0;      // copies taken out of tiers by the Bank (walk and quarantine())
  uint64_t published = 0;        // publish() calls that reached at least one tier
  uint64_t promoted = 0;
};

class Bank {
 public:
  // REQUIRES: tiers non-empty, none null.
  explicit Bank(std::vector<Tier*> tiers);

  const std::vector<Tier*>& tiers() const { return tiers_; }

  // `chain` holds K0..Km: the walk considers at most m blocks (the caller
  // leaves at least one prompt token after K(m)). `prompt` holds at least
  // m * block_tokens tokens. `shared`, when given, is the same prompt's
  // chain under a namespace this request may also read (a shared system
  // prompt, server/namespace.h): each position's block and snapshot may
  // then come from either chain, checked against its own (a block's
  // content depends on its tokens only, not on the namespace).
  Status plan_restore(const StateSchema& schema, std::span<const Key> chain, std::span<const int32_t> prompt,
                      uint32_t block_tokens, RestorePlan* out, std::span<const Key> shared = {});

  // Puts the object into every tier. Returns the first tier error (the
  // object may still be in the other tiers).
  Status publish(const ObjectRef& object, Retention retention);

  // A check after planning failed on a restore made of `objects` (compose,
  // Model::verify_state, the audit): counts one failure and takes every
  // object out of every tier. Returns how many copies were removed.
  uint64_t quarantine(std::span<const ObjectId> objects, const std::string& why);

  BankStats stats() const;

 private:
  struct Fetched {
    ObjectRef object;
    TierKind tier = TierKind::kRam;
  };
  struct ReadAhead {
    size_t tier = 0;  // the first tier that held the object
    TierRead read;
  };
  using ReadAheads = std::map<ObjectId, ReadAhead>;

  bool any_contains(ObjectKind kind, const Key& key) const;
  // Reads each object from the first tier holding it, one get_many per tier.
  void read_ahead(std::span<const ObjectId> ids, ReadAheads* out);
  // Asks every tier holding the object in order until one copy passes
  // `check`; promotes it into the first tier when it came from below. A copy
  // in `ahead` stands for that tier's get() and is taken out of it.
  template <typename Check>
  bool fetch(ObjectKind kind, const Key& key, Retention retention, const Check& check, RestorePlan* plan,
             ReadAheads* ahead, Fetched* out);

  std::vector<Tier*> tiers_;
  std::atomic<uint64_t> lookups_{0};
  std::atomic<uint64_t> restores_{0};
  std::atomic<uint64_t> restored_tokens_{0};
  std::atomic<uint64_t> check_failures_{0};
  std::atomic<uint64_t> quarantined_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> promoted_{0};
};

}  // namespace sb
