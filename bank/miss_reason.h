// MissReason: why a request's restore point is below the longest prefix it
// could have restored (docs/bank.md, "Why a request missed").
//
// The longest usable prefix of an n-token prompt is floor((n - 1) / B) * B:
// whole blocks, keeping one token to prefill. A request that restored all of
// it has no reason (kNone); one that restored less has exactly one, the first
// obstacle above its restore point:
//
//  - kBypass: the bank was not consulted (X-Cache-Mode: bypass, or no bank).
//  - kEcho: an echo request needs the logits of every prompt token, which a
//    restored prefix does not have; it skips the lookup.
//  - kCheckFailed: stored objects above the restore point failed a check
//    (checksum, tokens, shapes, or the composed state) and no good copy was
//    left.
//  - kSnapshotMissing: the blocks above the restore point are stored, but no
//    snapshot of the recurrent state sits at any boundary among them.
//  - kEvicted: the first block the walk needed is in no tier while a later
//    block of the same chain is (an evicted middle block: a hole).
//  - kDiverged: a stored chain shares the prompt's blocks up to the restore
//    point and then differs at token `diverged_at` (inside the next block, or
//    at its first token).
//  - kOtherNamespace: nothing is stored for the prompt in its own namespace,
//    but its first block is stored under another namespace seen since start.
//    Operator-only: a request's record carries its own-namespace reason
//    (kNoEntry or kReadOnly) and a flag; operator_miss_reason() combines
//    them for the operator's views (/metrics, /v1/bank/requests), and the
//    client's response never shows the flag, so no tenant learns what
//    another one stored.
//  - kReadOnly: nothing is stored past the restore point and nothing will be:
//    the request is X-Cache-Mode: read-only, or no tier of the bank accepts
//    writes. The next identical request misses the same way.
//  - kNoEntry: nothing is stored past the restore point.
//
// A reason is a small dense index (counters are arrays of kCount); names are
// what users see in JSON and metric labels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sb {

enum class MissReason : uint8_t {
  kNone = 0,
  kNoEntry,
  kDiverged,
  kEvicted,
  kSnapshotMissing,
  kCheckFailed,
  kOtherNamespace,
  kReadOnly,
  kBypass,
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
