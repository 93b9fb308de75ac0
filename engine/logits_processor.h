// LogitsProcessor: one sequence's change to its logits before sampling
// (penalties, logit bias, a grammar mask), made per sequence by
// CompletionRequest::make_processor, given a private copy of each step's
// logits right before the sampler, and told the token chosen.
// Contract: process() may only lower or shift its copy; the model's own
// logits are untouched, so reported log-probabilities and the bank's state
// never depend on it. The same calls make the same changes: a processed
// request is as deterministic as any other, and from the bank equals bypass.
// Where it runs: with prepares() true, accept() and prepare() run on the
// sequence's own thread (engine/mask_worker.h) beside the next forward pass;
// process() always runs on the step thread, so it stays cheap (a pass over
// the logits), the search belonging in prepare(). Calls never overlap.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "common/status.h"

namespace sb {

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // True when prepare() does work worth a thread of its own (a grammar).
  virtual bool prepares() const { return false; }
  // What the next token's process() needs that does not depend on the
  // logits (a grammar's allowed set), computed before they exist; the
  // arguments are process()'s. Without it process() computes it itself.
  virtual Status prepare(int64_t tokens_left, const std::function<bool()>& interrupted) {
    (void)tokens_left, (void)interrupted;
    return Status::ok();
  }
  // tokens_left: this token and the ones after it that max_tokens allows.
  // interrupted (may be empty): the request's cancellation, for work long
  // enough to check it (a grammar mask); kCancelled when it said so.
  virtual Status process(std::span<float> logits, int64_t tokens_left, const std::function<bool()>& interrupted) = 0;
  // The sampled token (after process()).
  virtual Status accept(int32_t token) = 0;
};

}  // namespace sb
