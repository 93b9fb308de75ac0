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
  // The prompt's prefill, which runs the head's layer over every row
  // (docs/model-spec.md 2.9), and those head rows alone (fc and the decoder
  // layer over the prompt's pairs, as one call).
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;
  double prefill_head_ms = 0;
  // What the head's rows add to a prefill without them.
  double prefill_share() const {
    return prefill_ms > prefill_head_ms ? prefill_head_ms / (prefill_ms - prefill_head_ms) : 0;
  }
};

// Times the prompt's prefill and the head's rows over it, `tokens` decode
// steps after it, then as many one-row head steps, twice, and keeps each
// one's best (mean).
// REQUIRES: model.has_mtp(), prompt non-empty.
Status measure_mtp_cost(const Model& model, std::span<const int32_t> prompt, int tokens, MtpCost* out);

// The report's lines for it (a markdown list item, with the 25% target).
std::string mtp_cost_lines(const MtpCost& cost);

}  // namespace sb
