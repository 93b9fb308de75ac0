#include "bank/ram_tier.h"

#include <algorithm>

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
    reorder_around(*e->object);
    evict_to_budget();
    return Status::ok();
  }
  if (size > budget_)
    return Status::exhausted("ram tier: object of " + std::to_string(size) + " bytes exceeds the budget of " +
                             std::to_string(budget_));
  Entry entry;
  entry.object = object;
  entry.retention = object->kind == ObjectKind::kBlock ? Retention::kBlock : std::max(retention, Retention::kThinFirst);
  entry.tick = ++tick_;
  objects_.emplace(Name{object->kind, object->key}, entry);
  bytes_ += size;
  stats_.bytes_written += size;
  if (object->kind == ObjectKind::kBlock) {
    ++children_[object->parent];
    ++stats_.blocks;
  } else {
    ++stats_.snapshots;
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

uint32_t RamTier::children(const Key& key) const {
  auto it = children_.find(key);
  return it == children_.end() ? 0 : it->second;
}

std::pair<int, uint64_t> RamTier::place(ObjectKind kind, const Key& key) {
  Entry* e = find(kind, key);
  if (e == nullptr) return {0, 0};
  if (kind == ObjectKind::kBlock) {
    if (children(key) != 0) return {4, e->tick};
    if (Entry* s = find(ObjectKind::kSnapshot, key))
      return {s->retention == Retention::kAnchor ? 3 : 2, std::max(e->tick, s->tick)};
    return {2, e->tick};
  }
  const Entry* block = find(ObjectKind::kBlock, key);
  const bool continued = children(key) != 0;
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
  if (kind == ObjectKind::kBlock) {
    if (--children_[object->parent] == 0) children_.erase(object->parent);
    --stats_.blocks;
  } else {
    --stats_.snapshots;
  }
  if (evicted) {
    // The log is for tests and inspection; keep it bounded.
    if (evicted_.size() >= kMaxEvictedLog) evicted_.erase(evicted_.begin(), evicted_.begin() + kMaxEvictedLog / 2);
    evicted_.push_back({kind, key});
    ++stats_.evictions;
  }
  reorder_around(*object);
}

void RamTier::evict_to_budget() {
  while (bytes_ > budget_ && !order_.empty()) {
    const auto [cls, tick, kind, key] = *order_.begin();
    const bool unit = kind == ObjectKind::kBlock && (cls == 2 || cls == 3) &&
                      find(ObjectKind::kSnapshot, key) != nullptr;
    remove(kind, key, /*evicted=*/true);
    if (unit) remove(ObjectKind::kSnapshot, key, /*evicted=*/true);
  }
}

}  // namespace sb
