#include "bank/pins.h"

#include <algorithm>
#include <iterator>

namespace sb {

bool PinSet::protects(ObjectKind, const Key& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (until_.empty()) return false;
  const auto it = until_.find(key);
  return it != until_.end() && *it->second.rbegin() > clock_.now_ms();
}

void PinSet::index_locked(const Pin& pin) {
  for (const Key& k : pin.keys) until_[k].insert(pin.expires_ms);
  expiries_.insert(pin.expires_ms);
  earliest_expiry_.store(*expiries_.begin(), std::memory_order_relaxed);
}

void PinSet::unindex_locked(const Pin& pin) {
  for (const Key& k : pin.keys) {
    const auto it = until_.find(k);
    if (it == until_.end()) continue;
    it->second.erase(it->second.find(pin.expires_ms));
    if (it->second.empty()) until_.erase(it);
  }
  expiries_.erase(expiries_.find(pin.expires_ms));
  earliest_expiry_.store(expiries_.empty() ? INT64_MAX : *expiries_.begin(), std::memory_order_relaxed);
}

void PinSet::erase_locked(std::map<std::string, Pin>::iterator it) {
  unindex_locked(it->second);
  pins_.erase(it);
}

void PinSet::add(Pin pin) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = pins_.find(pin.id); it != pins_.end()) erase_locked(it);
  index_locked(pin);
  std::string id = pin.id;
  pins_.emplace(std::move(id), std::move(pin));
}

bool PinSet::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pins_.find(id);
  if (it == pins_.end()) return false;
  erase_locked(it);
  return true;
}

size_t PinSet::remove_root(const Key& root) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto it = pins_.begin(); it != pins_.end();) {
    const auto next = std::next(it);
    if (it->second.has_root && it->second.root == root) {
      erase_locked(it);
      ++n;
    }
    it = next;
  }
  return n;
}

size_t PinSet::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = pins_.size();
  pins_.clear();
  until_.clear();
  expiries_.clear();
  earliest_expiry_.store(INT64_MAX, std::memory_order_relaxed);
  return n;
}

bool PinSet::find(const std::string& id, Pin* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pins_.find(id);
  if (it == pins_.end() || it->second.expires_ms <= clock_.now_ms()) return false;
  *out = it->second;
  return true;
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
  size_t n = 0;
  for (auto it = pins_.begin(); it != pins_.end();) {
    const auto next = std::next(it);
    if (it->second.expires_ms <= now) {
      erase_locked(it);
      ++n;
    }
    it = next;
  }
  return n;
}

}  // namespace sb
