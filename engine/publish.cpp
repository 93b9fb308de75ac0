// Publish: the prompt's new full blocks and the snapshots captured at their
// ends go into the bank once the prefill is complete. It copies rows out of
// the live State, so it runs before the sequence's first decode step appends
// to it.
#include <algorithm>

#include "bank/bank.h"
#include "bank/compose.h"
#include "engine/sequence.h"

namespace sb {
namespace {

// The engine's chat knowledge, translated into the bank's retention classes.
Retention retention_of(SnapshotReason r) {
  switch (r) {
    case SnapshotReason::kInterval: return Retention::kThinFirst;
    // Where a request ended: a replay of it restores here.
    case SnapshotReason::kPromptEnd: return Retention::kKeep;
    // A message boundary and a branch point are where conversations part:
    // later requests restore from them.
    case SnapshotReason::kBranch: return Retention::kAnchor;
    case SnapshotReason::kMessage: return Retention::kAnchor;
  }
  return Retention::kThinFirst;
}

}  // namespace

void publish_prompt(const EngineContext& context, Sequence& seq) {
  if (seq.published || !seq.publish) return;
  seq.published = true;
  const int64_t B = context.options.block_tokens, n = seq.prompt_tokens();
  const std::span<const int32_t> prompt(seq.request.prompt);
  // Each new full block, then the snapshot at its end when one was taken.
  size_t next_snap = 0;
  for (int64_t j = seq.restore_point / B; j < n / B; ++j) {
    const auto tokens = prompt.subspan(static_cast<size_t>(j * B), static_cast<size_t>(B));
    (void)context.bank->publish(make_block(seq.state, seq.keys[j + 1], seq.keys[j], j * B, tokens), Retention::kBlock);
    seq.result.restore.stored_tokens += B;
    const int64_t end = (j + 1) * B;
    while (next_snap < seq.snapshots.size() && seq.snapshots[next_snap].position < end) ++next_snap;
    if (next_snap < seq.snapshots.size() && seq.snapshots[next_snap].position == end) {
      const auto it = std::find_if(seq.places.begin(), seq.places.end(),
                                   [&](const SnapshotPlace& p) { return p.position == end; });
      if (it != seq.places.end())
        (void)context.bank->publish(make_snapshot(seq.snapshots[next_snap], seq.keys[j + 1]), retention_of(it->reason));
    }
  }
}

}  // namespace sb
