#include "bank/pins.h"

#include <algorithm>

namespace sb {

bool PinSet::protects(ObjectKind, const Key& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (until_.empty()) return false;
  const auto it = until_.find(key);
  return it != until_.end() && it->second > clock_.now_ms();
}

void PinSet::rebuild_locked() {
  until_.clear();
  int64_t earliest = INT64_MAX;
  for (const auto& [id, pin] : pins_) earliest = std::min(earliest, pin.expires_ms);
  earliest_expiry_.store(earliest, std::memory_order_relaxed);
  for (const auto& [id, pin] : pins_)
    for (const Key& k : pin.keys) {
      int64_t& until = until_[k];
      until = std::max(until, pin.expires_ms);
    }
}

void PinSet::add(Pin pin) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = pin.id;
  pins_[id] = std::move(pin);
  rebuild_locked();
}

bool PinSet::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pins_.erase(id) == 0) return false;
  rebuild_locked();
  return true;
}

size_t PinSet::remove_root(const Key& root) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = std::erase_if(pins_, [&](const auto& p) { return p.second.has_root && p.second.root == root; });
  if (n) rebuild_locked();
  return n;
}

size_t PinSet::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = pins_.size();
  pins_.clear();
  rebuild_locked();
  return n;
}

std::vector<Pin> PinSet::list() const {
  std::vector<Pin> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_.now_ms();
    for (const auto& [id, pin] : pins_)
      if (pin.expires_ms > now) out.push_back(pin);
  }
  std::sort(out.begin(), out.end(), [](const Pin& a, const Pin& b) {
    return a.expires_ms != b.expires_ms ? a.expires_ms < b.expires_ms : a.id < b.id;
  });
  return out;
}

size_t PinSet::purge_expired() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.now_ms();
  size_t n = std::erase_if(pins_, [&](const auto& p) { return p.second.expires_ms <= now; });
  if (n) rebuild_locked();
  return n;
}

}  // namespace sb
