// Sampling one sequence's next token from its own logits row, and the echo
// logprobs of prompt rows.
#include "engine/sequence.h"

namespace sb {
namespace {

// The `k` best alternatives, best first, ties to the lower id.
std::vector<TokenLogprob> top_alternatives(std::span<const float> logits, double log_norm, int k) {
  std::vector<TokenLogprob> out;
  if (k <= 0) return out;
  for (int32_t id : best_ids(logits, static_cast<size_t>(k)))
    out.push_back({id, logprob(logits, static_cast<size_t>(id), log_norm)});
  return out;
}

}  // namespace

Status next_token(Sequence& seq, GeneratedToken* out, const DraftToken* draft) {
  const CompletionRequest& req = seq.request;
  if (req.on_logits) req.on_logits(seq.logits);
  GeneratedToken g;
  if (seq.processor) {
    seq.processed.assign(seq.logits.begin(), seq.logits.end());
    const int64_t left = req.max_tokens - static_cast<int64_t>(seq.result.tokens.size());
    SB_RETURN_IF_ERROR(seq.processor->process(seq.processed, left, req.cancelled));
    g.token = draft ? seq.sampler->sample_draft(seq.processed, nullptr, *draft) : seq.sampler->sample(seq.processed);
  } else {
    g.token = draft ? seq.sampler->sample_draft(seq.logits, &seq.logit_stats, *draft)
                    : seq.sampler->sample(seq.logits, &seq.logit_stats);
  }
  const double log_norm = seq.logit_stats.log_norm;
  g.logprob = logprob(seq.logits, static_cast<size_t>(g.token), log_norm);
  g.top = top_alternatives(seq.logits, log_norm, req.top_logprobs);
  *out = std::move(g);
  return Status::ok();
}

Status accept_token(Sequence& seq, int32_t token, bool more) {
  if (!seq.processor) return Status::ok();
  const CompletionRequest& req = seq.request;
  const int64_t left = req.max_tokens - static_cast<int64_t>(seq.result.tokens.size());
  if (!seq.worker) {
    SB_RETURN_IF_ERROR(seq.processor->accept(token));
    return more ? seq.processor->prepare(left, req.cancelled) : Status::ok();
  }
  LogitsProcessor* processor = seq.processor.get();
  MaskWorker* worker = seq.worker.get();
  // The request (and its cancelled()) outlives the job: the loop retires a
  // sequence only once its worker is idle.
  std::function<bool()> interrupted = [worker, &req] { return worker->abandoned() || (req.cancelled && req.cancelled()); };
  worker->post([processor, token, more, left, interrupted = std::move(interrupted)] {
    SB_RETURN_IF_ERROR(processor->accept(token));
    return more ? processor->prepare(left, interrupted) : Status::ok();
  });
  return Status::ok();
}

void record_prompt_logprobs(Sequence& seq, int64_t first_row, const SequenceOutput& out, int64_t vocab) {
  const int64_t n = seq.prompt_tokens();
  seq.result.prompt_logprobs.resize(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < out.n_rows && first_row + i + 1 < n; ++i) {
    const auto row = std::span<const float>(out.logits).subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab));
    const auto next = static_cast<size_t>(first_row + i + 1);
    seq.result.prompt_logprobs[next] =
        logprob(row, static_cast<size_t>(seq.request.prompt[next]), out.stats[static_cast<size_t>(i)].log_norm);
  }
}

}  // namespace sb
