#include "bank/bank.h"

#include <algorithm>
#include <map>

#include "bank/chain.h"
#include "bank/compose.h"

namespace sb {

RestoreMode RestorePlan::mode() const {
  if (blocks.empty()) return RestoreMode::cold();
  const TierKind first = block_tiers.front();
  bool one = std::all_of(block_tiers.begin(), block_tiers.end(), [&](TierKind t) { return t == first; });
  if (snapshot && snapshot_tier != first) one = false;
  return one ? RestoreMode::from(first) : RestoreMode::mixed();
}

std::vector<TierUse> RestorePlan::tier_uses() const {
  std::vector<TierUse> uses;
  auto note = [&](TierKind tier, const ObjectRef& object) {
    auto at = std::find_if(uses.begin(), uses.end(), [&](const TierUse& u) { return u.tier == tier; });
    if (at == uses.end()) at = uses.insert(uses.end(), TierUse{tier, 0, 0});
    ++at->objects;
    at->bytes += object->payload_bytes();
  };
  for (size_t j = 0; j < blocks.size(); ++j) note(block_tiers[j], blocks[j]);
  if (snapshot) note(snapshot_tier, snapshot);
  std::sort(uses.begin(), uses.end(), [](const TierUse& a, const TierUse& b) { return a.tier < b.tier; });
  return uses;
}

namespace {
// How many other namespaces' roots the other-namespace probe remembers, and
// how many stored siblings a miss compares its tokens with.
constexpr size_t kRecentRoots = 64;
constexpr size_t kSiblings = 64;
}  // namespace

Bank::Bank(std::vector<Tier*> tiers, const WallClock* clock)
    : tiers_(std::move(tiers)), pins_(clock ? *clock : system_wall_clock()) {
  for (Tier* t : tiers_) t->set_eviction_guard(&pins_);
}

Bank::~Bank() {
  // The tiers outlive the Bank; its PinSet does not.
  for (Tier* t : tiers_) t->set_eviction_guard(nullptr);
}

bool Bank::writable() const {
  return std::any_of(tiers_.begin(), tiers_.end(), [](const Tier* t) { return t->writable(); });
}

void Bank::note_root(const Key& root) {
  std::lock_guard<std::mutex> lock(roots_mu_);
  auto it = std::find(recent_roots_.begin(), recent_roots_.end(), root);
  if (it == recent_roots_.begin() && it != recent_roots_.end()) return;
  if (it != recent_roots_.end()) recent_roots_.erase(it);
  recent_roots_.insert(recent_roots_.begin(), root);
  if (recent_roots_.size() > kRecentRoots) recent_roots_.pop_back();
}

std::vector<Key> Bank::other_roots(const Key& root) const {
  std::lock_guard<std::mutex> lock(roots_mu_);
  std::vector<Key> out;
  for (const Key& r : recent_roots_)
    if (r != root) out.push_back(r);
  return out;
}

int64_t Bank::longest_sibling_match(const Key& parent, std::span<const int32_t> tokens) const {
  std::vector<Key> seen;
  int64_t best = -1;
  for (const Tier* t : tiers_) {
    for (const Key& child : t->children(parent, kSiblings)) {
      if (std::find(seen.begin(), seen.end(), child) != seen.end() || seen.size() >= kSiblings) continue;
      seen.push_back(child);
      Key stored_parent;
      std::vector<int32_t> stored;
      // Tokens that do not hash to their key are not evidence of anything.
      if (!t->peek_tokens(child, &stored_parent, &stored).is_ok() || stored_parent != parent ||
          chain_key(parent, stored) != child)
        continue;
      int64_t n = 0;
      while (n < static_cast<int64_t>(std::min(stored.size(), tokens.size())) && stored[n] == tokens[n]) ++n;
      best = std::max(best, n);
    }
  }
  return best;
}

void Bank::explain_miss(std::span<const Key> chain, std::span<const int32_t> prompt, int64_t B, int64_t k,
                        int64_t top, bool lost_block, bool lost_snapshot, RestorePlan* plan) const {
  const auto m = static_cast<int64_t>(chain.size()) - 1;
  if (k < top) {
    // Stored blocks above the restore point went unused: no tier had a good
    // copy of one of them (it failed a check, or was evicted since the
    // presence check), or no snapshot sits among them.
    if ((lost_block || lost_snapshot) && plan->check_failures > 0) plan->miss_reason = MissReason::kCheckFailed;
    else if (lost_block) plan->miss_reason = MissReason::kEvicted;
    else plan->miss_reason = MissReason::kSnapshotMissing;
    return;
  }
  // k == top < m: block top + 1 is in no tier.
  for (int64_t j = top + 2; j <= m; ++j)
    if (held_anywhere(ObjectKind::kBlock, chain[j])) {
      plan->miss_reason = MissReason::kEvicted;
      return;
    }
  const auto next = prompt.subspan(static_cast<size_t>(top * B), static_cast<size_t>(B));
  const int64_t shared = longest_sibling_match(chain[top], next);
  if (shared >= 0 && top * B + shared > 0) {
    plan->miss_reason = MissReason::kDiverged;
    plan->diverged_at = top * B + shared;
    return;
  }
  plan->miss_reason = MissReason::kNoEntry;
  // Whether another namespace holds these tokens is not asked here: that
  // probe's time must not reach the client's timings
  // (stored_in_other_namespace()).
}

bool Bank::stored_in_other_namespace(const Key& root, std::span<const int32_t> first_block) const {
  // Every tier is asked about every other root, in one contains_many per
  // tier, and nothing stops at a hit: the probe costs the same whether or
  // not it finds one.
  std::vector<TierProbe> ask;
  for (const Key& other : other_roots(root)) ask.push_back(TierProbe{ObjectKind::kBlock, chain_key(other, first_block), false});
  bool found = false;
  for (const Tier* t : tiers_) {
    for (auto& p : ask) p.present = false;
    t->contains_many(ask);
    for (const auto& p : ask) found = found || p.present;
  }
  return found;
}

bool Bank::held_anywhere(ObjectKind kind, const Key& key) const {
  for (Tier* t : tiers_)
    if (t->contains(kind, key)) return true;
  return false;
}

Bank::Presence Bank::probe(std::span<const Key> chain, int64_t m, bool recurrent) const {
  Presence presence;
  presence.reserve(static_cast<size_t>(2 * m));
  const size_t none = tiers_.size();
  auto holds = [&](ObjectKind kind, const Key& key) {
    auto at = presence.find(ObjectId{kind, key});
    return at != presence.end() && at->second.tier != none;
  };
  for (size_t i = 0; i < tiers_.size(); ++i) {
    // What the tiers above already offer: blocks 1..best and a snapshot at
    // best. A snapshot below it cannot restore more, so it is not asked for.
    int64_t best = 0;
    while (best < m && holds(ObjectKind::kBlock, chain[best + 1])) ++best;
    if (recurrent)
      while (best > 0 && !holds(ObjectKind::kSnapshot, chain[best])) --best;
    if (best == m) break;
    std::vector<TierProbe> ask;
    for (int64_t j = 1; j <= m; ++j)
      if (!holds(ObjectKind::kBlock, chain[j])) ask.push_back(TierProbe{ObjectKind::kBlock, chain[j], false});
    if (recurrent)
      for (int64_t j = best + 1; j <= m; ++j)
        if (!holds(ObjectKind::kSnapshot, chain[j])) ask.push_back(TierProbe{ObjectKind::kSnapshot, chain[j], false});
    tiers_[i]->contains_many(ask);
    for (const auto& p : ask) {
      Seen& seen = presence.try_emplace(ObjectId{p.kind, p.key}, Seen{none, 0}).first->second;
      if (seen.asked != i) continue;  // skipped by a tier above: first_holder() asks those
      seen.asked = i + 1;
      if (p.present) seen.tier = i;
    }
  }
  return presence;
}

size_t Bank::first_holder(Presence& presence, ObjectKind kind, const Key& key) const {
  const size_t none = tiers_.size();
  Seen& seen = presence.try_emplace(ObjectId{kind, key}, Seen{none, 0}).first->second;
  while (seen.tier == none && seen.asked < tiers_.size()) {
    if (tiers_[seen.asked]->contains(kind, key)) seen.tier = seen.asked;
    ++seen.asked;
  }
  return seen.tier;
}

void Bank::read_ahead(std::span<const ObjectId> ids, Presence& presence, ReadAheads* out) {
  std::vector<std::vector<TierRead>> per_tier(tiers_.size());
  for (const auto& [kind, key] : ids) {
    const size_t tier = first_holder(presence, kind, key);
    if (tier < tiers_.size()) per_tier[tier].push_back(TierRead{kind, key, nullptr, Status()});
  }
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (per_tier[i].empty()) continue;
    tiers_[i]->get_many(per_tier[i]);
    for (auto& r : per_tier[i]) out->emplace(ObjectId{r.kind, r.key}, ReadAhead{i, std::move(r)});
  }
}

