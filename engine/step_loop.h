// StepLoop: continuous batching. One thread runs steps; each step is one
// Model::forward over the decode token of every running sequence plus
// prefill chunks of the sequences still prefilling, within the token budget.
//
// Promises:
//  1. At most options.max_running sequences run; the others wait in arrival
//     order and are admitted as slots free up, at the start of a step.
//  2. A step consumes at most options.batch_tokens tokens: every running
//     decode first (one token each), then prefill chunks in admission order
//     with what is left (echo chunks at most kGrid rows). Beside running
//     decodes the prefill rows are also held to what fits in
//     options.itl_ratio decode-only steps (engine/step_budget.h), except a
//     prompt's first grid chunk, which runs whole; now and then a refresh
//     step runs the decodes alone. Which rows a step takes is decided by
//     plan_step() (engine/step_plan.h), a pure function of the running
//     sequences, the token budget and the budget's measures, where these
//     rules are written out and tested with tables of cases. Chunks end
//     anywhere: each sequence's PrefillCarry keeps the bits those of an
//     unsplit prefill. So a long prefill delays the running decodes by one
//     step of bounded time at a time, never by its whole length.
//  3. A sequence cancelled (request.cancelled(), on_token returning false),
//     stopped or at max_tokens leaves at the end of the step that saw it; a
//     waiting sequence cancelled before it starts never runs.
//  4. What a sequence gets never depends on the others (model/model.h
//     promise 4; each sequence samples from its own logits with its own
//     sampler).
//  6. A sequence whose logits processor prepares() has its mask computed on
//     its own worker (engine/mask_worker.h) while the next step runs; one
//     whose mask is not ready when its logits are keeps them and sits out
//     steps until it is. The step thread never waits for a mask, so a slow
//     one holds back only its own sequence; nor does it retire a sequence
//     whose worker still runs (the job reads the request).
//  5. Speculation changes no result: a decoding sequence with a draft runs
//     its k + 1 verify rows in the step (granted by the plan, promise 7 of
//     engine/step_plan.h), emits the tokens its sampler draws from them up
//     to the first draw that differs from the draft, and rolls its State
//     back to the row after the last emitted one (engine/speculation.h).
// Thread safety: start() may be called from many threads at once and
// returns at once; a sequence's on_retired runs on the step thread. The
// destructor waits for nothing: call it when no sequence is left in the loop
// (the engine's Admission waits for every one to end first).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/row_cost.h"
#include "engine/sequence.h"
#include "engine/step_budget.h"

namespace sb {

class StepLoop {
 public:
  explicit StepLoop(const EngineContext& context);
  ~StepLoop();
  StepLoop(const StepLoop&) = delete;
  StepLoop& operator=(const StepLoop&) = delete;

  // Hands a restored sequence to the loop, which owns it from here; when it
  // is done (seq.status and seq.result say how it ended) the loop calls its
  // on_retired and deletes it.
  void start(std::unique_ptr<Sequence> seq);

  // Adds the loop's counters (steps, step_tokens, peak_batch) and its
  // verify-row cost estimate to *stats.
  void add_stats(EngineStats* stats) const;

 private:
  // One sequence's share of a step.
  struct Slice {
    Sequence* seq = nullptr;
    int64_t begin = 0, end = 0;  // prompt rows of a prefill chunk
    bool decode = false;
    std::vector<int32_t> tokens;  // decode: the token consumed, then the draft granted
  };

  void loop();
  void admit();  // under mu_
  // Finishes the cancelled, then asks plan_step() (engine/step_plan.h)
  // which rows of the others the step runs.
  std::vector<Slice> next_step();
  void run_step(std::vector<Slice>& slices);
  void end_prefill_chunk(const Slice& slice, SequenceOutput& out);
  // A decode slice's rows: emits tokens from row 0 on while the draft token
  // after a row equals the token drawn from it, then rolls the State back to
  // the last row used (engine/speculation.h).
  void verify_rows(const Slice& slice, SequenceOutput& out);
  // Draws seq.draw's rows while the sequence's mask is ready; the rest wait
  // for the next call (loop() calls it again once the worker is done).
  void draw_rows(Sequence& seq);
  void end_verify(Sequence& seq);  // speculation's record and rollback of a drawn decode slice
  void start_worker(Sequence& seq);
  void mask_done();  // a worker's job ended: wakes the loop
  bool can_step() const;  // step thread, under mu_: a running sequence is not waiting for its mask
  void emit_token(Sequence& seq, const DraftToken* draft = nullptr);
  void finish(Sequence& seq, FinishReason reason);
  void retire_finished();  // takes finished sequences out, calls their on_retired

  const EngineContext& context_;
  StepBudget budget_;         // step thread only
  RowCostEstimate row_cost_;  // step thread only; mirrored in row_cost_now_
  std::atomic<double> row_cost_now_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a sequence arrived, or stopping
  std::deque<Sequence*> waiting_;    // guarded by mu_
  std::vector<Sequence*> running_;   // step thread only; its size mirrored in n_running_
  size_t n_running_ = 0;             // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  bool mask_done_ = false;           // guarded by mu_: a worker finished a job since the loop last looked
  std::atomic<uint64_t> steps_{0}, step_tokens_{0}, peak_batch_{0};
  std::thread thread_;
};

}  // namespace sb
