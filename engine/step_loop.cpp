#include "engine/step_loop.h"

#include <pthread.h>

#include <algorithm>

#include "common/thread_priority.h"
#include "engine/step_plan.h"
#include "model/model.h"

namespace sb {

StepLoop::StepLoop(const EngineContext& context)
    : context_(context),
      budget_(context.options.itl_ratio),
      row_cost_(context.options.verify_row_cost),
      row_cost_now_(row_cost_.value()) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sb-step");  // what `top -H` and the hostile-load test look for
    loop();
  });
}

StepLoop::~StepLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void StepLoop::start(std::unique_ptr<Sequence> seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(seq.get());
    seq.release();  // the loop owns it until retire_finished()
  }
  work_cv_.notify_one();
}

void StepLoop::add_stats(EngineStats* stats) const {
  stats->steps = steps_.load(std::memory_order_relaxed);
  stats->step_tokens = step_tokens_.load(std::memory_order_relaxed);
  stats->peak_batch = peak_batch_.load(std::memory_order_relaxed);
  stats->decode_only_steps = decode_only_steps_.load(std::memory_order_relaxed);
  stats->decode_only_tokens = decode_only_tokens_.load(std::memory_order_relaxed);
  stats->decode_only_ms = decode_only_ms_.load(std::memory_order_relaxed);
  stats->verify_row_cost = row_cost_now_.load(std::memory_order_relaxed);
}

void StepLoop::loop() {
  for (;;) {
    // Sequences whose mask came while the last step ran draw their tokens.
    for (Sequence* seq : running_)
      if (seq->draw.active && !seq->finished) draw_rows(*seq);
    retire_finished();
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Not while every slot waits for its mask: that would spin.
      const size_t slots = static_cast<size_t>(context_.options.max_running);
      work_cv_.wait(lock, [&] {
        return stopping_ || (!waiting_.empty() && running_.size() < slots) || mask_done_ || can_step();
      });
      mask_done_ = false;
      if (stopping_ && waiting_.empty() && running_.empty()) return;
      admit();
    }
    std::vector<Slice> slices = next_step();
    if (!slices.empty()) run_step(slices);
  }
}

bool StepLoop::can_step() const {
  for (const Sequence* seq : running_)
    if (seq->finished ? seq->mask_ready() : !seq->draw.active) return true;
  return false;
}

void StepLoop::mask_done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    mask_done_ = true;
  }
  work_cv_.notify_all();
}

void StepLoop::admit() {
  while (!waiting_.empty() && running_.size() < static_cast<size_t>(context_.options.max_running)) {
    Sequence* seq = waiting_.front();
    waiting_.pop_front();
    seq->result.queue_ms = ms_since(seq->submitted);
    seq->prefill_started = EngineClock::now();
    const SamplingParams& sp = seq->request.sampling;
    seq->sampler.emplace(SamplerConfig{sp.temperature, sp.top_p, sp.top_k, sp.seed, sp.min_p});
    if (seq->request.make_processor) seq->processor = seq->request.make_processor();
    if (seq->processor && seq->processor->prepares()) start_worker(*seq);
    start_speculation(context_, *seq);
    running_.push_back(seq);
  }
  n_running_ = running_.size();
}

void StepLoop::start_worker(Sequence& seq) {
  seq.worker = std::make_unique<MaskWorker>([this] { mask_done(); });
  // The first token's mask, while the prompt is restored and prefilled.
  LogitsProcessor* processor = seq.processor.get();
  MaskWorker* worker = seq.worker.get();
  const CompletionRequest& req = seq.request;
  worker->post([processor, worker, &req] {
    return processor->prepare(req.max_tokens,
                              [worker, &req] { return worker->abandoned() || (req.cancelled && req.cancelled()); });
  });
}

