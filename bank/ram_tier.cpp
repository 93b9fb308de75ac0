#include "bank/ram_tier.h"

#include <algorithm>

#include "bank/wall_clock.h"

namespace sb {

namespace {
constexpr size_t kMaxEvictedLog = 1 << 16;
}  // namespace

RamTier::RamTier(uint64_t budget_bytes) : budget_(budget_bytes) { stats_.budget_bytes = budget_bytes; }

bool RamTier::contains(ObjectKind kind, const Key& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.count({kind, key}) != 0;
}

Status RamTier::get(ObjectKind kind, const Key& key, ObjectRef* out) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = find(kind, key);
  if (e == nullptr) {
    ++stats_.misses;
    return Status::not_found(std::string("ram tier holds no ") + object_kind_name(kind) + " " + key.hex());
  }
  e->tick = ++tick_;
  ++e->hits;
  e->last_use_ms = wall_now_ms();
  *out = e->object;
  ++stats_.hits;
  stats_.bytes_read += e->object->payload_bytes();
  reorder_touched(*e->object);
  return Status::ok();
}

Status RamTier::put(const ObjectRef& object, Retention retention) {
  if (!object) return Status::invalid("ram tier: null object");
  if (object->kind == ObjectKind::kBlock && object->parent == object->key)
    return Status::invalid("ram tier: block names itself as parent");
  const uint64_t size = object->payload_bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = find(object->kind, object->key)) {
    // First wins: the content stays; only the reason to keep it may rise.
    e->retention = std::max(e->retention, retention);
    e->tick = ++tick_;
    e->last_use_ms = wall_now_ms();
    reorder_around(*e->object);
    evict_to_budget();
    return Status::ok();
  }
  if (size > budget_)
    return Status::exhausted("ram tier: object of " + std::to_string(size) + " bytes exceeds the budget of " +
                             std::to_string(budget_));
  // Pinned objects count in the budget like any other: a pinned object that
  // does not fit beside the pinned ones already here is not stored (an
  // unpinned one is stored and evicted first, below).
  if (bytes_ + size > budget_ && guarded(object->kind, object->key) && guarded_bytes() + size > budget_)
    return Status::exhausted("ram tier: the budget is held by pinned objects");
  Entry entry;
  entry.object = object;
  entry.retention = object->kind == ObjectKind::kBlock ? Retention::kBlock : std::max(retention, Retention::kThinFirst);
  entry.tick = ++tick_;
  entry.last_use_ms = wall_now_ms();
  auto placed = objects_.emplace(Name{object->kind, object->key}, entry).first;
  if (observer_) observer_->stored(TierKind::kRam, entry_of(placed->second), object->tokens);
  bytes_ += size;
  stats_.bytes_written += size;
  if (object->kind == ObjectKind::kBlock) {
    children_[object->parent].push_back(object->key);
    ++stats_.blocks;
    stats_.block_bytes += size;
  } else {
    ++stats_.snapshots;
    stats_.snapshot_bytes += size;
  }
  reorder_around(*object);
  evict_to_budget();
  return Status::ok();
}

TierStats RamTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  s.bytes = bytes_;
  s.budget_bytes = budget_;
  return s;
}

void RamTier::set_budget(uint64_t budget_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = budget_bytes;
  evict_to_budget();
}

bool RamTier::erase(ObjectKind kind, const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (find(kind, key) == nullptr) return false;
  remove(kind, key, /*evicted=*/false);
  return true;
}

bool RamTier::quarantine(ObjectKind kind, const Key& key, const std::string&) {
  std::lock_guard<std::mutex> lock(mu_);
  if (find(kind, key) == nullptr) return false;
  remove(kind, key, /*evicted=*/false);
  ++stats_.quarantined;
  return true;
}

std::vector<std::pair<ObjectKind, Key>> RamTier::take_evicted() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Name> out;
  out.swap(evicted_);
  return out;
}

RamTier::Entry* RamTier::find(ObjectKind kind, const Key& key) {
  auto it = objects_.find({kind, key});
  return it == objects_.end() ? nullptr : &it->second;
}

const RamTier::Entry* RamTier::find(ObjectKind kind, const Key& key) const {
  auto it = objects_.find({kind, key});
  return it == objects_.end() ? nullptr : &it->second;
}

uint32_t RamTier::child_count(const Key& key) const {
  auto it = children_.find(key);
  return it == children_.end() ? 0 : static_cast<uint32_t>(it->second.size());
}

std::pair<int, uint64_t> RamTier::place(ObjectKind kind, const Key& key) {
  Entry* e = find(kind, key);
  if (e == nullptr) return {0, 0};
  if (kind == ObjectKind::kBlock) {
    if (child_count(key) != 0) return {4, e->tick};
    if (Entry* s = find(ObjectKind::kSnapshot, key))
      return {s->retention == Retention::kAnchor ? 3 : 2, std::max(e->tick, s->tick)};
    return {2, e->tick};
  }
  const Entry* block = find(ObjectKind::kBlock, key);
  const bool continued = child_count(key) != 0;
  if (block != nullptr && !continued) return {0, 0};  // attached: evicted with its block
  if (e->retention == Retention::kAnchor) return {block != nullptr ? 0 : 3, e->tick};
  return {continued ? 1 : 2, e->tick};
}

