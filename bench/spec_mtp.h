// bench spec's MTP lines (docs/bench/spec.md): what one draft token of the
// MTP head costs beside a decode step of the model, on the same machine and
// threads.
#pragma once

#include <span>
#include <string>

#include "common/status.h"
#include "model/model.h"

namespace sb {

struct MtpCost {
  double step_ms = 0;   // a one-token decode step of the model
  double draft_ms = 0;  // one row of the MTP head (one draft token)
  double share() const { return step_ms > 0 ? draft_ms / step_ms : 0; }
  // The head's rows (its keys and values over every position,
  // docs/model-spec.md 2.9) in every forward step: the prompt's prefill and
  // a decode step, beside the same on the checkpoint loaded without its head.
  int64_t prompt_tokens = 0;
  double prefill_ms = 0, headless_prefill_ms = 0;
  double headless_step_ms = 0;
};

// Times the prompt's prefill and `tokens` decode steps after it on `model`
// and on `headless` (the same checkpoint without its head), then as many
// one-row head steps, twice, and keeps each one's best (mean).
// REQUIRES: model.has_mtp(), prompt non-empty.
Status measure_mtp_cost(const Model& model, const Model& headless, std::span<const int32_t> prompt, int tokens,
                        MtpCost* out);

// The report's lines for it (a markdown list item, with the 25% target).
std::string mtp_cost_lines(const MtpCost& cost);

}  // namespace sb