std::vector<StepLoop::Slice> StepLoop::next_step() {
  // Cancelled sequences leave before they cost a row.
  for (Sequence* seq : running_)
    if (seq->request.cancelled && seq->request.cancelled()) finish(*seq, FinishReason::kCancelled);
  std::vector<Sequence*> planned;
  PlanInput input;
  input.batch_tokens = context_.options.batch_tokens;
  input.budget = budget_.state();
  for (Sequence* seq : running_) {
    // A sequence still waiting for its mask sits out this step.
    if (seq->finished || seq->draw.active) continue;
    seq->draft_control.set_row_cost(row_cost_.value(), row_cost_.one_row_ms());
    if (seq->prefilling())
      seq->draft.clear();
    else
      propose_draft(context_, *seq);
    planned.push_back(seq);
    input.running.push_back(PlanSequence{seq->prefilling(), seq->state.position(), seq->prompt_tokens(),
                                         seq->restore_point, seq->request.echo,
                                         static_cast<int64_t>(seq->draft.size())});
  }
  const StepPlan plan = plan_step(input);
  std::vector<Slice> slices;
  slices.reserve(plan.slices.size());
  for (const PlannedSlice& p : plan.slices) {
    Sequence* seq = planned[p.sequence];
    if (!p.decode) {
      slices.push_back(Slice{seq, p.begin, p.end, false, {}});
      continue;
    }
    Slice slice{seq, 0, 0, true, {seq->result.tokens.back().token}};
    slice.tokens.insert(slice.tokens.end(), seq->draft.begin(), seq->draft.begin() + p.draft);
    slices.push_back(std::move(slice));
  }
  return slices;
}

void StepLoop::run_step(std::vector<Slice>& slices) {
  std::vector<SequenceStep> batch(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    const Slice& s = slices[i];
    SequenceStep& step = batch[i];
    step.state = &s.seq->state;
    if (s.decode) {
      step.tokens = s.tokens;
      step.decode = true;
      if (s.tokens.size() > 1) {
        step.logits = LogitRows::kAll;
        step.rollback = &s.seq->rollback;
      }
      continue;
    }
    step.tokens = std::span<const int32_t>(s.seq->request.prompt)
                      .subspan(static_cast<size_t>(s.begin), static_cast<size_t>(s.end - s.begin));
    for (const SnapshotPlace& p : s.seq->places) step.capture_positions.push_back(p.position);
    step.carry = &s.seq->carry;
    step.logits = s.seq->request.echo               ? LogitRows::kAll
                  : s.end == s.seq->prompt_tokens() ? LogitRows::kLast
                                                    : LogitRows::kNone;
  }
  int64_t tokens = 0, decodes = 0;
  for (const SequenceStep& step : batch) {
    tokens += static_cast<int64_t>(step.tokens.size());
    if (step.decode) decodes += static_cast<int64_t>(step.tokens.size());
  }
  const EngineClock::time_point started = EngineClock::now();
  const double waited_before = this_thread_waited_ms();
  steps_.fetch_add(1, std::memory_order_relaxed);
  step_tokens_.fetch_add(static_cast<uint64_t>(tokens), std::memory_order_relaxed);
  if (batch.size() > peak_batch_.load(std::memory_order_relaxed))
    peak_batch_.store(batch.size(), std::memory_order_relaxed);  // only this thread writes it
  std::vector<SequenceOutput> outs;
  Status status;
  drawn_in_step_ = 0;
  try {
    status = context_.model.forward(batch, &outs);
  } catch (const std::exception& e) {
    status = Status::internal(std::string("exception in the forward pass: ") + e.what());
  }
  for (size_t i = 0; i < slices.size(); ++i) {
    Sequence& seq = *slices[i].seq;
    if (!status.is_ok()) {
      seq.status = status;
      finish(seq, FinishReason::kError);
      continue;
    }
    if (slices[i].decode) {
      verify_rows(slices[i], outs[i]);
    } else {
      end_prefill_chunk(slices[i], outs[i]);
    }
  }
  // Sampling and publishing are part of what a running decode waits for.
  const double ms = ms_since(started);
  // The bound is reckoned in what steps cost: without the time this thread
  // waited for a core, which a busy machine adds to any step (a decode-only
  // step measured so would widen the bound, docs/batching.md).
  const double waited = waited_before >= 0 ? this_thread_waited_ms() - waited_before : 0;
  budget_.observe(decodes, tokens - decodes, std::max(ms - waited, 0.0));
  if (decodes == tokens) {
    decode_only_steps_.fetch_add(1, std::memory_order_relaxed);
    decode_only_tokens_.fetch_add(static_cast<uint64_t>(drawn_in_step_), std::memory_order_relaxed);
    decode_only_ms_.store(decode_only_ms_.load(std::memory_order_relaxed) + ms, std::memory_order_relaxed);
    row_cost_.observe(tokens, ms);
    row_cost_now_.store(row_cost_.value(), std::memory_order_relaxed);
  }
}

