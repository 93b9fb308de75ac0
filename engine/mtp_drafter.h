// MtpDrafter: drafts with the checkpoint's multi-token-prediction head
// (Model::mtp_forward), depth 1..k: depth 1 pairs the target's hidden row
// of the last consumed position (the State's carried row) with the token it
// produced; each further depth pairs the head's own output row with the
// token the depth before drafted (its argmax).
//
// The head's keys and values over every consumed position, prompt included,
// are part of the sequence's model State (model/model.h, has_mtp): the
// forward steps compute them and the bank stores them. The drafter keeps a
// copy (Model::mtp_sync, only the rows added since its last call) to which
// a draft's rows are appended; the next call drops them. So a draft depends
// only on the sequence's tokens: a restored conversation drafts the same
// tokens as a cold one, as llama.cpp's and vLLM's heads do. Drafts are
// proposals: any of them changes no bit of a result (engine/speculation.h).
#pragma once

#include <cstdint>

#include "engine/speculation.h"
#include "model/model.h"

namespace sb {

class MtpDrafter final : public Drafter {
 public:
  // REQUIRES: model.has_mtp(); model outlives the drafter.
  explicit MtpDrafter(const Model& model) : model_(model), kv_(model.new_mtp_state()) {}
  // REQUIRES: context.state, at the position of context.generated.back().
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override;
  // The head's output (logits over the draft vocabulary, argmax) of each
  // depth of the last draft() (tests compare drafts bit for bit).
  const std::vector<MtpOutput>& last_outputs() const { return outputs_; }

 private:
  const Model& model_;
  State kv_;
  int64_t synced_ = 0;  // kv_ rows equal to the State's
  std::vector<MtpOutput> outputs_;
};

}  // namespace sb
