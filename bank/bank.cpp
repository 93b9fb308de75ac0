#include "bank/bank.h"

#include <algorithm>
#include <map>

#include "bank/compose.h"

namespace sb {

RestoreMode RestorePlan::mode() const {
  if (blocks.empty()) return RestoreMode::cold();
  const TierKind first = block_tiers.front();
  bool one = std::all_of(block_tiers.begin(), block_tiers.end(), [&](TierKind t) { return t == first; });
  if (snapshot && snapshot_tier != first) one = false;
  return one ? RestoreMode::from(first) : RestoreMode::mixed();
}

Bank::Bank(std::vector<Tier*> tiers) : tiers_(std::move(tiers)) {}

bool Bank::any_contains(ObjectKind kind, const Key& key) const {
  for (Tier* t : tiers_)
    if (t->contains(kind, key)) return true;
  return false;
}

void Bank::read_ahead(std::span<const ObjectId> ids, ReadAheads* out) {
  std::vector<std::vector<TierRead>> per_tier(tiers_.size());
  for (const auto& [kind, key] : ids) {
    for (size_t i = 0; i < tiers_.size(); ++i) {
      if (!tiers_[i]->contains(kind, key)) continue;
      per_tier[i].push_back(TierRead{kind, key, nullptr, Status()});
      break;
    }
  }
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (per_tier[i].empty()) continue;
    tiers_[i]->get_many(per_tier[i]);
    for (auto& r : per_tier[i]) out->emplace(ObjectId{r.kind, r.key}, ReadAhead{i, std::move(r)});
  }
}

template <typename Check>
bool Bank::fetch(ObjectKind kind, const Key& key, Retention retention, const Check& check, RestorePlan* plan,
                 ReadAheads* ahead, Fetched* out) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
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

Status Bank::plan_restore(const StateSchema& schema, std::span<const Key> chain, std::span<const int32_t> prompt,
                          uint32_t block_tokens, RestorePlan* out, std::span<const Key> shared) {
  if (chain.empty()) return Status::invalid("bank: a chain holds at least its root key");
  if (!shared.empty() && shared.size() != chain.size())
    return Status::invalid("bank: a shared chain has as many keys as the request's");
  const auto m = static_cast<int64_t>(chain.size()) - 1;
  if (static_cast<int64_t>(prompt.size()) < m * block_tokens)
    return Status::invalid("bank: the prompt is shorter than its chain");
  lookups_.fetch_add(1, std::memory_order_relaxed);
  RestorePlan plan;
  const auto B = static_cast<int64_t>(block_tokens);
  // The names each position may be served under: the request's own chain
  // first, then the shared one.
  std::vector<std::span<const Key>> chains = {chain};
  if (!shared.empty()) chains.push_back(shared);

  ReadAheads ahead;
  // A copy the read-ahead fetched counts even if its tier has since
  // quarantined it: the walk must see (and report) that failure.
  auto present = [&](ObjectKind kind, int64_t j) {
    for (const auto& c : chains)
      if (ahead.count(ObjectId{kind, c[j]}) || any_contains(kind, c[j])) return true;
    return false;
  };

  int64_t matched = 0;
  while (matched < m && present(ObjectKind::kBlock, matched + 1)) ++matched;
  plan.matched_tokens = matched * B;

  // The walk starts at the highest k that has a snapshot in some tier.
  int64_t k = matched;
  if (schema.has_recurrent())
    while (k > 0 && !present(ObjectKind::kSnapshot, k)) --k;

  // Read ahead what the walk most likely ends with (blocks 1..k and the
  // snapshot at k, each under the first name some tier holds), in one
  // get_many per tier, so that a tier on a device reads them concurrently.
  // The walk uses these copies and reads one at a time only what a failed
  // check makes it fall back to.
  {
    std::vector<ObjectId> ids;
    auto first_name = [&](ObjectKind kind, int64_t j) {
      for (const auto& c : chains)
        if (any_contains(kind, c[j])) {
          ids.push_back(ObjectId{kind, c[j]});
          return;
        }
    };
    for (int64_t j = 1; j <= k; ++j) first_name(ObjectKind::kBlock, j);
    if (schema.has_recurrent() && k > 0) first_name(ObjectKind::kSnapshot, k);
    read_ahead(ids, &ahead);
  }

  std::vector<Fetched> got;
  // Fetches blocks up to k; false when block got.size()+1 has no good copy
  // under any of its names.
  auto ensure_blocks = [&](int64_t k) {
    while (static_cast<int64_t>(got.size()) < k) {
      const auto j = static_cast<int64_t>(got.size());
      const auto tokens = prompt.subspan(static_cast<size_t>(j * B), block_tokens);
      Fetched f;
      bool found = false;
      for (const auto& c : chains) {
        auto check = [&](const Object& o) { return check_block(o, schema, c[j + 1], c[j], j * B, tokens); };
        if ((found = fetch(ObjectKind::kBlock, c[j + 1], Retention::kBlock, check, &plan, &ahead, &f))) break;
      }
      if (!found) return false;
      got.push_back(std::move(f));
    }
    return true;
  };

  Fetched snapshot;
  if (!schema.has_recurrent()) {
    ensure_blocks(k);
    k = static_cast<int64_t>(got.size());
  } else {
    while (k > 0) {
      if (!present(ObjectKind::kSnapshot, k)) {
        --k;
        continue;
      }
      if (!ensure_blocks(k)) {
        k = static_cast<int64_t>(got.size());  // the walk ends before the block that failed
        continue;
      }
      bool found = false;
      for (const auto& c : chains) {
        auto check = [&](const Object& o) { return check_snapshot(o, schema, c[k], k * B); };
        if ((found = fetch(ObjectKind::kSnapshot, c[k], Retention::kKeep, check, &plan, &ahead, &snapshot)))
          break;
      }
      if (found) break;
      --k;
    }
  }

  for (int64_t j = 0; j < k; ++j) {
    const Fetched& f = got[static_cast<size_t>(j)];
    plan.blocks.push_back(f.object);
    plan.block_tiers.push_back(f.tier);
    plan.bytes_read += f.object->payload_bytes();
  }
  if (k > 0 && snapshot.object) {
    plan.snapshot = snapshot.object;
    plan.snapshot_tier = snapshot.tier;
    plan.snapshot_position = k * B;
    plan.bytes_read += snapshot.object->payload_bytes();
  }
  plan.restore_point = k * B;
  plan.common_prefix_tokens = common_prefix(plan.blocks, prompt);

  if (k > 0) {
    restores_.fetch_add(1, std::memory_order_relaxed);
    restored_tokens_.fetch_add(static_cast<uint64_t>(k * B), std::memory_order_relaxed);
  }
  promoted_.fetch_add(static_cast<uint64_t>(plan.promoted), std::memory_order_relaxed);
  *out = std::move(plan);
  return Status::ok();
}

Status Bank::publish(const ObjectRef& object, Retention retention) {
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
