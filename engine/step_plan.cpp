#include "engine/step_plan.h"

#include <algorithm>

#include "model/model.h"

namespace sb {
namespace {

// Echo needs every row's logits: at most this many rows per step, so memory
// stays kEchoRows x vocabulary floats whatever the prompt's length.
constexpr int64_t kEchoRows = kGrid;

// Speculative rows (docs/batching.md, "The plan's rules"): each decode
// slice's draft rows, cut to what the token budget leaves after the decode
// rows and, while a prompt waits, its next rows.
int64_t grant_drafts(const PlanInput& input, int64_t decode_rows, std::vector<PlannedSlice>& slices) {
  int64_t keep_for_prefill = 0;
  for (const PlanSequence& seq : input.running)
    if (seq.prefilling)
      keep_for_prefill = std::max(keep_for_prefill, std::min(kGrid, seq.prompt_tokens - seq.position));
  int64_t room = std::max<int64_t>(input.batch_tokens - decode_rows - keep_for_prefill, 0), granted = 0;
  for (PlannedSlice& slice : slices) {
    slice.draft = std::min(std::max<int64_t>(input.running[slice.sequence].draft, 0), room);
    room -= slice.draft;
    granted += slice.draft;
  }
  return granted;
}

}  // namespace

StepPlan plan_step(const PlanInput& input) {
  StepPlan plan;
  for (size_t i = 0; i < input.running.size(); ++i)
    if (!input.running[i].prefilling) plan.slices.push_back(PlannedSlice{i, true, 0, 0, ChunkRule::kBudget, 0, 0});
  plan.decode_rows = static_cast<int64_t>(plan.slices.size());
  plan.draft_rows = grant_drafts(input, plan.decode_rows, plan.slices);
  plan.decode_rows += plan.draft_rows;
  int64_t room = input.batch_tokens - plan.decode_rows;  // the token budget
  plan.bound = prefill_bound(input.budget, plan.decode_rows, room);
  plan.refresh = plan.bound.rule == BoundRule::kRefresh;
  int64_t bound = plan.bound.rows;  // what is left of the latency bound; >= 0
  for (size_t i = 0; i < input.running.size(); ++i) {
    const PlanSequence& seq = input.running[i];
    if (!seq.prefilling || plan.refresh) continue;
    const int64_t begin = seq.position;
    int64_t rows = bound;
    ChunkRule rule = ChunkRule::kBudget;
    // A prompt's first grid chunk runs whole, whatever is left of the bound:
    // a short turn (after a restored prefix, say) answers in one step, and
    // prompts that arrive together start to decode together. Spread over
    // steps, each started steps after the one before it, and the steps in
    // between ran with fewer and fewer decodes (docs/batching.md).
    if (seq.first_chunk_pending() && kGrid - begin % kGrid > rows) {
      rows = kGrid - begin % kGrid;
      rule = ChunkRule::kFirstGridChunk;
    }
    rows = std::min(rows, seq.echo ? std::min(room, kEchoRows) : room);
    // The carry lets a chunk end anywhere with the bits of an unsplit prefill.
    const int64_t end = std::min(seq.prompt_tokens, begin + rows);
    if (end <= begin) continue;  // the bound's rows go in admission order
    plan.slices.push_back(PlannedSlice{i, false, begin, end, rule, bound});
    const int64_t taken = end - begin;
    plan.prefill_rows += taken;
    plan.bound_overrun += std::max<int64_t>(taken - bound, 0);
    bound = std::max<int64_t>(bound - taken, 0);
    room -= taken;
  }
  plan.bound_left = bound;
  return plan;
}

}  // namespace sb
