// Step planning: which rows of which running sequences one step of the
// StepLoop runs, as a pure function of plain data (the running sequences, the
// token budget and the latency budget's state). The step loop builds a
// PlanInput from its sequences, calls plan_step() and runs what it returns;
// tests call plan_step() with tables of cases, no thread and no model.
//
// Promises of plan_step() (engine/step_loop.h promise 2 in detail):
//  1. Every decoding sequence gets one row, in input order, before any
//     prefill row. Slices come in input (admission) order: decodes first,
//     then prefill chunks.
//  2. decode_rows + prefill_rows <= batch_tokens (when batch_tokens is at
//     least the number of decoding sequences, as EngineOptions demands). An
//     echo sequence's chunk is at most kGrid rows.
//  3. The latency bound (prefill_bound(), engine/step_budget.h) is the
//     prefill rows the step may take beside its decodes; plan.bound says how
//     many and which rule set them. Prefill chunks take it in admission
//     order; a chunk admitted by the budget (ChunkRule::kBudget) takes at
//     most what is left of it.
//  4. The first-chunk rule: a prompt's first grid chunk (from where its
//     prefill starts, 0 or the restore point, to the next multiple of kGrid,
//     or the prompt's end) runs whole in the first step that takes any of its
//     rows, whatever is left of the bound, within the token budget
//     (ChunkRule::kFirstGridChunk). Its rows beyond the bound are counted in
//     plan.bound_overrun; plan.bound_left never goes below 0 (a chunk after
//     an overrun admitted by the budget gets no row).
//  5. A refresh step (plan.refresh, BoundRule::kRefresh) runs its decodes
//     and no prefill row, not even a first chunk: the budget measures a
//     decode-only step again.
//  6. Chunks of the budget end anywhere (each sequence's PrefillCarry keeps
//     the bits of an unsplit prefill); a first chunk ends on the grid or at
//     the prompt's end.
//  7. Speculative rows (engine/speculation.h): a decoding sequence with a
//     draft of n tokens asks for n more rows beside its decode row (the
//     verify form, model/model.h). Drafts are granted after every decode row
//     and before any prefill row, in input order, each cut to what is left
//     of the token budget; while a sequence is prefilling they leave kGrid
//     rows of it (or what is left of its prompt, if less) to the prefill, so
//     speculation never stalls a prompt. A sequence's draft rows count as
//     decode rows (decode_rows, the latency bound's decode rows), its slice
//     says how many it got (PlannedSlice::draft); a cut draft is a shorter
//     one, which changes no result.
//  8. O(sequences) time; no result ever depends on the plan (model/model.h
//     promises 1 and 4), only when each token comes.
//
// The model's passes. Model::forward runs a step of more than 512 rows
// (Transformer::kMaxPassRows) as passes of at most 512 rows, each sequence
// cut on the kGrid grid, so that a pass's activations stay small. That is a
// second split below this plan, invisible to it: with --batch-tokens at most
// 512 (the default is 512) no planned step is ever re-split; above it, the
// passes are the model's. It cannot change a bit: each sequence's rows are
// cut on the grid (split invariance, model/model.h promise 1) and every pass
// gives each sequence what it gets alone (batch invariance, promise 4).
// docs/batching.md says the same.
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
  int64_t draft = 0;          // decoding: draft tokens it would verify this step (promise 7)

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
  kFirstGridChunk,  // promise 4: whole, beyond what is left of the bound
};

struct PlannedSlice {
  size_t sequence = 0;  // index into PlanInput::running
  bool decode = false;
  int64_t begin = 0, end = 0;  // prefill: prompt rows [begin, end); decode: one row
  ChunkRule rule = ChunkRule::kBudget;  // prefill only
  int64_t bound_left = 0;  // prefill: the bound left when the chunk was admitted
  int64_t draft = 0;       // decode: the draft rows granted beside its decode row (promise 7)

  int64_t rows() const { return decode ? 1 + draft : end - begin; }
};

struct StepPlan {
  std::vector<PlannedSlice> slices;  // decodes, then prefill chunks, in admission order
  int64_t decode_rows = 0, prefill_rows = 0;  // decode_rows counts draft rows too
  int64_t draft_rows = 0;                     // of decode_rows, the drafts' (promise 7)
  // The budget's refresh step: decodes only, to measure one (promise 5).
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
