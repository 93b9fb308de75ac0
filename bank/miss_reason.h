// MissReason: why a request's restore point is below the longest usable
// prefix of its n-token prompt, floor((n - 1) / B) * B (whole blocks,
// keeping one token to prefill): kNone when it restored all of it, else
// exactly one reason, the first obstacle above its restore point (docs/bank.md,
// "Why a request missed"). A small dense index (counters are arrays of
// kMissReasons); the names are what users see in JSON and metric labels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sb {

enum class MissReason : uint8_t {
  kNone = 0,
  kNoEntry,  // nothing is stored past the restore point
  // A stored chain shares the prompt's blocks up to the restore point, then
  // differs at token `diverged_at` (inside the next block, or at its first).
  kDiverged,
  // The first block the walk needed is in no tier while a later block of
  // the same chain is (an evicted middle block: a hole).
  kEvicted,
  // The blocks above the restore point are stored, but no snapshot of the
  // recurrent state sits at any boundary among them.
  kSnapshotMissing,
  // Stored objects above the restore point failed a check (checksum,
  // tokens, shapes, the composed state) and no good copy was left.
  kCheckFailed,
  // Operator-only: nothing stored in the prompt's own namespace, but its
  // first block is under another namespace seen since start. A request's
  // record keeps its own reason and a flag (operator_miss_reason()); no
  // client's response shows it, so no tenant learns what another stored.
  kOtherNamespace,
  // Nothing is stored past the restore point and nothing will be (the
  // request is read-only, or no tier accepts writes).
  kReadOnly,
  kBypass,  // the bank was not consulted (X-Cache-Mode: bypass, or no bank)
  // An echo request needs every prompt token's logits, which a restored
  // prefix lacks: it skips the lookup.
  kEcho,
};
inline constexpr size_t kMissReasons = 10;

// "none", "no_entry", "diverged", "evicted", "snapshot_missing",
// "check_failed", "other_namespace", "read_only", "bypass", "echo".
const char* miss_reason_name(MissReason reason);

// The operator's reason: kOtherNamespace where the prompt's own namespace
// has nothing (`own` is kNoEntry or kReadOnly) and its first block is stored
// under another namespace; else `own`.
inline MissReason operator_miss_reason(MissReason own, bool stored_in_other_namespace) {
  const bool nothing_own = own == MissReason::kNoEntry || own == MissReason::kReadOnly;
  return nothing_own && stored_in_other_namespace ? MissReason::kOtherNamespace : own;
}

}  // namespace sb
