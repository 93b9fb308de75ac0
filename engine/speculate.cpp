// A sequence's drafter and each step's draft (engine/speculation.h); the
// verification itself is the step loop's (StepLoop::verify_rows).
#include <algorithm>
#include <chrono>

#include "engine/mtp_drafter.h"
#include "engine/sequence.h"

namespace sb {

void start_speculation(const EngineContext& context, Sequence& seq) {
  const CompletionRequest& req = seq.request;
  const SpeculativeMode mode = req.speculative.mode.value_or(context.options.speculative);
  const int draft_max = req.speculative.draft_max.value_or(context.options.draft_max);
  // Echo requests keep plain steps: their prompt rows' logits are the point.
  if (req.echo || req.max_tokens < 2) return;
  if (req.make_drafter) {
    seq.drafter = req.make_drafter();
    seq.result.speculative.mode = "custom";
  } else if (mode == SpeculativeMode::kMtp || (mode == SpeculativeMode::kAuto && context.model.has_mtp())) {
    // auto: what the checkpoint allows; with an MTP head that is mtp.
    seq.drafter = std::make_unique<MtpDrafter>(context.model);
    seq.result.speculative.mode = "mtp";
  } else if (mode == SpeculativeMode::kNgram || mode == SpeculativeMode::kAuto) {
    seq.drafter = std::make_unique<NgramDrafter>();
    seq.result.speculative.mode = "ngram";
  }
  if (!seq.drafter) return;
  seq.draft_control = DraftControl(draft_max, req.speculative.adaptive);
  seq.acceptance = req.speculative.acceptance.value_or(context.options.speculative_acceptance);
  seq.result.speculative.acceptance_mode = speculative_acceptance_name(seq.acceptance);
}

void propose_draft(const EngineContext& context, Sequence& seq) {
  seq.draft.clear();
  if (!seq.drafter || seq.generated.empty()) return;
  const int64_t left = seq.request.max_tokens - static_cast<int64_t>(seq.generated.size()) - 1;
  const int depth = static_cast<int>(std::min<int64_t>(seq.draft_control.depth(), left));
  if (depth <= 0) return;
  const auto started = std::chrono::steady_clock::now();
  seq.drafter->draft(DraftContext{seq.request.prompt, seq.generated, &seq.state}, depth, &seq.draft);
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - started;
  seq.draft_control.observe_draft(took.count(), static_cast<int>(seq.draft.size()));
  // A drafter's slip must not fail the step: it ends the draft.
  const int64_t vocab = context.model.vocab_size();
  const auto bad = std::find_if(seq.draft.begin(), seq.draft.end(), [&](int32_t t) { return t < 0 || t >= vocab; });
  seq.draft.erase(bad, seq.draft.end());
  if (static_cast<int>(seq.draft.size()) > depth) seq.draft.resize(static_cast<size_t>(depth));
}

}  // namespace sb
