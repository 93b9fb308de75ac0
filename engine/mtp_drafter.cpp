#include "engine/mtp_drafter.h"

namespace sb {

bool MtpDrafter::commit(const DraftContext& context, MtpOutput* first) {
  const int64_t H = model_.config().hidden_size;
  const int64_t n = static_cast<int64_t>(context.generated.size());
  const int64_t rows = static_cast<int64_t>(context.hidden.size()) / H;
  if (rows <= 0 || rows > n) return false;
  const int64_t from = n - rows;
  // Pairs must follow each other; a gap (none in the step loop) starts over.
  if (from != base_ + committed_) base_ = from, committed_ = 0;
  MtpStep step;
  step.kv = &kv_;
  step.keep = committed_;
  step.first_pos = prompt_tokens_ + from;
  step.hidden = context.hidden.subspan(0, static_cast<size_t>(rows * H));
  step.tokens = context.generated.subspan(static_cast<size_t>(from));
  if (!model_.mtp_forward(step, first).is_ok()) return false;
  committed_ += rows;
  return true;
}

void MtpDrafter::draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) {
  if (max_tokens <= 0) return;
  MtpOutput o;
  if (!commit(context, &o)) return;
  out->push_back(o.stats.argmax);
  const int64_t n = static_cast<int64_t>(context.generated.size());
  for (int d = 1; d < max_tokens; ++d) {
    const int32_t token = out->back();
    MtpStep step;
    step.kv = &kv_;
    step.keep = committed_ + d - 1;
    step.first_pos = prompt_tokens_ + n + d - 1;
    const std::vector<float> hidden = std::move(o.hidden);
    step.hidden = hidden;
    step.tokens = std::span<const int32_t>(&token, 1);
    if (!model_.mtp_forward(step, &o).is_ok()) return;
    out->push_back(o.stats.argmax);
  }
}

}  // namespace sb
