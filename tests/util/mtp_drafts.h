// Helpers of the MTP head's tests (model_mtp_head_test,
// model_qwen4exp_mtp_test): a State component by name, a deterministic
// prompt, the head's greedy drafts after a State, a prefill in pieces.
#pragma once

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace sb::testing {

inline size_t component(const State& s, const std::string& name) {
  for (size_t c = 0; c < s.n_components(); ++c)
    if (s.schema().components[c].name == name) return c;
  ADD_FAILURE() << "no component " << name;
  return 0;
}

inline std::vector<int32_t> some_tokens(const Model& m, int n, uint32_t seed) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<int32_t>((seed + 7919u * i) % m.vocab_size()));
  return out;
}

// A draft of `depth` tokens after the State's last position, the first
// pairing its carried row with `token`: every depth's logits.
inline std::vector<std::vector<float>> draft_logits(const Model& m, const State& s, int32_t token, int depth) {
  State kv = m.new_mtp_state();
  std::vector<float> hidden;
  EXPECT_TRUE(m.mtp_sync(s, 0, &kv, &hidden).is_ok());
  std::vector<std::vector<float>> out;
  for (int d = 0; d < depth; ++d) {
    MtpOutput o;
    const MtpStep step{&kv, s.position() + d, s.position() + d, hidden, {&token, 1}};
    EXPECT_TRUE(m.mtp_forward(step, &o).is_ok());
    token = o.stats.argmax;
    hidden = o.hidden;
    out.push_back(std::move(o.logits));
  }
  return out;
}

// A fresh State prefilled in pieces ending at `cuts` (ascending, inside the
// prompt) and at the prompt's end, with a carry (cuts may be off the grid).
inline State prefill_in_pieces(const Model& m, std::span<const int32_t> tokens, std::vector<int64_t> cuts) {
  State s = m.new_state();
  PrefillCarry carry;
  PrefillOptions o;
  o.carry = &carry;
  cuts.push_back(static_cast<int64_t>(tokens.size()));
  int64_t at = 0;
  for (int64_t cut : cuts) {
    PrefillOutput part;
    EXPECT_TRUE(m.prefill(s, tokens.subspan(static_cast<size_t>(at), static_cast<size_t>(cut - at)), o, &part).is_ok());
    at = cut;
  }
  return s;
}

}  // namespace sb::testing
