#include "bank/miss_reason.h"

namespace sb {

const char* miss_reason_name(MissReason reason) {
  switch (reason) {
    case MissReason::kNone: return "none";
    case MissReason::kNoEntry: return "no_entry";
    case MissReason::kDiverged: return "diverged";
    case MissReason::kEvicted: return "evicted";
    case MissReason::kSnapshotMissing: return "snapshot_missing";
    case MissReason::kCheckFailed: return "check_failed";
    case MissReason::kOtherNamespace: return "other_namespace";
    case MissReason::kReadOnly: return "read_only";
    case MissReason::kBypass: return "bypass";
    case MissReason::kEcho: return "echo";
  }
  return "?";
}

}  // namespace sb
