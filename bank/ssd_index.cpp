#include "bank/ssd_index.h"

#include <algorithm>

namespace sb {

void SsdIndex::account(const SsdEntry& e, int sign) {
  const bool block = e.kind == ObjectKind::kBlock;
  if (sign > 0) {
    bytes_ += e.bytes;
    if (block) block_bytes_ += e.bytes;
    (block ? blocks_ : snapshots_) += 1;
    if (block) children_.emplace(e.parent, e.key);
  } else {
    bytes_ -= e.bytes;
    if (block) block_bytes_ -= e.bytes;
    (block ? blocks_ : snapshots_) -= 1;
    if (block) {
      auto [from, to] = children_.equal_range(e.parent);
      for (auto it = from; it != to; ++it)
        if (it->second == e.key) {
          children_.erase(it);
          break;
        }
    }
  }
}

bool SsdIndex::insert(SsdEntry entry) {
  Id id{entry.kind, entry.key};
  if (entries_.count(id)) return false;
  entry.last_access = ++clock_;
  order_.emplace(order_of(entry), id);
  account(entry, +1);
  entries_.emplace(id, entry);
  return true;
}

void SsdIndex::load(std::vector<std::pair<int64_t, SsdEntry>> found) {
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    const auto ra = static_cast<uint8_t>(a.second.retention), rb = static_cast<uint8_t>(b.second.retention);
    return std::tie(a.first, ra, a.second.kind, a.second.key) < std::tie(b.first, rb, b.second.kind, b.second.key);
  });
  for (auto& [age, e] : found) insert(e);
}

const SsdEntry* SsdIndex::find(ObjectKind kind, const Key& key) const {
  auto it = entries_.find(Id{kind, key});
  return it == entries_.end() ? nullptr : &it->second;
}

bool SsdIndex::erase(ObjectKind kind, const Key& key) {
  auto it = entries_.find(Id{kind, key});
  if (it == entries_.end()) return false;
  order_.erase(order_of(it->second));
  account(it->second, -1);
  if (it->second.doomed) doomed_bytes_ -= it->second.bytes;
  entries_.erase(it);
  return true;
}

bool SsdIndex::touch(ObjectKind kind, const Key& key, int64_t now_ms) {
  auto it = entries_.find(Id{kind, key});
  if (it == entries_.end()) return false;
  order_.erase(order_of(it->second));
  it->second.last_access = ++clock_;
  if (now_ms > 0) {
    ++it->second.hits;
    it->second.last_use_ms = now_ms;
  }
  order_.emplace(order_of(it->second), it->first);
  return true;
}

const SsdEntry* SsdIndex::oldest() const {
  if (order_.empty()) return nullptr;
  return &entries_.at(order_.begin()->second);
}

bool SsdIndex::undoom(ObjectKind kind, const Key& key) {
  auto it = entries_.find(Id{kind, key});
  if (it == entries_.end()) return false;
  if (it->second.doomed) {
    it->second.doomed = false;
    doomed_bytes_ -= it->second.bytes;
  }
  return true;
}

std::vector<Key> SsdIndex::children(const Key& parent, size_t max) const {
  std::vector<Key> out;
  auto [from, to] = children_.equal_range(parent);
  for (auto it = from; it != to && out.size() < max; ++it) out.push_back(it->second);
  return out;
}

std::vector<SsdEntry> SsdIndex::in_eviction_order() const {
  std::vector<SsdEntry> out;
  out.reserve(order_.size());
  for (const auto& [o, id] : order_) out.push_back(entries_.at(id));
  return out;
}

}  // namespace sb
