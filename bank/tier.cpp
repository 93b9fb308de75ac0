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

const char* retention_name(Retention retention) {
  switch (retention) {
    case Retention::kBlock: return "block";
    case Retention::kThinFirst: return "thin-first";
    case Retention::kKeep: return "keep";
    case Retention::kAnchor: return "anchor";
  }
  return "?";
}

}  // namespace sb
