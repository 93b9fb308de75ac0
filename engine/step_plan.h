// plan_step(): which rows of which running sequences one StepLoop step
// runs, a pure function of plain data (the running sequences, the token
// budget, the latency budget's state); tests call it with tables of cases.
// Contract (the rules in full: docs/batching.md, "The plan's rules"):
//  - every decoding sequence gets one row, before any prefill row; then
//    draft rows, then prefill chunks, each group in input (admission) order;
//  - decode_rows + prefill_rows <= batch_tokens; an echo chunk <= kGrid rows;
//  - beside decodes, prefill takes at most the latency bound (plan.bound),
//    except a prompt's first grid chunk, which runs whole (bound_overrun);
//  - a refresh step (plan.refresh) runs its decodes and no prefill row;
//  - O(sequences) time. No result depends on the plan (split and batch
//    invariance, model/model.h), only when each token comes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/step_budget.h"

namespace sb {

// One running sequence as the plan sees it.
struct PlanSequence {
  bool prefilling = false;    // false: it decodes one token this step
  int64_t position = 0;       // prompt rows consumed (where the next chunk begins)
  int64_t prompt_tokens = 0;  // where its prefill ends
  int64_t prefill_start = 0;  // where its prefill started: 0 or the restore point
  bool echo = false;          // every row's logits: chunks of at most kGrid rows
  int64_t draft = 0;          // decoding: draft tokens it would verify this step

  // No row of its prefill has run yet: the next chunk is its first.
  bool first_chunk_pending() const { return prefilling && position == prefill_start; }
};

struct PlanInput {
  std::vector<PlanSequence> running;  // in admission order, finished ones left out
  int64_t batch_tokens = 0;           // the token budget of a step
  BudgetState budget;                 // the latency budget's measures
};

// Which rule let a prefill chunk into the step.
enum class ChunkRule {
  kBudget,          // what was left of the bound (and of the token budget)
  kFirstGridChunk,  // a prompt's first grid chunk: whole, beyond what is left of the bound
};

struct PlannedSlice {
  size_t sequence = 0;  // index into PlanInput::running
  bool decode = false;
  int64_t begin = 0, end = 0;  // prefill: prompt rows [begin, end); decode: one row
  ChunkRule rule = ChunkRule::kBudget;  // prefill only
  int64_t bound_left = 0;  // prefill: the bound left when the chunk was admitted
  int64_t draft = 0;       // decode: the draft rows granted beside its decode row

  int64_t rows() const { return decode ? 1 + draft : end - begin; }
};

struct StepPlan {
  std::vector<PlannedSlice> slices;  // decodes, then prefill chunks, in admission order
  int64_t decode_rows = 0, prefill_rows = 0;  // decode_rows counts draft rows too
  int64_t draft_rows = 0;                     // of decode_rows, the drafts'
  // The budget's refresh step: decodes only, to measure one.
  // Also bound.rule == BoundRule::kRefresh; never inferred from row counts.
  bool refresh = false;
  PrefillBound bound;          // the prefill rows the bound allows and why
  int64_t bound_left = 0;      // what is left of it after the step; >= 0
  int64_t bound_overrun = 0;   // first-chunk rows taken beyond the bound

  int64_t rows() const { return decode_rows + prefill_rows; }
  bool empty() const { return slices.empty(); }
};

StepPlan plan_step(const PlanInput& input);

}  // namespace sb