void StepLoop::end_prefill_chunk(const Slice& slice, SequenceOutput& out) {
  Sequence& seq = *slice.seq;
  ++seq.result.restore.prefill_steps;
  for (RecurrentSnapshot& snap : out.snapshots) seq.snapshots.push_back(std::move(snap));
  const int64_t vocab = context_.model.vocab_size();
  if (seq.request.echo) record_prompt_logprobs(seq, slice.begin, out, vocab);
  if (seq.prefilling()) return;
  seq.result.restore.prefill_ms = ms_since(seq.prefill_started);
  if (seq.request.max_tokens == 0) {
    seq.result.ttft_ms = ms_since(seq.submitted);
    publish_prompt(context_, seq);
    finish(seq, FinishReason::kLength);
    return;
  }
  Sequence::Draw& d = seq.draw;
  d.active = true;
  d.decode = false;
  d.tokens.clear();
  d.logits = std::move(out.logits);
  d.stats.assign(1, out.stats.back());
  d.rows = 1;
  d.row = 0;
  d.before = seq.generated.size();
  draw_rows(seq);
}

void StepLoop::verify_rows(const Slice& slice, SequenceOutput& out) {
  Sequence& seq = *slice.seq;
  Sequence::Draw& d = seq.draw;
  d.active = true;
  d.decode = true;
  d.tokens = slice.tokens;
  d.logits = std::move(out.logits);
  d.stats = std::move(out.stats);
  d.rows = slice.tokens.size();
  d.row = 0;
  d.before = seq.generated.size();
  draw_rows(seq);
}

void StepLoop::draw_rows(Sequence& seq) {
  Sequence::Draw& d = seq.draw;
  const size_t vocab = static_cast<size_t>(context_.model.vocab_size());
  const size_t first = d.logits.size() / vocab - d.rows;  // a prompt's rows before its last
  const bool rejection = seq.acceptance == SpeculativeAcceptance::kRejection && seq.drafter;
  while (d.row < d.rows) {
    if (!seq.mask_ready()) return;  // resumed by loop() once the worker is done
    if (seq.worker && !(seq.status = seq.worker->take())) {
      finish(seq, FinishReason::kError);
      break;
    }
    const size_t row = d.row++;
    seq.logits = std::span<const float>(d.logits).subspan((first + row) * vocab, vocab);
    seq.logit_stats = d.stats[row];
    // Rejection acceptance judges the row's draft token by p/q; exact
    // acceptance draws as plain decoding does and compares below.
    DraftToken draft;
    const bool judged = d.decode && rejection && row + 1 < d.rows;
    if (judged) draft = DraftToken{d.tokens[row + 1], seq.drafter->draft_probs(row)};
    emit_token(seq, judged ? &draft : nullptr);
    // The next row is what plain decoding computes only if the token just
    // drawn is the draft's.
    if (seq.finished || row + 1 == d.rows || seq.generated.back() != d.tokens[row + 1]) break;
  }
  d.active = false;
  if (d.decode) end_verify(seq);
}