void RamTier::reorder(ObjectKind kind, const Key& key) {
  const Name name{kind, key};
  if (auto it = placed_.find(name); it != placed_.end()) {
    order_.erase(it->second);
    placed_.erase(it);
  }
  const auto [cls, tick] = place(kind, key);
  if (cls == 0) return;
  const OrderKey ok{cls, tick, kind, key};
  order_.insert(ok);
  placed_.emplace(name, ok);
}

void RamTier::reorder_around(const Object& object) {
  const Key key = object.key;
  if (object.kind == ObjectKind::kBlock) {
    const Key parent = object.parent;
    reorder(ObjectKind::kBlock, parent);
    reorder(ObjectKind::kSnapshot, parent);
  }
  reorder(ObjectKind::kBlock, key);
  reorder(ObjectKind::kSnapshot, key);
}

void RamTier::reorder_touched(const Object& object) {
  reorder(ObjectKind::kBlock, object.key);
  reorder(ObjectKind::kSnapshot, object.key);
}

void RamTier::remove(ObjectKind kind, const Key& key, bool evicted) {
  auto it = objects_.find({kind, key});
  const ObjectRef object = it->second.object;  // keeps the object alive for reorder_around
  bytes_ -= object->payload_bytes();
  objects_.erase(it);
  if (observer_) observer_->removed(TierKind::kRam, kind, key);
  if (kind == ObjectKind::kBlock) {
    auto siblings = children_.find(object->parent);
    std::erase(siblings->second, key);
    if (siblings->second.empty()) children_.erase(siblings);
    --stats_.blocks;
    stats_.block_bytes -= object->payload_bytes();
  } else {
    --stats_.snapshots;
    stats_.snapshot_bytes -= object->payload_bytes();
  }
  if (evicted) {
    // The log is for tests and inspection; keep it bounded.
    if (evicted_.size() >= kMaxEvictedLog) evicted_.erase(evicted_.begin(), evicted_.begin() + kMaxEvictedLog / 2);
    evicted_.push_back({kind, key});
    ++stats_.evictions;
  }
  reorder_around(*object);
}

bool RamTier::guarded(ObjectKind kind, const Key& key) const {
  return guard_ != nullptr && guard_->protects(kind, key);
}

uint64_t RamTier::guarded_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, e] : objects_)
    if (guarded(name.first, name.second)) n += e.object->payload_bytes();
  return n;
}

void RamTier::evict_to_budget() {
  while (bytes_ > budget_) {
    // The first candidate in the order that no pin protects. Each removal
    // may reorder the rest, so the scan starts over; it passes over pinned
    // candidates only, and pins are few.
    auto it = order_.begin();
    bool unit = false;
    for (; it != order_.end(); ++it) {
      const auto& [cls, tick, kind, key] = *it;
      unit = kind == ObjectKind::kBlock && (cls == 2 || cls == 3) && find(ObjectKind::kSnapshot, key) != nullptr;
      if (!guarded(kind, key) && !(unit && guarded(ObjectKind::kSnapshot, key))) break;
    }
    if (it == order_.end()) return;  // only pinned objects are left
    const auto [cls, tick, kind, key] = *it;
    remove(kind, key, /*evicted=*/true);
    if (unit) remove(ObjectKind::kSnapshot, key, /*evicted=*/true);
  }
}

void RamTier::set_eviction_guard(const EvictionGuard* guard) {
  std::lock_guard<std::mutex> lock(mu_);
  guard_ = guard;
}

void RamTier::guard_changed() {
  std::lock_guard<std::mutex> lock(mu_);
  evict_to_budget();
}

TierEntry RamTier::entry_of(const Entry& e) const {
  TierEntry t;
  t.kind = e.object->kind;
  t.key = e.object->key;
  t.parent = e.object->parent;
  t.position = e.object->position;
  t.tokens = static_cast<uint32_t>(e.object->tokens.size());
  t.bytes = e.object->payload_bytes();
  t.retention = e.retention;
  t.hits = e.hits;
  t.last_use_ms = e.last_use_ms;
  return t;
}

void RamTier::set_observer(TierObserver* observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = observer;
  if (observer_)
    for (const auto& [name, e] : objects_) observer_->stored(TierKind::kRam, entry_of(e), e.object->tokens);
}

std::vector<TierEntry> RamTier::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TierEntry> out;
  out.reserve(objects_.size());
  for (const auto& [name, e] : objects_) out.push_back(entry_of(e));
  return out;
}

bool RamTier::describe(ObjectKind kind, const Key& key, TierEntry* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = find(kind, key);
  if (e == nullptr) return false;
  *out = entry_of(*e);
  return true;
}

std::vector<Key> RamTier::children(const Key& parent, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(parent);
  if (it == children_.end()) return {};
  return std::vector<Key>(it->second.begin(), it->second.begin() + static_cast<ptrdiff_t>(std::min(max, it->second.size())));
}

Status RamTier::peek_tokens(const Key& block, Key* parent, std::vector<int32_t>* tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = find(ObjectKind::kBlock, block);
  if (e == nullptr) return Status::not_found("ram tier holds no block " + block.hex());
  *parent = e->object->parent;
  *tokens = e->object->tokens;
  return Status::ok();
}

Status RamTier::discard(ObjectKind kind, const Key& key) {
  if (!erase(kind, key)) return Status::not_found(std::string("ram tier holds no ") + object_kind_name(kind) + " " + key.hex());
  return Status::ok();
}

}  // namespace sb