template <typename Check>
bool Bank::fetch(ObjectKind kind, const Key& key, Retention retention, const Check& check, RestorePlan* plan,
                 Presence& presence, ReadAheads* ahead, Fetched* out) {
  // The tiers above the first holder did not hold it when asked.
  for (size_t i = first_holder(presence, kind, key); i < tiers_.size(); ++i) {
    ObjectRef object;
    Status got;
    const auto early = ahead->find(ObjectId{kind, key});
    if (early != ahead->end() && early->second.tier == i) {
      got = early->second.read.status;
      object = std::move(early->second.read.object);
      ahead->erase(early);
    } else {
      if (!tiers_[i]->contains(kind, key)) continue;
      got = tiers_[i]->get(kind, key, &object);
    }
    if (!got.is_ok()) {
      // Evicted between contains() and get() is an ordinary miss; a failed
      // checksum is a failed check.
      if (got.code() == Code::kCorruption) {
        ++plan->checks;
        ++plan->check_failures;
      }
      continue;
    }
    ++plan->checks;
    if (Status c = check(*object); !c.is_ok()) {
      ++plan->check_failures;
      check_failures_.fetch_add(1, std::memory_order_relaxed);
      if (tiers_[i]->quarantine(kind, key, c.message())) quarantined_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (i > 0 && tiers_[0]->put(object, retention).is_ok()) ++plan->promoted;
    out->object = std::move(object);
    out->tier = tiers_[i]->kind();
    return true;
  }
  return false;
}

struct Bank::Walk {
  const StateSchema& schema;
  std::span<const int32_t> prompt;
  uint32_t block_tokens;
  int64_t B;
  // The names each position may be served under: the request's own chain
  // first, then the shared one.
  std::vector<std::span<const Key>> chains;
  Presence presence;
  ReadAheads ahead;
  RestorePlan plan;
  std::vector<Fetched> got;  // blocks 1..got.size()
  Fetched snapshot;
  // The walk fell back because no tier had a good copy of a block, or of a
  // snapshot (failed checks, or gone since the presence check).
  bool lost_block = false, lost_snapshot = false;
};

bool Bank::present(Walk& w, ObjectKind kind, int64_t j) const {
  // A copy the read-ahead fetched counts even if its tier has since
  // quarantined it: the walk must see (and report) that failure.
  for (const auto& c : w.chains)
    if (w.ahead.count(ObjectId{kind, c[j]}) || first_holder(w.presence, kind, c[j]) < tiers_.size()) return true;
  return false;
}

// The walk uses these copies and reads one at a time only what a failed
// check makes it fall back to; a tier on a device reads them concurrently.
void Bank::read_ahead_walk(Walk& w, int64_t k) {
  std::vector<ObjectId> ids;
  auto first_name = [&](ObjectKind kind, int64_t j) {
    for (const auto& c : w.chains)
      if (first_holder(w.presence, kind, c[j]) < tiers_.size()) {
        ids.push_back(ObjectId{kind, c[j]});
        return;
      }
  };
  for (int64_t j = 1; j <= k; ++j) first_name(ObjectKind::kBlock, j);
  if (w.schema.has_recurrent() && k > 0) first_name(ObjectKind::kSnapshot, k);
  read_ahead(ids, w.presence, &w.ahead);
}

bool Bank::ensure_blocks(Walk& w, int64_t k) {
  while (static_cast<int64_t>(w.got.size()) < k) {
    const auto j = static_cast<int64_t>(w.got.size());
    const auto tokens = w.prompt.subspan(static_cast<size_t>(j * w.B), w.block_tokens);
    Fetched f;
    bool found = false;
    for (const auto& c : w.chains) {
      auto check = [&](const Object& o) { return check_block(o, w.schema, c[j + 1], c[j], j * w.B, tokens); };
      if ((found = fetch(ObjectKind::kBlock, c[j + 1], Retention::kBlock, check, &w.plan, w.presence, &w.ahead, &f)))
        break;
    }
    if (!found) return false;
    w.got.push_back(std::move(f));
  }
  return true;
}

int64_t Bank::walk_snapshots(Walk& w, int64_t k) {
  while (k > 0) {
    if (!present(w, ObjectKind::kSnapshot, k)) {
      --k;
      continue;
    }
    if (!ensure_blocks(w, k)) {
      w.lost_block = true;
      k = static_cast<int64_t>(w.got.size());  // the walk ends before the block that failed
      continue;
    }
    bool found = false;
    for (const auto& c : w.chains) {
      auto check = [&](const Object& o) { return check_snapshot(o, w.schema, c[k], k * w.B); };
      if ((found = fetch(ObjectKind::kSnapshot, c[k], Retention::kKeep, check, &w.plan, w.presence, &w.ahead,
                         &w.snapshot)))
        break;
    }
    if (found) break;
    w.lost_snapshot = true;
    --k;
  }
  return k;
}

Status Bank::plan_restore(const StateSchema& schema, std::span<const Key> chain, std::span<const int32_t> prompt,
                          uint32_t block_tokens, RestorePlan* out, std::span<const Key> shared) {
  if (chain.empty()) return Status::invalid("bank: a chain holds at least its root key");
  if (!shared.empty() && shared.size() != chain.size())
    return Status::invalid("bank: a shared chain has as many keys as the request's");
  const auto m = static_cast<int64_t>(chain.size()) - 1;
  if (static_cast<int64_t>(prompt.size()) < m * block_tokens)
    return Status::invalid("bank: the prompt is shorter than its chain");
  lookups_.fetch_add(1, std::memory_order_relaxed);
  const auto B = static_cast<int64_t>(block_tokens);
  Walk w{schema, prompt, block_tokens, B, {chain}, {}, {}, {}, {}, {}, false, false};
  if (!shared.empty()) w.chains.push_back(shared);
  RestorePlan& plan = w.plan;

  // Which tier holds what: every block of the chain and, with recurrent
  // components, every snapshot at a block boundary, in one question per tier
  // (and one more for the shared chain).
  w.presence = probe(chain, m, schema.has_recurrent());
  if (!shared.empty()) w.presence.merge(probe(shared, m, schema.has_recurrent()));

  int64_t matched = 0;
  while (matched < m && present(w, ObjectKind::kBlock, matched + 1)) ++matched;
  plan.matched_tokens = matched * B;

  // The walk starts at the highest k that has a snapshot in some tier.
  int64_t k = matched;
  if (schema.has_recurrent())
    while (k > 0 && !present(w, ObjectKind::kSnapshot, k)) --k;

  // Read ahead what the walk most likely ends with.
  read_ahead_walk(w, k);

  if (!schema.has_recurrent()) {
    w.lost_block = !ensure_blocks(w, k);
    k = static_cast<int64_t>(w.got.size());
  } else {
    k = walk_snapshots(w, k);
  }

  for (int64_t j = 0; j < k; ++j) {
    const Fetched& f = w.got[static_cast<size_t>(j)];
    plan.blocks.push_back(f.object);
    plan.block_tiers.push_back(f.tier);
    plan.bytes_read += f.object->payload_bytes();
  }
  if (k > 0 && w.snapshot.object) {
    plan.snapshot = w.snapshot.object;
    plan.snapshot_tier = w.snapshot.tier;
    plan.snapshot_position = k * B;
    plan.bytes_read += w.snapshot.object->payload_bytes();
  }
  plan.restore_point = k * B;
  plan.common_prefix_tokens = common_prefix(plan.blocks, prompt);
  if (k < m) explain_miss(chain, prompt, B, k, matched, w.lost_block, w.lost_snapshot, &plan);
  note_root(chain[0]);

  if (k > 0) {
    restores_.fetch_add(1, std::memory_order_relaxed);
    restored_tokens_.fetch_add(static_cast<uint64_t>(k * B), std::memory_order_relaxed);
  }
  promoted_.fetch_add(static_cast<uint64_t>(plan.promoted), std::memory_order_relaxed);
  *out = std::move(plan);
  return Status::ok();
}

Status Bank::publish(const ObjectRef& object, Retention retention) {
  if (pins_.any_expired()) sweep_pins();
  Status first;
  bool stored = false;
  for (Tier* t : tiers_) {
    Status s = t->put(object, retention);
    if (s.is_ok())
      stored = true;
    else if (first.is_ok())
      first = s;
  }
  if (stored) published_.fetch_add(1, std::memory_order_relaxed);
  return first;
}

uint64_t Bank::quarantine(std::span<const ObjectId> objects, const std::string& why) {
  check_failures_.fetch_add(1, std::memory_order_relaxed);
  uint64_t removed = 0;
  for (const auto& o : objects)
    for (Tier* t : tiers_)
      if (t->quarantine(o.kind, o.key, why)) ++removed;
  quarantined_.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

BankStats Bank::stats() const {
  BankStats s;
  s.lookups = lookups_.load();
  s.restores = restores_.load();
  s.restored_tokens = restored_tokens_.load();
  s.check_failures = check_failures_.load();
  s.quarantined = quarantined_.load();
  s.published = published_.load();
  s.promoted = promoted_.load();
  return s;
}

}  // namespace sb
