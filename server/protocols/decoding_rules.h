// DecodingRules: what a request asks of decoding beyond the sampler's own
// knobs (presence/frequency and repetition penalties, logit_bias, a grammar
// from response_format or tool_choice), made into the engine's per-sequence
// LogitsProcessor.
// Each step, on the sequence's own copy of the logits, in this order:
// logit_bias, repetition_penalty, presence and frequency penalties, then the
// grammar mask (-infinity for tokens that cannot continue a valid, finishable
// output; allowed ones keep their value). The formulas: docs/serving.md,
// "Request validation". Reported logprobs stay the raw model's.
// Thread-safety: immutable once built; make() may be called from any thread
// (once per run of the request: the audit's bypass rerun gets a fresh one).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "constrain/constraint.h"
#include "engine/logits_processor.h"

namespace sb {

struct DecodingRules {
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> prompt;  // for the repetition penalty
  std::shared_ptr<const constrain::Grammar> grammar;
  std::shared_ptr<const constrain::Vocabulary> vocabulary;  // required with a grammar

  bool empty() const {
    return presence_penalty == 0.0f && frequency_penalty == 0.0f && repetition_penalty == 1.0f && logit_bias.empty() &&
           !grammar;
  }
  std::unique_ptr<LogitsProcessor> make() const;
};

}  // namespace sb
