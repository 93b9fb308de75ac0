// prefill() and decode(): the one-sequence case of Model::forward().
#include "model/model.h"

#include <algorithm>

namespace sb {

Status Model::prefill(State& state, std::span<const int32_t> tokens, const PrefillOptions& options,
                      PrefillOutput* out) const {
  SequenceStep step;
  step.state = &state;
  step.tokens = tokens;
  step.capture_positions = options.capture_positions;
  step.logits = options.all_logits ? LogitRows::kAll : LogitRows::kLast;
  step.carry = options.carry;
  std::vector<SequenceOutput> outs;
  SB_RETURN_IF_ERROR(forward(std::span<const SequenceStep>(&step, 1), &outs));
  *out = std::move(outs[0]);
  return Status::ok();
}

Status Model::decode(State& state, int32_t token, std::vector<float>* logits) const {
  SequenceStep step;
  step.state = &state;
  step.tokens = std::span<const int32_t>(&token, 1);
  step.decode = true;
  std::vector<SequenceOutput> outs;
  SB_RETURN_IF_ERROR(forward(std::span<const SequenceStep>(&step, 1), &outs));
  logits->assign(outs[0].logits.begin(), outs[0].logits.end());
  return Status::ok();
}

StepLogits StepLogits::join(std::span<const StepLogits> parts) {
  size_t size = 0, nonempty = 0;
  const StepLogits* last = nullptr;
  for (const StepLogits& p : parts)
    if (!p.empty()) {
      size += p.size();
      ++nonempty;
      last = &p;
    }
  if (nonempty <= 1) return last ? *last : StepLogits();
  std::shared_ptr<float[]> buffer = std::make_shared_for_overwrite<float[]>(size);
  float* at = buffer.get();
  for (const StepLogits& p : parts) at = std::copy(p.begin(), p.end(), at);
  return StepLogits(std::move(buffer), 0, size);
}

Status Model::mtp_forward(const MtpStep&, MtpOutput*) const {
  return Status::invalid("this checkpoint has no MTP head");
}

Status Model::mtp_sync(const State&, int64_t, State*, std::vector<float>*) const {
  return Status::invalid("this checkpoint has no MTP head");
}

}  // namespace sb
