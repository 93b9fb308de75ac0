// MtpDrafter: drafts with the checkpoint's multi-token-prediction head
// (Model::mtp_forward), depth 1..k: depth 1 pairs the target's hidden row
// with the token it produced; each further depth pairs the head's own output
// row with the token the depth before drafted (its argmax).
//
// The head's keys and values cover the pairs of the generated tokens (the
// first pairs the prompt's last hidden row with the first generated token);
// the prompt's own positions are not in them (docs/model-spec.md, "MTP
// head"). A pair is committed once both its hidden row and its token are
// the target's; the deeper rows of a draft are dropped by the next call.
// So the head's state depends only on the target's tokens and hidden rows,
// which a restored conversation reproduces bit for bit: it drafts the same
// tokens as a cold one. Drafts are proposals: any of them changes no bit of
// a result (engine/speculation.h).
#pragma once

#include <cstdint>

#include "engine/speculation.h"
#include "model/model.h"

namespace sb {

class MtpDrafter final : public Drafter {
 public:
  // REQUIRES: model.has_mtp(); model outlives the drafter.
  MtpDrafter(const Model& model, int64_t prompt_tokens)
      : model_(model), prompt_tokens_(prompt_tokens), kv_(model.new_mtp_state()) {}
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override;

 private:
  // Commits the pairs of the generated tokens context.hidden covers; the
  // last one's output (the first draft token's logits) into *first.
  bool commit(const DraftContext& context, MtpOutput* first);

  const Model& model_;
  int64_t prompt_tokens_;
  State kv_;
  int64_t base_ = 0;       // the generated token of kv_'s first row
  int64_t committed_ = 0;  // kv_ rows that are the target's pairs
};

}  // namespace sb
