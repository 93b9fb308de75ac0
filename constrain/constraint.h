// Constrained decoding: a Grammar enforced on generated tokens by masking the
// logits of every token that cannot continue a valid output.
//  - Vocabulary: the tokenizer's token bytes, indexed once per model, shared
//    by every request;
//  - Constraint: one request's state. mask() sets to -infinity every token
//    that would leave the grammar or leave it unable to finish in the tokens
//    left, and the stop tokens until the output is complete; allowed logits
//    are never changed, so a constrained request is as deterministic as any
//    other (docs/text.md, "Masks"). accept() advances by the chosen token.
// Thread-safety: a Vocabulary is immutable and shared; a Constraint belongs
// to one sequence.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "constrain/grammar.h"
#include "constrain/matcher.h"

namespace sb::constrain {

class Vocabulary {
 public:
  // token_bytes[id]: the bytes of token id; empty for tokens a grammar never
  // produces (special tokens). stop_tokens end the output once it is complete.
  Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_tokens);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& stop_tokens() const { return stops_; }

 private:
  friend class Constraint;
  std::vector<std::string> bytes_;
  std::vector<int32_t> stops_;
  // Tokens by their first byte (one-byte tokens) and by their first two
  // bytes (longer ones), so a mask rules out whole groups with one step.
  std::array<std::vector<int32_t>, 256> single_;
  std::vector<std::vector<int32_t>> by_two_;           // [b0 * 256 + b1]
  std::vector<uint8_t> group_plain_;                   // per by_two_ group: bit k set when every token is plain kind k
  // Tokens every JSON string body (resp. free text) accepts as they are:
  // complete UTF-8 without quotes, backslashes and control characters
  // (resp. without '<', newlines and control characters).
  std::vector<int32_t> json_plain_, text_plain_;
  std::vector<uint8_t> plain_kind_;  // bit 0 json, bit 1 text
  std::vector<int32_t> utf16_units_;
};

class Constraint {
 public:
  // Matcher work (frames entered and copied, bytes compared: Meter) one
  // mask or accept may take: about seventy times the most one mask over
  // Qwen3's 151k-token vocabulary took for the schemas of
  // server_constrained_decoding_test (9.8e5 with copies counted; 6.7e5
  // before they were).
  static constexpr uint64_t kMaxMaskWork = uint64_t{1} << 26;

  // max_work: the budget of one mask() or accept() (tests set a small one).
  Constraint(std::shared_ptr<const Vocabulary> vocabulary, std::shared_ptr<const Grammar> grammar,
             uint64_t max_work = kMaxMaskWork);

  // Masks logits[0, logits.size()) for the next token; tokens_left counts
  // this one (the request's max_tokens minus the tokens generated so far).
  // Bounded work: kCancelled as soon as `interrupted` (may be empty) says
  // so, kResourceExhausted past kMaxMaskWork; the logits are then unusable.
  Status mask(std::span<float> logits, int64_t tokens_left, const std::function<bool()>& interrupted = {});
  // mask() in two halves: prepare() finds the allowed tokens (the search,
  // which needs no logits: it may run before they exist, on another
  // thread), apply() masks logits with them (one pass). apply() REQUIRES a
  // successful prepare() since the last accept().
  Status prepare(int64_t tokens_left, const std::function<bool()>& interrupted = {});
  void apply(std::span<float> logits) const;
  bool prepared() const { return prepared_; }
  // The sampled token; kInvalidArgument if the mask did not allow it.
  Status accept(int32_t token);


  // The matcher work the last prepare() (or mask()) or accept() was charged.
  uint64_t work() const { return meter_.used; }

  bool complete() const { return matcher_.can_end(); }
  bool finished() const { return finished_; }  // a stop token was accepted

 private:
  bool allowed_after(const Matcher& m, int64_t tokens_left, bool budget) const;
  // The allowed tokens, counted; kCancelled or kResourceExhausted as mask().
  Status fill(int64_t tokens_left, bool budget, const std::function<bool()>& interrupted, size_t* count);

  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const Grammar> grammar_;
  Matcher matcher_;
  Matcher first_, second_, scratch_;
  std::vector<uint8_t> allowed_;
  Meter meter_;
  bool finished_ = false;
  bool prepared_ = false;  // allowed_ holds the next token's set
};

}  // namespace sb::constrain
