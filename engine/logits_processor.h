// LogitsProcessor: one sequence's change to its logits before sampling:
// penalties, logit bias, a grammar mask. The engine creates one per sequence
// (CompletionRequest::make_processor), hands it a private copy of each step's
// logits right before the sampler, and tells it the token chosen.
//
// Contract: process() may only lower or shift the logits it is given (its
// copy); the model's own logits are untouched, so reported log-probabilities
// (the raw model distribution, see docs/interface.md) and the bank's state
// never depend on it. Given the same sequence of calls it makes the same
// changes: a processed request is as deterministic as any other, and served
// from the bank it equals bypass.
// Where it runs: a processor whose prepares() is true has its accept() and
// prepare() run on its sequence's own thread (engine/mask_worker.h), beside
// the next forward pass; process() always runs on the step thread, so it
// must stay cheap (a pass over the logits), the search belonging in
// prepare(). Calls never overlap: one sequence's object, one call at a time.
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
