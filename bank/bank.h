// Bank: the tiers (RAM, then SSD, then the remote tier) behind one lookup
// and one publish. plan_restore() finds, fetches and checks every object a
// restore needs and returns them in a RestorePlan, touching nothing live;
// the caller composes the State (bank/compose.h). The lookup rules, why a
// plan names a miss reason, and the operator's calls (prefixes, pins,
// flush): docs/bank.md, "The Bank's rules".
//
// Thread safety: all methods may be called concurrently; the tiers are
// thread-safe and objects are immutable. The Bank does not own its tiers;
// they must outlive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bank/miss_reason.h"
#include "bank/object.h"
#include "bank/pins.h"
#include "bank/restore_mode.h"
#include "bank/tier.h"
#include "bank/wall_clock.h"
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
  // Set when restore_point < (chain.size() - 1) * B (docs/bank.md, "The
  // Bank's rules", the miss reason); else kNone.
  // Never kBypass, kEcho or kReadOnly (the engine knows those) nor
  // kOtherNamespace (that is the flag below).
  MissReason miss_reason = MissReason::kNone;
  int64_t diverged_at = -1;          // kDiverged: the first prompt token that differs from the stored chain
  // (Whether another namespace stores the prompt is Bank::stored_in_other_namespace,
  // asked apart, after the client's timings are taken.)

  // Derived from the tiers above: cold when nothing is restored, a tier's
  // mode when every object came from that kind of tier, else mixed.
  RestoreMode mode() const;
  // Objects and bytes per kind of tier that served them, in TierKind order.
  std::vector<TierUse> tier_uses() const;
};

// What one tier holds of a prefix.
struct TierShare {
  std::string tier;  // Tier::name()
  uint64_t objects = 0;
  uint64_t bytes = 0;
};

// One stored prefix: a chain of blocks ending at a leaf (a block no stored
// block continues), with the snapshots along it.
struct PrefixInfo {
  Key tail;                   // the leaf, K(k): the prefix's name
  Key root;                   // K0, when every block back to it is stored
  bool has_root = false;
  int64_t tokens = 0;         // kB: the tokens its blocks cover
  int64_t restorable_tokens = 0;  // the longest prefix of it a request can restore
  int64_t blocks = 0;         // blocks of the chain stored (in any tier)
  int64_t snapshots = 0;      // snapshots along it
  uint64_t bytes = 0;         // all of those, in every tier (shared ancestors included)
  std::vector<TierShare> tiers;  // in bank order
  uint64_t hits = 0;          // restores that used it or a part of it: its most-read block's reads, all tiers
  int64_t last_use_ms = 0;    // the latest write or read of any of its objects
  int64_t pinned_until_ms = 0;   // 0: not pinned
  std::vector<int32_t> first_tokens;  // the first block's tokens (prefixes() with first_tokens > 0)
};

struct FlushResult {
  uint64_t objects = 0;
  uint64_t bytes = 0;
  uint64_t pins = 0;          // pins dropped
  uint64_t unattributed = 0;  // objects cut off from their root (a namespace flush cannot tell whose)
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
  // REQUIRES: tiers non-empty, none null. `clock` (default: the system's)
  // dates pins; it must outlive the Bank.
  explicit Bank(std::vector<Tier*> tiers, const WallClock* clock = nullptr);
  ~Bank();
  Bank(const Bank&) = delete;
  Bank& operator=(const Bank&) = delete;

  const std::vector<Tier*>& tiers() const { return tiers_; }

  // `chain` holds K0..Km: the walk considers at most m blocks (the caller
  // leaves at least one prompt token after K(m)). `prompt` holds at least
  // m * block_tokens tokens. `shared`, when given, is the same prompt's
  // chain under a namespace this request may also read (a shared system
  // prompt, server/protocols/namespace.h): each position's block and snapshot may
  // then come from either chain, checked against its own (a block's
  // content depends on its tokens only, not on the namespace).
  Status plan_restore(const StateSchema& schema, std::span<const Key> chain, std::span<const int32_t> prompt,
                      uint32_t block_tokens, RestorePlan* out, std::span<const Key> shared = {});

  // The operator's other_namespace probe (MissReason::kOtherNamespace): is
  // the first block of `first_block` (B tokens) stored under the root of
  // another namespace looked up recently? Asks every tier about every other
  // root (one contains_many per tier) and never stops at a hit, so it costs
  // the same whether or not it finds one. The engine calls it after the
  // client-visible timings (lookup_ms, restore_ms) are taken, and only on a
  // kNoEntry miss with nothing of the prompt stored; its answer goes to the
  // operator (metrics, activity), never to the client.
  bool stored_in_other_namespace(const Key& root, std::span<const int32_t> first_block) const;

  // Puts the object into every tier. Returns the first tier error (the
  // object may still be in the other tiers).
  Status publish(const ObjectRef& object, Retention retention);

  // A check after planning failed on a restore made of `objects` (compose,
  // Model::verify_state, the audit): counts one failure and takes every
  // object out of every tier. Returns how many copies were removed.
  uint64_t quarantine(std::span<const ObjectId> objects, const std::string& why);

