#include "engine/mtp_drafter.h"

namespace sb {

void MtpDrafter::draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) {
  outputs_.clear();
  if (max_tokens <= 0 || context.state == nullptr || context.generated.empty()) return;
  std::vector<float> hidden;
  if (!model_.mtp_sync(*context.state, synced_, &kv_, &hidden).is_ok()) return;
  const int64_t n = context.state->position();
  synced_ = n;
  int32_t token = context.generated.back();
  for (int d = 0; d < max_tokens; ++d) {
    MtpStep step;
    step.kv = &kv_;
    step.keep = n + d;
    step.first_pos = n + d;
    step.hidden = hidden;
    step.tokens = std::span<const int32_t>(&token, 1);
    MtpOutput o;
    if (!model_.mtp_forward(step, &o).is_ok()) return;
    token = o.stats.argmax;
    out->push_back(token);
    hidden = o.hidden;
    outputs_.push_back(std::move(o));
  }
}

}  // namespace sb
