#include "bank/tier.h"

namespace sb {

const char* tier_kind_name(TierKind kind) {
  switch (kind) {
    case TierKind::kRam: return "ram";
    case TierKind::kSsd: return "ssd";
    case TierKind::kRemote: return "remote";
  }
  return "?";
}

}  // namespace sb
