#include "server/pin_budget.h"

namespace sb {

void PinBudget::forget_expired_locked(std::map<std::string, int64_t>& pins, int64_t now_ms) {
  std::erase_if(pins, [&](const auto& p) { return p.second <= now_ms; });
}

bool PinBudget::try_pin(const std::string& tenant, int64_t now_ms, const Pin& pin, const BytesOf& bytes_of) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& pins = tenants_[tenant];
  forget_expired_locked(pins, now_ms);
  uint64_t held = 0;
  // Stops once the budget is reached: a refusal needs no more.
  for (auto it = pins.begin(); it != pins.end() && held < max_bytes_; ++it) held += bytes_of(it->first);
  if (pins.size() >= max_pins_ || held >= max_bytes_) {
    ++(pins.size() >= max_pins_ ? refused_.pins : refused_.bytes);
    if (pins.empty()) tenants_.erase(tenant);
    return false;
  }
  std::string id;
  int64_t expires_ms = 0;
  if (pin(&id, &expires_ms)) pins[id] = expires_ms;
  if (pins.empty()) tenants_.erase(tenant);
  return true;
}

PinBudget::Refused PinBudget::refused() {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

size_t PinBudget::pins_of(const std::string& tenant, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return 0;
  forget_expired_locked(it->second, now_ms);
  return it->second.size();
}

}  // namespace sb
