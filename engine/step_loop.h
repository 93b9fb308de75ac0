// StepLoop: continuous batching (docs/batching.md). One thread runs steps;
// each is one Model::forward over every running decode (with its draft
// rows) plus prefill chunks, as plan_step() (engine/step_plan.h) decides.
// Contract:
//  - at most options.max_running sequences run; the others wait in arrival
//    order for a slot, admitted at the start of a step;
//  - a sequence cancelled, stopped or at max_tokens leaves at the end of the
//    step that saw it; one cancelled while waiting never runs;
//  - what a sequence gets never depends on the others or on the plan (batch
//    and split invariance, model/model.h; speculation emits only what the
//    sampler draws, engine/speculation.h);
//  - the step thread never waits for a logits processor's mask
//    (engine/mask_worker.h): a sequence whose mask is late sits out steps.
// Thread safety: start() from any thread, returns at once; on_retired runs
// on the step thread. Destroy it only when no sequence is left.
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
  std::atomic<uint64_t> decode_only_steps_{0}, decode_only_tokens_{0};
  std::atomic<double> decode_only_ms_{0.0};  // only this thread writes it
  // Tokens appended since run_step() began its forward pass (a draw resumed
  // by loop() after its step is outside any step's time, so it is not counted).
  int64_t drawn_in_step_ = 0;  // step thread only
  std::thread thread_;
};

}  // namespace sb