void StepLoop::end_verify(Sequence& seq) {
  const Sequence::Draw& d = seq.draw;
  const size_t rows = d.rows, before = d.before;
  const size_t emitted = seq.generated.size() - before;
  size_t accepted = 0;
  while (accepted < emitted && accepted + 1 < rows && seq.generated[before + accepted] == d.tokens[accepted + 1])
    ++accepted;
  // Rows 0..emitted-1 are what plain decoding consumed; the rest roll back.
  if (emitted > 0 && emitted < rows && !context_.hooks.keep_rejected_rows) {
    seq.status = context_.model.roll_back(seq.state, seq.rollback, static_cast<int64_t>(emitted));
    if (!seq.status.is_ok()) return finish(seq, FinishReason::kError);
  }
  SpeculativeRecord& record = seq.result.speculative;
  ++record.steps;
  record.tokens += static_cast<int64_t>(emitted);
  record.drafted += static_cast<int64_t>(rows - 1);
  record.accepted += static_cast<int64_t>(accepted);
  if (seq.drafter) {
    record.row_cost = seq.draft_control.row_cost();
    record.draft_cost = seq.draft_control.draft_cost();
  }
  if (seq.drafter &&
      seq.draft_control.observe(static_cast<int>(rows - 1), static_cast<int>(accepted), static_cast<int>(emitted)))
    ++record.switched_off;
}

void StepLoop::emit_token(Sequence& seq, const DraftToken* draft) {
  const CompletionRequest& req = seq.request;
  GeneratedToken g;
  seq.status = next_token(seq, &g, draft);
  if (!seq.status.is_ok()) return finish(seq, FinishReason::kError);
  const bool first = seq.result.tokens.empty();
  if (first) seq.result.ttft_ms = ms_since(seq.submitted);
  seq.result.tokens.push_back(g);
  seq.generated.push_back(g.token);
  ++drawn_in_step_;
  bool go_on = true;
  if (req.on_token) {
    try {
      go_on = req.on_token(g);
    } catch (const std::exception& e) {
      seq.status = Status::internal(std::string("exception in on_token: ") + e.what());
      go_on = false;
    }
  }
  // Before the next decode step appends to the State.
  if (first) publish_prompt(context_, seq);
  if (!seq.status.is_ok()) return finish(seq, FinishReason::kError);
  if (!go_on) return finish(seq, FinishReason::kCancelled);
  if (std::find(req.stop_tokens.begin(), req.stop_tokens.end(), g.token) != req.stop_tokens.end())
    return finish(seq, FinishReason::kStop);
  if (static_cast<int64_t>(seq.result.tokens.size()) >= req.max_tokens) return finish(seq, FinishReason::kLength);
  if (!(seq.status = accept_token(seq, g.token, true))) return finish(seq, FinishReason::kError);
}

void StepLoop::finish(Sequence& seq, FinishReason reason) {
  if (seq.finished) return;
  seq.finished = true;
  seq.result.finish_reason = reason;
  seq.draw.active = false;
  if (seq.worker) seq.worker->abandon();
}

void StepLoop::retire_finished() {
  std::vector<Sequence*> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A waiting sequence cancelled before it was admitted never runs.
    for (Sequence* seq : waiting_)
      if (seq->request.cancelled && seq->request.cancelled()) {
        seq->result.finish_reason = FinishReason::kCancelled;
        seq->done = true;
        retired.push_back(seq);
      }
    std::erase_if(waiting_, [](Sequence* seq) { return seq->done; });
    // A worker still running its job holds the request: the sequence waits.
    for (Sequence* seq : running_)
      if (seq->finished && seq->mask_ready()) {
        seq->done = true;
        retired.push_back(seq);
      }
    std::erase_if(running_, [](Sequence* seq) { return seq->done; });
    n_running_ = running_.size();
  }
  for (Sequence* seq : retired) {
    // on_retired holds what the sequence's request lives in: it goes last.
    auto on_retired = std::move(seq->on_retired);
    if (on_retired) on_retired(*seq);
    delete seq;
  }
}

}  // namespace sb