  BankStats stats() const;
  // Whether some tier stores what is published.
  bool writable() const;

  // --- The operator's view.

  // Stored prefixes, longest first. `needs_snapshot`: the model has
  // recurrent components (a restore point needs a snapshot). With
  // first_tokens > 0, each prefix with a root carries up to that many of its
  // first block's tokens.
  std::vector<PrefixInfo> prefixes(bool needs_snapshot, size_t first_tokens) const;
  // Pins the prefix whose chain keys are `chain` (K0..Kk, k >= 1) for ttl_ms.
  Status pin_prefix(std::span<const Key> chain, int64_t tokens, int64_t ttl_ms, Pin* out);
  // Pins the stored chain ending at block `tail`, back to its root (or to
  // the first absent block). kNotFound when no tier holds `tail`.
  Status pin_chain(const Key& tail, int64_t ttl_ms, Pin* out);
  bool unpin(const std::string& id);
  std::vector<Pin> pins() const { return pins_.list(); }
  bool find_pin(const std::string& id, Pin* out) const { return pins_.find(id, out); }
  // Bytes and objects each tier holds under a pin's names.
  std::vector<TierShare> pinned_share(const Pin& pin) const;
  // Forgets expired pins and lets the tiers evict to their budgets.
  void sweep_pins();
  int64_t now_ms() const { return pins_.now_ms(); }
  // Removes every object under `root` (nullptr: every object), in every
  // tier, and the pins on them; waits for queued writes first.
  Status flush(const Key* root, FlushResult* out);

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

  // Which tier first holds an object: `tier` (tiers_.size(): none of the
  // first `asked` tiers holds it; the tiers below were not asked yet).
  struct Seen {
    size_t tier = 0;
    size_t asked = 0;
  };
  struct ObjectIdHash {
    size_t operator()(const ObjectId& id) const { return KeyHash()(id.key) ^ static_cast<size_t>(id.kind); }
  };
  using Presence = std::unordered_map<ObjectId, Seen, ObjectIdHash>;
  // Asks each tier, in one contains_many, about the chain's blocks and
  // snapshots that could restore more than the tiers above already offer.
  Presence probe(std::span<const Key> chain, int64_t m, bool recurrent) const;
  // The first tier holding the object (tiers_.size(): none); asks the tiers
  // the probe skipped, one at a time, when it has to.
  size_t first_holder(Presence& presence, ObjectKind kind, const Key& key) const;
  // Asks the tiers directly (explain_miss runs after the walk, on a miss only).
  bool held_anywhere(ObjectKind kind, const Key& key) const;
  // The miss reason (docs/bank.md, "The Bank's rules"), for a walk that
  // ended at k blocks below m.
  void explain_miss(std::span<const Key> chain, std::span<const int32_t> prompt, int64_t B, int64_t k,
                    int64_t top, bool lost_block, bool lost_snapshot, RestorePlan* plan) const;
  // The roots of other namespaces looked up recently, for the probe.
  void note_root(const Key& root);
  std::vector<Key> other_roots(const Key& root) const;
  // The longest common prefix of `tokens` with a stored child of `parent`
  // whose tokens check against its key; -1 when none.
  int64_t longest_sibling_match(const Key& parent, std::span<const int32_t> tokens) const;
  // Reads each object from the first tier holding it, one get_many per tier.
  void read_ahead(std::span<const ObjectId> ids, Presence& presence, ReadAheads* out);
  // Asks every tier holding the object in order until one copy passes
  // `check`; promotes it into the first tier when it came from below. A copy
  // in `ahead` stands for that tier's get() and is taken out of it.
  template <typename Check>
  bool fetch(ObjectKind kind, const Key& key, Retention retention, const Check& check, RestorePlan* plan,
             Presence& presence, ReadAheads* ahead, Fetched* out);

  // One plan_restore(): its request, what the tiers hold, what it has
  // fetched so far (bank.cpp). The steps below are plan_restore's.
  struct Walk;
  // Does some tier hold block or snapshot j under one of the walk's names
  // (or did the read-ahead fetch it)?
  bool present(Walk& w, ObjectKind kind, int64_t j) const;
  // Reads ahead blocks 1..k and the snapshot at k, each under the first name
  // some tier holds, in one get_many per tier.
  void read_ahead_walk(Walk& w, int64_t k);
  // Fetches blocks up to k; false when block w.got.size()+1 has no good copy
  // under any of its names.
  bool ensure_blocks(Walk& w, int64_t k);
  // With recurrent components: from k down, the highest k whose blocks and
  // snapshot both have good copies (0: none); sets w.snapshot.
  int64_t walk_snapshots(Walk& w, int64_t k);

  std::vector<Tier*> tiers_;
  PinSet pins_;
  mutable std::mutex roots_mu_;
  std::vector<Key> recent_roots_;  // most recent first, bounded
  std::atomic<uint64_t> lookups_{0};
  std::atomic<uint64_t> restores_{0};
  std::atomic<uint64_t> restored_tokens_{0};
  std::atomic<uint64_t> check_failures_{0};
  std::atomic<uint64_t> quarantined_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> promoted_{0};
};

}  // namespace sb
