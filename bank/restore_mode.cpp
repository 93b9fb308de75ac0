#include "bank/restore_mode.h"

namespace sb {

std::optional<TierKind> RestoreMode::tier() const {
  if (index_ == 0 || index_ > kTierKinds) return std::nullopt;
  return static_cast<TierKind>(index_ - 1);
}

const char* RestoreMode::name() const {
  if (auto t = tier()) return tier_kind_name(*t);
  if (index_ == 0) return "cold";
  return *this == mixed() ? "mixed" : "bypass";
}

}  // namespace sb
